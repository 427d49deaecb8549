"""Clean-ups of an imported payload before it is split into dispatches.

- Runtime assertions (`cf.assert`, e.g. torch-mlir's "divisor is not zero" checks inside
  element-wise bodies) are dropped, as a release build drops them: the vectorizer cannot
  take a linalg body that holds one, so they would keep the whole op scalar.
- A 2-D transpose feeding a matmul operand (how a Linear layer's [out, in] weight arrives)
  becomes that matmul's indexing map, so the contraction reads the weight where it lies
  (packing B from [N, K] rows) instead of copying it transposed on every call.
- A slice of a slice (torch slices one dim at a time) reads the first slice's source: one
  copy instead of one per dim.
- A dispatch read back as a payload of its own (tuned or timed alone) writes its result to
  whole output buffers again, not to views of them.
- A gather's (an embedding's) indices are read in its body, where the vectorizer sees one
  index per row (`ir.gathers`).
- The element-wise ops and reductions between a channels-last transpose and its inverse (a
  LayerNorm2d) are computed on the untransposed input (`channels_last`).
- An argmax or argmin becomes two row reductions the row families vectorize
  (`arg_reductions`), and a reduction of a whole tensor to a scalar a row reduction and a
  reduction of its rows (`full_reductions`).
- A contraction over several row dims (a Linear on [batch, tokens, features], once
  element-wise fusion has moved its reshapes into it) becomes a 2-D `linalg.matmul` between
  reshapes, the root the contraction family schedules.
"""

from __future__ import annotations

from collections.abc import Callable

from mlir import ir
from mlir.dialects import linalg, tensor

from mlirtune.dispatch.arg_reductions import split_arg_reductions
from mlirtune.dispatch.channels_last import compute_channels_first
from mlirtune.dispatch.collapse import collapse_row_dims, store_into_whole_buffers
from mlirtune.dispatch.full_reductions import split_full_reductions
from mlirtune.dispatch.trailing_reductions import collapse_trailing_reductions
from mlirtune.ir.gathers import read_indices_in_bodies
from mlirtune.ir.inspect import defining_op, ops_named
from mlirtune.ir.maps import projection_map


def collapse_after_fusion(function: ir.Operation) -> int:
    """Collapse again what element-wise fusion expanded (it moves reshapes into their
    producers): contractions over several row dims (`collapse_row_dims`) and reductions
    over innermost dims (`collapse_trailing_reductions`); returns how many."""
    return collapse_row_dims(function) + collapse_trailing_reductions(function)


def prepare_for_dispatch(function: ir.Operation) -> list[str]:
    """Apply the clean-ups to `function` in place; returns one note per kind of change."""
    store_into_whole_buffers(function)  # a dispatch's own payload, as the split wrote it
    notes = []
    for clean_up, note in CLEAN_UPS:
        changed = clean_up(function)
        if changed:
            notes.append(f"{changed} {note}")
    return notes


def _merge_slices_of_slices(function: ir.Operation) -> int:
    """Rebuild each static `tensor.extract_slice` of another as one slice of the other's
    source (offsets through the outer strides, strides multiplied): torch slices a tensor
    one dim at a time, and each slice would be a copy of its own (a strided 3-D
    convolution's eight input phases took fourteen copies, three times the input)."""
    slices = [op for op in ops_named(function, "tensor.extract_slice") if _static_slice(op)]
    merged = 0
    for op in slices:  # producers first: a chain of three merges from its top down
        outer = defining_op(op.operands[0])
        if outer is None or outer.name != "tensor.extract_slice" or not _static_slice(outer):
            continue
        outer_offsets, outer_strides = (
            _array(outer, k) for k in ("static_offsets", "static_strides")
        )
        offsets, sizes, strides = (
            _array(op, k) for k in ("static_offsets", "static_sizes", "static_strides")
        )
        with ir.InsertionPoint(op), op.location:
            result = tensor.extract_slice(
                op.results[0].type,
                outer.operands[0],
                [],
                [],
                [],
                [o + i * s for o, i, s in zip(outer_offsets, offsets, outer_strides, strict=True)],
                sizes,
                [a * b for a, b in zip(outer_strides, strides, strict=True)],
            )
        op.results[0].replace_all_uses_with(result)
        op.erase()
        if not list(outer.results[0].uses):
            outer.erase()
        merged += 1
    return merged


def _static_slice(op: ir.Operation) -> bool:
    """A slice with static offsets, sizes and strides that keeps every dim (no rank drop)."""
    source, result = (ir.ShapedType(v.type) for v in (op.operands[0], op.results[0]))
    return len(op.operands) == 1 and source.rank == result.rank


def _array(op: ir.Operation, name: str) -> list[int]:
    return list(ir.DenseI64ArrayAttr(op.attributes[name]))


def _drop_assertions(function: ir.Operation) -> int:
    """Erase the assertions, and the arith ops that computed only their conditions (a
    gather's bounds checks would read its indices still)."""
    asserts = ops_named(function, "cf.assert")
    for op in asserts:
        condition = op.operands[0]
        op.erase()
        _erase_if_dead(condition)
    return len(asserts)


def _erase_if_dead(value: ir.Value) -> None:
    """Erase the arith op defining `value` once nothing reads it, and so up its operands."""
    op = defining_op(value)
    if op is None or not op.name.startswith("arith.") or any(list(r.uses) for r in op.results):
        return
    operands = list(op.operands)
    op.erase()
    for operand in operands:
        _erase_if_dead(operand)


def _fold_transposes_into_matmuls(function: ir.Operation) -> int:
    """Rebuild each default-layout `linalg.matmul` whose A or B is a 2-D `linalg.transpose`
    with maps that read the transpose's input; the transposes left unused are erased."""
    matmuls = [op for op in ops_named(function, "linalg.matmul") if _default_layout(op)]
    folded = 0
    for op in matmuls:
        a, b, init = op.operands
        a_source, b_source = _transposed_source(a), _transposed_source(b)
        if a_source is None and b_source is None:
            continue
        # Loops (m, n, k): A as [K, M] when transposed, B as [N, K].
        a_map = projection_map(3, [2, 0] if a_source is not None else [0, 2])
        b_map = projection_map(3, [1, 2] if b_source is not None else [2, 1])
        with ir.InsertionPoint(op), op.location:
            result = linalg.matmul(
                a_source if a_source is not None else a,
                b_source if b_source is not None else b,
                outs=[init],
                indexing_maps=[a_map, b_map, projection_map(3, [0, 1])],
            )
        op.results[0].replace_all_uses_with(result)
        transposes = [v.owner.operation for v in (a, b) if _transposed_source(v) is not None]
        op.erase()
        for transpose in transposes:
            if not list(transpose.results[0].uses):
                transpose.erase()
        folded += (a_source is not None) + (b_source is not None)
    return folded


def _default_layout(matmul: ir.Operation) -> bool:
    maps = [ir.AffineMapAttr(m).value for m in linalg.get_indexing_maps(matmul)]
    return maps == [projection_map(3, dims) for dims in ([0, 2], [2, 1], [0, 1])]


def _transposed_source(value: ir.Value) -> ir.Value | None:
    """The input of the 2-D `linalg.transpose` (permutation [1, 0]) defining `value`."""
    if isinstance(value.owner, ir.Block):
        return None
    owner = value.owner.operation
    if owner.name != "linalg.transpose":
        return None
    permutation = list(ir.DenseI64ArrayAttr(owner.attributes["permutation"]))
    return owner.operands[0] if permutation == [1, 0] else None


# Each clean-up, in order, and what its note says of the count it returns.
CLEAN_UPS: tuple[tuple[Callable[[ir.Operation], int], str], ...] = (
    (_drop_assertions, "runtime assertion(s) (cf.assert) dropped"),
    (_fold_transposes_into_matmuls, "transposed matmul operand(s) read in place"),
    (collapse_row_dims, "contraction(s) over several row dims made 2-D matmuls"),
    (_merge_slices_of_slices, "slice(s) of slices read their source directly"),
    (read_indices_in_bodies, "gather index input(s) read in the gather's body"),
    (compute_channels_first, "channels-last chain(s) computed on the channels-first input"),
    (split_arg_reductions, "argmax/argmin reduction(s) split into an extreme and its index"),
    (split_full_reductions, "whole-tensor reduction(s) split into rows and a sum of rows"),
    (collapse_trailing_reductions, "reduction(s) over innermost dims made row reductions"),
)
