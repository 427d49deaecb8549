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
