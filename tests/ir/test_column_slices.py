"""Slices of a column vector (vector<N x 1>, a pool's window row as the convolution
vectorizer reads it) become slices of the flat vector, which lower to one shuffle each, not
a scalar extract and insert per element."""

from __future__ import annotations

from mlir import ir
from mlir.passmanager import PassManager

from mlirtune.ir.column_slices import slice_columns_flat
from mlirtune.ir.inspect import ops_named

# Each output the max of a row's elements j, j + 1 and j + 2 (a window of three).
PAYLOAD = """
func.func @pool(%row: memref<9xf32>, %out: memref<7xf32>) attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %pad = arith.constant 0.0 : f32
  %read = vector.transfer_read %row[%c0], %pad {in_bounds = [true]} : memref<9xf32>, vector<9xf32>
  %column = vector.shape_cast %read : vector<9xf32> to vector<9x1xf32>
  %first = vector.extract_strided_slice %column {offsets = [0, 0], sizes = [7, 1], strides = [1, 1]}
      : vector<9x1xf32> to vector<7x1xf32>
  %next = vector.extract_strided_slice %column {offsets = [1, 0], sizes = [7, 1], strides = [1, 1]}
      : vector<9x1xf32> to vector<7x1xf32>
  %last = vector.extract_strided_slice %column {offsets = [2, 0], sizes = [7, 1], strides = [1, 1]}
      : vector<9x1xf32> to vector<7x1xf32>
  %a = vector.shape_cast %first : vector<7x1xf32> to vector<7xf32>
  %b = vector.shape_cast %next : vector<7x1xf32> to vector<7xf32>
  %c = vector.shape_cast %last : vector<7x1xf32> to vector<7xf32>
  %pair = arith.maximumf %a, %b : vector<7xf32>
  %flat = arith.maximumf %pair, %c : vector<7xf32>
  vector.transfer_write %flat, %out[%c0] {in_bounds = [true]} : vector<7xf32>, memref<7xf32>
  return
}
"""


def _slice_ranks(module: ir.Module) -> list[int]:
    slices = ops_named(module.operation, "vector.extract_strided_slice")
    return [ir.VectorType(op.operands[0].type).rank for op in slices]


def test_column_slices_become_flat_slices():
    """The pooling workload's tests verify the values (a stride-1 pool over rows of 100)."""
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(PAYLOAD)
        assert _slice_ranks(module) == [2, 2, 2]
        slice_columns_flat(module)
        assert module.operation.verify()
        PassManager.parse("builtin.module(canonicalize)").run(module.operation)
        assert _slice_ranks(module) == [1, 1, 1]
        # The casts fold away: the slices read the row as it was read.
        assert not ops_named(module.operation, "vector.shape_cast")
