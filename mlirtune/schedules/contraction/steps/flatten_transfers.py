"""Flatten n-D vector transfers whose rows are narrower than a register into 1-D ones.

`convert-vector-to-scf{full-unroll}` unrolls an n-D transfer into one access per
innermost row. For rows of a few bytes, such as the bf16 pairs of a VNNI-packed panel
(`vector<16x2xbf16>`, 16 rows of 4 bytes), that is 16 scalar loads and a chain of
inserts where one 64-byte load would do. Where the transferred rows are contiguous in a
buffer (whole inner dims, unit strides, zero indices inside them), the transfer reads or
writes the collapsed buffer instead, as one vector, shape-cast to the n-D type.

Registered as the descriptor step `flatten-narrow-transfers` (mlirtune.pipeline.steps); it
runs after bufferization, on memref transfers. Wider rows are left alone: they are whole
registers already.
"""

from __future__ import annotations

import math

from mlir import ir
from mlir.dialects import arith, memref, vector

from mlirtune.ir.constants import all_zero

# Rows narrower than this many bits are flattened (the narrowest vector register).
NARROW_ROW_BITS = 128


def flatten_narrow_transfers(module: ir.Module) -> None:
    """Rewrite every eligible `vector.transfer_read` / `vector.transfer_write` in place."""
    transfers: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in ("vector.transfer_read", "vector.transfer_write"):
            transfers.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    for op in transfers:
        view = op.opview
        vector_type = ir.VectorType(
            view.vector.type if op.name == "vector.transfer_read" else view.valueToStore.type
        )
        rank = _flattenable_rank(view, vector_type)
        if rank:
            _flatten(view, vector_type, rank)


def _flattenable_rank(view: ir.OpView, vector_type: ir.VectorType) -> int:
    """How many trailing buffer dims the transfer covers contiguously (0: leave it). The
    vector's leading dims may stay outside them: a [1, 32, 2] row of pairs in a
    [K/2, NC, 2] buffer covers 64 contiguous elements, a [16, 16, 2] square of them 16 rows
    of 32."""
    shape = vector_type.shape
    rank = len(shape)
    if rank < 2 or view.mask is not None or not isinstance(view.base.type, ir.MemRefType):
        return 0
    element = vector_type.element_type
    if not isinstance(element, ir.FloatType | ir.IntegerType):
        return 0
    bits = element.width
    if shape[-1] * bits >= NARROW_ROW_BITS:
        return 0
    buffer = ir.MemRefType(view.base.type)
    if buffer.rank < rank:  # a broadcast read (MLIR asserts on a minor identity map of it)
        return 0
    if view.permutation_map.value != ir.AffineMap.get_minor_identity(buffer.rank, rank):
        return 0
    if not all(ir.BoolAttr(flag).value for flag in view.in_bounds):
        return 0
    while rank >= 2:
        if _contiguous(view, buffer, shape[len(shape) - rank :]):
            return rank
        rank -= 1
    return 0


def _contiguous(view: ir.OpView, buffer: ir.MemRefType, shape: list[int]) -> bool:
    """Whether a transfer of `shape` (the vector's trailing dims) covers one contiguous run
    of the buffer's trailing dims."""
    rank = len(shape)
    strides, _ = buffer.get_strides_and_offset()
    inner_shape = buffer.shape[buffer.rank - rank + 1 :]
    if list(inner_shape) != list(shape[1:]) or strides[-1] != 1:
        return False
    # Each collapsed dim's stride is the next one's times its size: one contiguous row.
    for dim in range(buffer.rank - rank, buffer.rank - 1):
        if strides[dim] != strides[dim + 1] * buffer.shape[dim + 1]:
            return False
    return all_zero(list(view.indices)[buffer.rank - rank + 1 :])


def _flatten(view: ir.OpView, vector_type: ir.VectorType, rank: int) -> None:
    """Rewrite the transfer on the buffer with its `rank` trailing dims collapsed: one row
    per index of the vector's leading dims (one vector where they are all unit)."""
    buffer = ir.MemRefType(view.base.type)
    outer = buffer.rank - rank
    reassociation = [[dim] for dim in range(outer)] + [list(range(outer, buffer.rank))]
    inner = math.prod(buffer.shape[outer + 1 :])
    leading = vector_type.shape[: vector_type.rank - rank]
    rows = [] if all(extent == 1 for extent in leading) else leading
    row_length = math.prod(vector_type.shape[vector_type.rank - rank :])
    flat_type = ir.VectorType.get([*rows, row_length], vector_type.element_type)
    with ir.InsertionPoint(view), view.location:
        strides, offset = buffer.get_strides_and_offset()
        collapsed_shape = [*buffer.shape[:outer], math.prod(buffer.shape[outer:])]
        identity_layout = isinstance(buffer.layout, ir.AffineMapAttr)
        layout = (
            None if identity_layout else ir.StridedLayoutAttr.get(offset, [*strides[:outer], 1])
        )
        collapsed_type = ir.MemRefType.get(
            collapsed_shape, buffer.element_type, layout, buffer.memory_space
        )
        collapsed = memref.CollapseShapeOp(collapsed_type, view.base, reassociation).result
        index_type = ir.IndexType.get()
        row = arith.MulIOp(
            list(view.indices)[outer], arith.ConstantOp(index_type, inner).result
        ).result
        indices = [*list(view.indices)[:outer], row]
        dims = len(flat_type.shape)
        identity = ir.AffineMapAttr.get(ir.AffineMap.get_minor_identity(len(collapsed_shape), dims))
        in_bounds = ir.ArrayAttr.get([ir.BoolAttr.get(True)] * dims)
        if view.operation.name == "vector.transfer_read":
            flat = vector.TransferReadOp(
                flat_type, collapsed, indices, identity, view.padding, in_bounds
            ).result
            reshaped = vector.ShapeCastOp(vector_type, flat).result
            view.result.replace_all_uses_with(reshaped)
        else:
            flat = shape_cast_folded(view.valueToStore, flat_type)
            vector.TransferWriteOp(None, flat, collapsed, indices, identity, in_bounds)
    view.operation.erase()


def shape_cast_folded(value: ir.Value, flat_type: ir.VectorType) -> ir.Value:
    """`value` shape-cast to `flat_type`, or the value it was shape-cast from where that
    has the type already: n-D shape casts lower element by element, and a pair of them
    would not fold before then."""
    owner = value.owner
    if (
        isinstance(owner, ir.OpView)
        and owner.operation.name == "vector.shape_cast"
        and owner.operation.operands[0].type == flat_type
    ):
        return owner.operation.operands[0]
    return vector.ShapeCastOp(flat_type, value).result
