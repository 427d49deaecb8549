"""Reductions of a whole tensor to a scalar as a row reduction, then a sum of its rows.

torch-mlir lowers a loss's mean, a Frobenius norm or a KL divergence to one linalg.generic
whose loops are all reductions ([R, C] -> a 0-d result). The row families tile the rows of
the output, which it has none of, so it was lowered untuned (a Huber loss at 0.6x eager).
Split into the same reduction over the innermost loop alone ([R, C] -> [R], filled with the
combiner's identity), which the row families tile and vectorize, and the reduction of those
R partial results by the same combiner into the original output.
"""

from __future__ import annotations

import math

from mlir import ir
from mlir.dialects import arith, linalg, tensor

from mlirtune.ir.inspect import defining_op, filled_with, ops_named
from mlirtune.ir.maps import generic, identity_map, projection_map
from mlirtune.ir.roots import indexing_maps, loop_sizes, reduction_loops

# Elements a row of the split reduction holds at least, where its inputs allow (`_rows`).
ROW_ELEMENTS = 1024
# Per combiner: its identity (where the partial results start) and its builder.
COMBINERS = {
    "arith.addf": (0.0, arith.addf),
    "arith.mulf": (1.0, arith.mulf),
    "arith.maximumf": (-math.inf, arith.maximumf),
    "arith.minimumf": (math.inf, arith.minimumf),
}


def split_full_reductions(function: ir.Operation) -> int:
    """Rewrite each whole-tensor reduction in `function` as two; returns how many."""
    found = [(op, _combiner(op)) for op in ops_named(function, "linalg.generic")]
    split = [(op, name) for op, name in found if name]
    for op, name in split:
        _split(op, name)
    return len(split)


def _combiner(op: ir.Operation) -> str | None:
    """The combiner's name where `op` reduces two or more static loops, all of them, into a
    0-d result (`combiner`)."""
    if len(op.results) != 1 or ir.RankedTensorType(op.results[0].type).rank != 0:
        return None
    sizes = loop_sizes(op)
    if sizes is None or len(sizes) < 2 or len(reduction_loops(op)) != len(sizes):
        return None
    return combiner(op)


def combiner(op: ir.Operation) -> str | None:
    """The name of the op (of COMBINERS) that `op`'s body folds each value into its one
    result with, where that result starts filled with the combiner's identity and is read
    by the combiner alone; else None."""
    if len(op.results) != 1:
        return None
    block = op.regions[0].blocks[0]
    accumulator = block.arguments[len(block.arguments) - 1]
    combine = defining_op(list(block.operations)[-1].operands[0])
    if combine is None or combine.name not in COMBINERS:
        return None
    uses = [use.owner for use in accumulator.uses]
    if uses != [combine] or accumulator not in list(combine.operands):
        return None
    if filled_with(op.operands[len(op.operands) - 1]) != COMBINERS[combine.name][0]:
        return None
    return combine.name


def _split(op: ir.Operation, name: str) -> None:
    """The reduction into rows (`_rows`), then over the rows, collapsed into one loop."""
    init = op.operands[len(op.operands) - 1]
    identity, combine = COMBINERS[name]
    with ir.InsertionPoint(op), op.location:
        rows = _rows(op, identity)
        shape = ir.RankedTensorType(rows.type).shape
        if len(shape) > 1:  # one loop of rows: a reduction of several would be split again
            rows = collapsed(rows, [math.prod(shape)], [list(range(len(shape)))])
        total = generic(
            [rows],
            init,
            [identity_map(1), ir.AffineMap.get(1, 0, [])],
            ["reduction"],
            lambda row, accumulated: combine(row, accumulated),
        )
    op.results[0].replace_all_uses_with(total)
    op.erase()


def _rows(op: ir.Operation, identity: float) -> ir.Value:
    """`op`'s reduction over its innermost loop alone, an output of its other loops filled
    with `identity`: its body, its inputs. Inputs all read whole in loop order, with no
    loop index in the body, are read as [R, C] rows instead, C the innermost loops' product
    from ROW_ELEMENTS up (a Frobenius norm of [8, 32, 64, 64]: rows of 4096, not 64)."""
    sizes = loop_sizes(op)
    inputs = list(op.operands)[: len(op.operands) - 1]
    maps = indexing_maps(op)[: len(inputs)]
    rank = len(sizes)
    if all(m == identity_map(rank) for m in maps) and not indexes_loops(op):
        split = max([k for k in range(1, rank) if math.prod(sizes[k:]) >= ROW_ELEMENTS] or [1])
        shape = [math.prod(sizes[:split]), math.prod(sizes[split:])]
        groups = [list(range(split)), list(range(split, rank))]
        inputs = [collapsed(value, shape, groups) for value in inputs]
        sizes, maps, rank = shape, [identity_map(2)] * len(inputs), 2
    element = element_of(op)
    start = arith.constant(element, identity)
    out = linalg.fill(start, outs=[tensor.empty(sizes[:-1], element)])
    maps = [*maps, projection_map(rank, range(rank - 1))]
    iterators = ["parallel"] * (rank - 1) + ["reduction"]
    return generic(inputs, out, maps, iterators, lambda *args: cloned_body(op, args))


def indexes_loops(op: ir.Operation) -> bool:
    return any(inner.name == "linalg.index" for inner in op.regions[0].blocks[0].operations)


def collapsed(value: ir.Value, shape: list[int], groups: list[list[int]]) -> ir.Value:
    element = ir.RankedTensorType(value.type).element_type
    return tensor.collapse_shape(ir.RankedTensorType.get(shape, element), value, groups)


def element_of(op: ir.Operation) -> ir.Type:
    return ir.RankedTensorType(op.results[0].type).element_type


def cloned_body(op: ir.Operation, arguments: tuple[ir.Value, ...]) -> ir.Value:
    """The ops of `op`'s body cloned at the insertion point, its block arguments read as
    `arguments`; returns the value its yield yields."""
    block = op.regions[0].blocks[0]
    mapping = dict(zip(block.arguments, arguments, strict=True))
    *body, done = list(block.operations)
    for inner in body:
        copy = inner.clone()
        for position, value in enumerate(copy.operands):
            if value in mapping:
                copy.operands[position] = mapping[value]
        for old, new in zip(inner.results, copy.results, strict=True):
            mapping[old] = new
    yielded = done.operands[0]
    return mapping.get(yielded, yielded)
