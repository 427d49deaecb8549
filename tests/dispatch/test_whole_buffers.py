"""A dispatch read back as a payload of its own (tuned or timed alone) is split and scheduled
as the whole payload's compile scheduled it, though the split wrote its result to a view of
the output buffer."""

from __future__ import annotations

import numpy as np
import pytest

from mlirtune.engine import MlirJitEngine
from mlirtune.workloads.from_file import FromFile

pytestmark = pytest.mark.jit

# A softmax on [2, 4] rows of an [8, 16] input, stored through a view of the [8, 16] output:
# what the split leaves of a softmax kept 4-D between two batch matmuls.
STORED_THROUGH_A_VIEW = """
#rows = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#row = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @payload(%arg0: memref<8x16xf32>, %arg1: memref<8x16xf32>) {
  %lowest = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %0 = bufferization.to_tensor %arg0 restrict : memref<8x16xf32> to tensor<8x16xf32>
  %x = tensor.expand_shape %0 [[0, 1], [2]] output_shape [2, 4, 16]
      : tensor<8x16xf32> into tensor<2x4x16xf32>
  %init = tensor.empty() : tensor<2x4xf32>
  %fill = linalg.fill ins(%lowest : f32) outs(%init : tensor<2x4xf32>) -> tensor<2x4xf32>
  %max = linalg.generic {indexing_maps = [#rows, #row],
                         iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : tensor<2x4x16xf32>) outs(%fill : tensor<2x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.maximumf %in, %out : f32
    linalg.yield %m : f32
  } -> tensor<2x4xf32>
  %empty = tensor.empty() : tensor<2x4x16xf32>
  %shifted = linalg.generic {indexing_maps = [#rows, #row, #rows],
                             iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %max : tensor<2x4x16xf32>, tensor<2x4xf32>) outs(%empty : tensor<2x4x16xf32>) {
  ^bb0(%in: f32, %m: f32, %out: f32):
    %d = arith.subf %in, %m : f32
    %e = math.exp %d : f32
    linalg.yield %e : f32
  } -> tensor<2x4x16xf32>
  %zeros = linalg.fill ins(%zero : f32) outs(%init : tensor<2x4xf32>) -> tensor<2x4xf32>
  %sum = linalg.generic {indexing_maps = [#rows, #row],
                         iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%shifted : tensor<2x4x16xf32>) outs(%zeros : tensor<2x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %a = arith.addf %in, %out : f32
    linalg.yield %a : f32
  } -> tensor<2x4xf32>
  %softmax = linalg.generic {indexing_maps = [#rows, #row, #rows],
                             iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%shifted, %sum : tensor<2x4x16xf32>, tensor<2x4xf32>)
      outs(%empty : tensor<2x4x16xf32>) {
  ^bb0(%in: f32, %s: f32, %out: f32):
    %q = arith.divf %in, %s : f32
    linalg.yield %q : f32
  } -> tensor<2x4x16xf32>
  %view = memref.expand_shape %arg1 [[0, 1], [2]] output_shape [2, 4, 16]
      : memref<8x16xf32> into memref<2x4x16xf32>
  bufferization.materialize_in_destination %softmax in restrict writable %view
      : (tensor<2x4x16xf32>, memref<2x4x16xf32>) -> ()
  return
}
"""


def test_a_result_stored_through_a_view_is_split_and_scheduled(tmp_path):
    x = np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.save(tmp_path / "out.npy", e / e.sum(axis=1, keepdims=True))
    (tmp_path / "payload.mlir").write_text(STORED_THROUGH_A_VIEW)
    workload = FromFile(
        tmp_path / "payload.mlir", inputs=[tmp_path / "x.npy"], expect=[tmp_path / "out.npy"]
    )
    result = MlirJitEngine(use_specs=False).execute(workload)
    assert result.verification.ok, result.verification.summary()
    (dispatch,) = result.extra["dispatches"]
    assert dispatch["kind"] == "reduction" and dispatch["scheduled"], dispatch
