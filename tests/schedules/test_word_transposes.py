"""The `transpose-groups-as-words` step: a transpose of [rows, columns, g] narrow elements
that keeps each 32-bit group whole becomes a 2-D transpose of 32-bit words between
row-wise bitcasts; other transposes are left alone."""

from __future__ import annotations

import pytest
from mlir import ir

from mlirtune.ir.inspect import op_counts, ops_named
from mlirtune.schedules.contraction.steps.word_transposes import transpose_groups_as_words

# A square of B [N, K] rows read as the vectorized pack reads them, cast to groups and
# transposed into the VNNI layout.
SQUARE = """
func.func @square(%rows: vector<16x{WIDTH}x{TYPE}>) -> vector<16x16x{GROUP}x{TYPE}> {
  %groups = vector.shape_cast %rows : vector<16x{WIDTH}x{TYPE}> to vector<16x16x{GROUP}x{TYPE}>
  %t = vector.transpose %groups, [1, 0, 2]
    : vector<16x16x{GROUP}x{TYPE}> to vector<16x16x{GROUP}x{TYPE}>
  return %t : vector<16x16x{GROUP}x{TYPE}>
}
"""


def square(element: str, group: int) -> str:
    return (
        SQUARE.replace("{WIDTH}", str(16 * group))
        .replace("{GROUP}", str(group))
        .replace("{TYPE}", element)
    )


@pytest.mark.parametrize(("element", "group"), [("bf16", 2), ("i8", 4)])
def test_groups_of_32_bits_are_transposed_as_words(element, group):
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(square(element, group))
        transpose_groups_as_words(module)
        assert module.operation.verify()
        (transpose,) = ops_named(module.operation, "vector.transpose")
        assert str(transpose.result.type) == "vector<16x16xi32>"
        # The rows' cast to groups is bypassed: the words come from the rows themselves.
        (first_bitcast, _) = ops_named(module.operation, "vector.bitcast")
        assert str(first_bitcast.operands[0].type) == f"vector<16x{16 * group}x{element}>"


@pytest.mark.parametrize(("element", "group"), [("f32", 1), ("bf16", 4), ("i8", 2)])
def test_other_transposes_are_left_alone(element, group):
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(square(element, group))
        before = op_counts(module)
        transpose_groups_as_words(module)
        assert op_counts(module) == before
