"""The `shuffle-bf16-as-i16` step: bf16 shuffles become i16 shuffles between bitcasts, a
shuffle of a two-row vector's lanes shuffles the rows themselves, and other shuffles are
left alone. The lanes each result holds are checked by the dot and AMX paths' numerics
tests, which run the VNNI pack through it."""

from __future__ import annotations

from mlir import ir

from mlirtune.ir.inspect import ops_named
from mlirtune.schedules.contraction.steps.bf16_shuffles import shuffle_bf16_as_i16

SHUFFLES = """
func.func @shuffles(%rows: vector<2x4xbf16>, %x: vector<4xbf16>, %y: vector<4xbf16>,
                    %f: vector<4xf32>) -> (vector<8xbf16>, vector<8xbf16>, vector<8xf32>) {
  %flat = vector.shape_cast %rows : vector<2x4xbf16> to vector<8xbf16>
  %pairs = vector.shuffle %flat, %flat [0, 4, 1, 5, 2, 6, 3, 7] : vector<8xbf16>, vector<8xbf16>
  %mixed = vector.shuffle %x, %y [0, 4, 1, 5, 2, 6, 3, 7] : vector<4xbf16>, vector<4xbf16>
  %floats = vector.shuffle %f, %f [0, 4, 1, 5, 2, 6, 3, 7] : vector<4xf32>, vector<4xf32>
  return %pairs, %mixed, %floats : vector<8xbf16>, vector<8xbf16>, vector<8xf32>
}
"""


def test_bf16_shuffles_move_i16_lanes_and_others_are_left_alone():
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(SHUFFLES)
        shuffle_bf16_as_i16(module)
        assert module.operation.verify()
        shuffles = ops_named(module.operation, "vector.shuffle")
        types = sorted(str(ir.VectorType(op.result.type).element_type) for op in shuffles)
        assert types == ["f32", "i16", "i16"]
        pairs = next(op for op in shuffles if op.operands[0] != op.operands[1])
        # The two-row shuffle reads the rows (extracted, bitcast), with the same lanes.
        sources = [value.owner.operation.operands[0].owner for value in pairs.operands]
        assert {source.operation.name for source in sources} <= {"vector.extract"}
        mask = list(ir.DenseI64ArrayAttr(pairs.attributes["mask"]))
        assert mask == [0, 4, 1, 5, 2, 6, 3, 7]
        assert len(ops_named(module.operation, "vector.bitcast")) == 6
