"""The `flatten-narrow-transfers` step: n-D transfers of sub-register rows that lie
contiguously in their buffer become one 1-D transfer; everything else is left alone."""

from __future__ import annotations

from mlir import ir

from mlirtune.ir.inspect import ops_named
from mlirtune.schedules.contraction.steps.flatten_transfers import flatten_narrow_transfers

PAIRS = """
func.func @pairs(%panel: memref<8x16x2xbf16>, %out: memref<8x16x2xbf16>, %k: index) {
  %c0 = arith.constant 0 : index
  %pad = arith.constant 0.0 : bf16
  %v = vector.transfer_read %panel[%k, %c0, %c0], %pad {in_bounds = [true, true]}
    : memref<8x16x2xbf16>, vector<16x2xbf16>
  vector.transfer_write %v, %out[%k, %c0, %c0] {in_bounds = [true, true]}
    : vector<16x2xbf16>, memref<8x16x2xbf16>
  return
}
"""
# Rows of a whole register, rows narrower than the buffer's, and rows of a strided view.
LEFT_ALONE = """
func.func @left_alone(%rows: memref<8x16xf32>, %quads: memref<8x16x4xbf16>,
                      %view: memref<16x2xbf16, strided<[4, 1]>>, %j: index) {
  %c0 = arith.constant 0 : index
  %f = arith.constant 0.0 : f32
  %pad = arith.constant 0.0 : bf16
  %a = vector.transfer_read %rows[%c0, %c0], %f {in_bounds = [true, true]}
    : memref<8x16xf32>, vector<4x16xf32>
  %b = vector.transfer_read %quads[%c0, %j, %c0], %pad {in_bounds = [true, true]}
    : memref<8x16x4xbf16>, vector<8x2xbf16>
  %c = vector.transfer_read %view[%c0, %c0], %pad {in_bounds = [true, true]}
    : memref<16x2xbf16, strided<[4, 1]>>, vector<16x2xbf16>
  return
}
"""


def transfer_types(module: ir.Module) -> list[str]:
    found: list[str] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "vector.transfer_read":
            found.append(str(op.results[0].type))
        elif op.name == "vector.transfer_write":
            found.append(str(op.operands[0].type))
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


def test_contiguous_narrow_rows_become_one_vector():
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(PAIRS)
        flatten_narrow_transfers(module)
        assert module.operation.verify()
        assert transfer_types(module) == ["vector<32xbf16>", "vector<32xbf16>"]


def test_wide_partial_or_strided_rows_are_left_alone():
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(LEFT_ALONE)
        before = transfer_types(module)
        flatten_narrow_transfers(module)
        assert transfer_types(module) == before


# A row of 32 pairs in a block 64 pairs wide: the leading unit dim (one K pair) stays an
# outer index; the [32, 2] below it is 64 contiguous elements, one vector. Two K pairs are
# two such rows: a [2, 64] transfer, one row vector each.
ONE_PAIR_ROW = """
func.func @one_pair_row(%block: memref<8x64x2xbf16>, %v: vector<1x32x2xbf16>,
                        %w: vector<2x32x2xbf16>, %k: index, %n: index) {
  %c0 = arith.constant 0 : index
  vector.transfer_write %v, %block[%k, %n, %c0] {in_bounds = [true, true, true]}
    : vector<1x32x2xbf16>, memref<8x64x2xbf16>
  vector.transfer_write %w, %block[%k, %n, %c0] {in_bounds = [true, true, true]}
    : vector<2x32x2xbf16>, memref<8x64x2xbf16>
  return
}
"""


def test_leading_dims_stay_outside_the_flattened_rows():
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(ONE_PAIR_ROW)
        flatten_narrow_transfers(module)
        assert module.operation.verify()
        assert transfer_types(module) == ["vector<64xbf16>", "vector<2x64xbf16>"]
        # Each value is cast to the rows it is written as.
        casts = ops_named(module.operation, "vector.shape_cast")
        assert [str(op.result.type) for op in casts] == ["vector<64xbf16>", "vector<2x64xbf16>"]
