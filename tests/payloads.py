"""Small MLIR payload files written by tests."""

MATMUL_16x8x32 = """\
func.func @mm(%a: memref<16x8xf32>, %b: memref<8x32xf32>, %c: memref<16x32xf32>) {
  %ta = bufferization.to_tensor %a restrict : memref<16x8xf32> to tensor<16x8xf32>
  %tb = bufferization.to_tensor %b restrict : memref<8x32xf32> to tensor<8x32xf32>
  %tc = bufferization.to_tensor %c restrict writable : memref<16x32xf32> to tensor<16x32xf32>
  %zero = arith.constant 0.0 : f32
  %f = linalg.fill ins(%zero : f32) outs(%tc : tensor<16x32xf32>) -> tensor<16x32xf32>
  %r = linalg.matmul ins(%ta, %tb : tensor<16x8xf32>, tensor<8x32xf32>)
                     outs(%f : tensor<16x32xf32>) -> tensor<16x32xf32>
  bufferization.materialize_in_destination %r in restrict writable %c
      : (tensor<16x32xf32>, memref<16x32xf32>) -> ()
  return
}
"""

# Parses and verifies, but fails when applied: four tile sizes for a three-loop op.
FAILING_SCHEDULE = """\
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %mm = transform.structured.match ops{["linalg.matmul"]} in %root
        : (!transform.any_op) -> !transform.any_op
    %t, %l:3 = transform.structured.tile_using_for %mm tile_sizes [4, 8, 0, 2]
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op,
                                  !transform.any_op)
    transform.yield
  }
}
"""

# Calls a function that does not exist anywhere: lowering succeeds, the JIT cannot link it.
UNRESOLVED_SYMBOL = """\
func.func private @mlirtune_test_missing_symbol(memref<4xf32>)
func.func @f(%a: memref<4xf32>) {
  func.call @mlirtune_test_missing_symbol(%a) : (memref<4xf32>) -> ()
  return
}
"""

# Row sums written on memrefs: a fill and a reduction linalg.generic, no tensors anywhere.
ROWSUM_MEMREF_64x128 = """\
#map = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @rowsum(%a: memref<64x128xf32>, %out: memref<64xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%out : memref<64xf32>)
  linalg.generic {indexing_maps = [#map, #row], iterator_types = ["parallel", "reduction"]}
      ins(%a : memref<64x128xf32>) outs(%out : memref<64xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.addf %x, %acc : f32
    linalg.yield %s : f32
  }
  return
}
"""

# The same row sums over a subview of the input: aliasing unknown, so it stays on memrefs.
ROWSUM_MEMREF_VIEW_64x128 = """\
#map = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @rowsum(%a: memref<64x128xf32>, %out: memref<64xf32>) {
  %zero = arith.constant 0.0 : f32
  %v = memref.subview %a[0, 0] [64, 128] [1, 1]
      : memref<64x128xf32> to memref<64x128xf32, strided<[128, 1]>>
  linalg.fill ins(%zero : f32) outs(%out : memref<64xf32>)
  linalg.generic {indexing_maps = [#map, #row], iterator_types = ["parallel", "reduction"]}
      ins(%v : memref<64x128xf32, strided<[128, 1]>>) outs(%out : memref<64xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.addf %x, %acc : f32
    linalg.yield %s : f32
  }
  return
}
"""

# Element-wise add written on memrefs.
ADD_MEMREF_32x64 = """\
#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @add(%a: memref<32x64xf32>, %b: memref<32x64xf32>, %c: memref<32x64xf32>) {
  linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : memref<32x64xf32>, memref<32x64xf32>) outs(%c : memref<32x64xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  }
  return
}
"""

# Fuses a memref op: the transform interpreter fails without emitting any diagnostic.
SILENTLY_FAILING_SCHEDULE = """\
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %g = transform.structured.match ops{["linalg.generic"]} in %root
        : (!transform.any_op) -> !transform.any_op
    %t, %l:2 = transform.structured.fuse %g tile_sizes [1, 64]
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op)
    transform.yield
  }
}
"""


def build_schedule(workload, parameters=None):
    """`workload.schedule_module(parameters)` in a fresh context (it checks the names and
    values of `parameters` as a compile does)."""
    from mlir import ir

    from mlirtune.ir.context import new_context

    with new_context(), ir.Location.unknown():
        return workload.schedule_module(parameters)
