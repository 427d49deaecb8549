// A two-layer MLP on tensors, as IREE takes it: x @ w1, ReLU, then @ w2.
// mlirtune run --payload examples/iree/mlp.mlir --entry mlp --engine iree
#rows = affine_map<(d0, d1) -> (d0, d1)>
func.func @mlp(%x: tensor<128x512xf32>, %w1: tensor<512x1024xf32>, %w2: tensor<1024x256xf32>)
    -> tensor<128x256xf32> {
  %zero = arith.constant 0.0 : f32
  %empty1 = tensor.empty() : tensor<128x1024xf32>
  %init1 = linalg.fill ins(%zero : f32) outs(%empty1 : tensor<128x1024xf32>) -> tensor<128x1024xf32>
  %h = linalg.matmul ins(%x, %w1 : tensor<128x512xf32>, tensor<512x1024xf32>)
                     outs(%init1 : tensor<128x1024xf32>) -> tensor<128x1024xf32>
  %relu = linalg.generic {indexing_maps = [#rows, #rows], iterator_types = ["parallel", "parallel"]}
      ins(%h : tensor<128x1024xf32>) outs(%empty1 : tensor<128x1024xf32>) {
    ^bb0(%in: f32, %out: f32):
      %max = arith.maximumf %in, %zero : f32
      linalg.yield %max : f32
  } -> tensor<128x1024xf32>
  %empty2 = tensor.empty() : tensor<128x256xf32>
  %init2 = linalg.fill ins(%zero : f32) outs(%empty2 : tensor<128x256xf32>) -> tensor<128x256xf32>
  %y = linalg.matmul ins(%relu, %w2 : tensor<128x1024xf32>, tensor<1024x256xf32>)
                     outs(%init2 : tensor<128x256xf32>) -> tensor<128x256xf32>
  return %y : tensor<128x256xf32>
}
