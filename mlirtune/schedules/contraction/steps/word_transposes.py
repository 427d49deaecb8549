"""Transpose groups of narrow elements as 32-bit words.

A bf16 or int8 B stored [N, K] (a Linear layer's weight) reaches the AMX tiles' VNNI layout
`B_vnni[k // g, n, k % g]` by a transpose in which each group of g = 2 bf16 (4 int8) moves
as one: a group is a 32-bit word of a row of B. The AMX schedule (contraction/dot.py)
packs such a B in squares of 16 x 16 groups, each a `vector.transpose` of [16, 16, g]
narrow elements with the permutation [1, 0, 2]. Lowered as it is, that transpose moves
elements one by one.

This step rewrites each such transpose as a bitcast to [16, 16] 32-bit words, a 2-D
transpose of them, and a bitcast back. `convert-vector-to-llvm` lowers the word transpose
to the AVX-512 16 x 16 shuffle sequence (`vector-transpose-lowering=shuffle16x16`,
lower_cpu.yaml). Registered as the descriptor step `transpose-groups-as-words`
(mlirtune.pipeline.steps).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import vector

from mlirtune.ir.inspect import ops_named
from mlirtune.schedules.contraction.steps.flatten_transfers import shape_cast_folded

WORD_BITS = 32
# The permutation that swaps two outer dims and keeps the groups whole.
GROUP_TRANSPOSE = [1, 0, 2]


def transpose_groups_as_words(module: ir.Module) -> None:
    """Rewrite every transpose of 32-bit groups in `module` in place."""
    i32 = ir.IntegerType.get_signless(WORD_BITS)
    for op in ops_named(module.operation, "vector.transpose"):
        source = op.operands[0]
        source_type = ir.VectorType(source.type)
        permutation = list(ir.DenseI64ArrayAttr(op.attributes["permutation"]))
        if permutation != GROUP_TRANSPOSE or not _groups_are_words(source_type):
            continue
        rows, columns, group = source_type.shape
        element = source_type.element_type
        with op.location, ir.InsertionPoint(op):
            # As rows of words: [rows, columns * group] narrow elements are [rows, columns]
            # words, a bitcast per row (an [.., group] bitcast would be one per group).
            flat = shape_cast_folded(source, ir.VectorType.get([rows, columns * group], element))
            words = vector.bitcast(ir.VectorType.get([rows, columns], i32), flat)
            transposed = vector.transpose(ir.VectorType.get([columns, rows], i32), words, [1, 0])
            back = vector.bitcast(ir.VectorType.get([columns, rows * group], element), transposed)
            result = vector.shape_cast(op.result.type, back)
        op.result.replace_all_uses_with(result)
        op.erase()


def _groups_are_words(vector_type: ir.VectorType) -> bool:
    """Whether `vector_type` is [rows, columns, g] of narrow elements, g of them 32 bits."""
    element = vector_type.element_type
    if not isinstance(element, ir.FloatType | ir.IntegerType) or element.width >= WORD_BITS:
        return False
    return vector_type.rank == 3 and vector_type.shape[2] * element.width == WORD_BITS
