"""Copies between strided buffers become loops (linalg.copy), contiguous ones stay a
memref.copy (a memcpy): the runtime's generic memrefCopy computes every element's address
from the strides, 20x slower than the loops on a padded input's interior."""

from __future__ import annotations

from mlir import ir

from mlirtune.ir.inspect import ops_named
from mlirtune.ir.strided_copies import copy_strided_as_loops

PAYLOAD = """
func.func @f(%a: memref<8x16xf32>, %b: memref<8x16xf32>, %c: memref<10x18xf32>) {
  memref.copy %a, %b : memref<8x16xf32> to memref<8x16xf32>
  %inner = memref.subview %c[1, 1] [8, 16] [1, 1]
      : memref<10x18xf32> to memref<8x16xf32, strided<[18, 1], offset: 19>>
  memref.copy %a, %inner : memref<8x16xf32> to memref<8x16xf32, strided<[18, 1], offset: 19>>
  %rows = memref.subview %b[0, 0] [8, 8] [1, 2]
      : memref<8x16xf32> to memref<8x8xf32, strided<[16, 2]>>
  %dense = memref.subview %c[0, 0] [1, 18] [1, 1]
      : memref<10x18xf32> to memref<1x18xf32, strided<[18, 1]>>
  memref.copy %dense, %dense
      : memref<1x18xf32, strided<[18, 1]>> to memref<1x18xf32, strided<[18, 1]>>
  memref.copy %rows, %rows
      : memref<8x8xf32, strided<[16, 2]>> to memref<8x8xf32, strided<[16, 2]>>
  return
}
"""


def test_strided_copies_become_loops_and_contiguous_ones_stay_copies():
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(PAYLOAD)
        copy_strided_as_loops(module)
        assert module.operation.verify()
        # The whole buffer and the one dense row stay copies; the padded interior and
        # the every-other-column view are loops.
        assert len(ops_named(module.operation, "memref.copy")) == 2
        assert len(ops_named(module.operation, "linalg.copy")) == 2
