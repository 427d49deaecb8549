"""Clean-ups before a payload is split (mlirtune.dispatch.prepare)."""

from __future__ import annotations

import numpy as np
import pytest
from mlir import ir

from mlirtune.dispatch.prepare import prepare_for_dispatch
from mlirtune.engine import MlirJitEngine
from mlirtune.ir.context import new_context
from mlirtune.ir.inspect import find_function, ops_named
from mlirtune.workloads.from_file import FromFile

# Phase (1, 0) of a stride-2 sampling, sliced as torch slices: one dim at a time.
SLICED_PER_DIM = """
func.func @payload(%arg0: memref<8x12xf32>, %arg1: memref<4x6xf32>) {
  %0 = bufferization.to_tensor %arg0 restrict : memref<8x12xf32> to tensor<8x12xf32>
  %rows = tensor.extract_slice %0[1, 0] [4, 12] [2, 1] : tensor<8x12xf32> to tensor<4x12xf32>
  %both = tensor.extract_slice %rows[0, 0] [4, 6] [1, 2] : tensor<4x12xf32> to tensor<4x6xf32>
  bufferization.materialize_in_destination %both in restrict writable %arg1
      : (tensor<4x6xf32>, memref<4x6xf32>) -> ()
  return
}
"""


def test_a_slice_of_a_slice_reads_the_source_once():
    with new_context(), ir.Location.unknown():
        module = ir.Module.parse(SLICED_PER_DIM)
        function = find_function(module, "payload").operation
        notes = prepare_for_dispatch(function)
        assert module.operation.verify()
        (merged,) = ops_named(function, "tensor.extract_slice")
        attributes = {
            name: list(ir.DenseI64ArrayAttr(merged.attributes[name]))
            for name in ("static_offsets", "static_sizes", "static_strides")
        }
    assert attributes == {
        "static_offsets": [1, 0],
        "static_sizes": [4, 6],
        "static_strides": [2, 2],
    }
    assert notes == ["1 slice(s) of slices read their source directly"]


@pytest.mark.jit
def test_the_merged_slice_takes_the_same_elements(tmp_path):
    x = np.arange(96, dtype=np.float32).reshape(8, 12)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "out.npy", x[1::2][:, ::2])
    (tmp_path / "payload.mlir").write_text(SLICED_PER_DIM)
    workload = FromFile(
        tmp_path / "payload.mlir", inputs=[tmp_path / "x.npy"], expect=[tmp_path / "out.npy"]
    )
    result = MlirJitEngine(use_specs=False).execute(workload)
    assert result.verification.ok, result.verification.summary()
