"""Shuffle bf16 vectors as 16-bit integers.

A `vector.shuffle` of bf16 lanes reaches LLVM as a shuffle of `bfloat` vectors, which the
x86 backend takes apart lane by lane (a `vpextrw` and a `vpbroadcastw` per lane), even on
AVX512-BF16 hosts. The same lanes as `i16` are one `vpermt2w` per register. The VNNI pack
of a bf16 B interleaves two rows of B with such a shuffle (schedules/contraction/dot.py):
lane by lane it took about a third of the AMX path's time at 512^3 (Intel Xeon with AMX).

This step bitcasts each bf16 shuffle's operands to i16, shuffles them with the same mask
and bitcasts the result back. Registered as the descriptor step `shuffle-bf16-as-i16`
(mlirtune.pipeline.steps).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import vector

from mlirtune.ir.inspect import ops_named


def shuffle_bf16_as_i16(module: ir.Module) -> None:
    """Rewrite every bf16 `vector.shuffle` of `module` in place."""
    i16 = ir.IntegerType.get_signless(16)
    for op in ops_named(module.operation, "vector.shuffle"):
        result_type = ir.VectorType(op.result.type)
        if not isinstance(result_type.element_type, ir.BF16Type):
            continue
        mask = list(ir.DenseI64ArrayAttr(op.attributes["mask"]))
        with op.location, ir.InsertionPoint(op):
            operands, mask = _shuffled_rows(list(op.operands), mask)
            as_i16 = [vector.bitcast(_as_i16(value.type, i16), value) for value in operands]
            shuffled = vector.shuffle(as_i16[0], as_i16[1], mask)
            back = vector.bitcast(result_type, shuffled)
        op.result.replace_all_uses_with(back)
        op.erase()


def _shuffled_rows(operands: list[ir.Value], mask: list[int]) -> tuple[list[ir.Value], list[int]]:
    """A shuffle of one two-row vector's lanes with itself (a shape_cast of [2, N] to
    [2N], as the lowered transpose of the pack is) shuffles the two rows instead: the
    bf16 concatenation would be lowered lane by lane too."""
    source = operands[0].owner
    if operands[0] != operands[1] or not (
        isinstance(source, ir.OpView) and source.operation.name == "vector.shape_cast"
    ):
        return operands, mask
    rows = source.operation.operands[0]
    shape = ir.VectorType(rows.type).shape
    if len(shape) != 2 or shape[0] != 2:
        return operands, mask
    width = 2 * shape[1]  # lanes of one operand; the second operand's are the same lanes
    extracted = [vector.extract(rows, [], [row]) for row in range(2)]
    return extracted, [lane % width for lane in mask]


def _as_i16(vector_type: ir.Type, i16: ir.IntegerType) -> ir.VectorType:
    return ir.VectorType.get(ir.VectorType(vector_type).shape, i16)
