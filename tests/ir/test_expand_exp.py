"""The `expand-exp` step: f32 exp as vector arithmetic, within a few ulp of numpy's, with
inf, 0 and NaN where exp has them."""

from __future__ import annotations

import numpy as np
import pytest
from mlir import ir

from mlirtune.api import engine_for
from mlirtune.ir.expand_exp import MAX_LOG, MIN_LOG, expand_exp
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.workloads.from_file import FromFile

SIZE = 4096
EXP = f"""
func.func @exp(%x: memref<{SIZE}xf32>, %y: memref<{SIZE}xf32>) {{
  %tx = bufferization.to_tensor %x restrict : memref<{SIZE}xf32> to tensor<{SIZE}xf32>
  %ty = bufferization.to_tensor %y restrict writable : memref<{SIZE}xf32> to tensor<{SIZE}xf32>
  %r = linalg.generic {{indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                        iterator_types = ["parallel"]}}
      ins(%tx : tensor<{SIZE}xf32>) outs(%ty : tensor<{SIZE}xf32>) {{
    ^bb0(%a: f32, %b: f32):
      %e = math.exp %a : f32
      linalg.yield %e : f32
  }} -> tensor<{SIZE}xf32>
  bufferization.materialize_in_destination %r in restrict writable %y
      : (tensor<{SIZE}xf32>, memref<{SIZE}xf32>) -> ()
  return
}}
"""


def test_only_f32_exps_are_expanded():
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse("""
          func.func @f(%a: vector<16xf32>, %b: f64) -> (vector<16xf32>, f64) {
            %x = math.exp %a : vector<16xf32>
            %y = math.exp %b : f64
            return %x, %y : vector<16xf32>, f64
          }""")
        expand_exp(module)
        assert module.operation.verify()
        names: list[str] = []
        module.operation.walk(lambda op: names.append(op.name) or ir.WalkResult.ADVANCE)
        assert names.count("math.exp") == 1 and "math.roundeven" in names


@pytest.mark.jit
def test_expanded_exp_is_within_a_few_ulp_of_numpy(tmp_path):
    x = np.concatenate(
        [
            np.linspace(MIN_LOG, MAX_LOG, SIZE - 8, dtype=np.float32),
            np.array([-np.inf, -200.0, -88.0, 0.0, 89.0, np.inf, np.nan, 1e-30], np.float32),
        ]
    )
    (tmp_path / "exp.mlir").write_text(EXP)
    np.save(tmp_path / "x.npy", x)
    workload = FromFile(tmp_path / "exp.mlir", "exp", [tmp_path / "x.npy"])
    engine = engine_for(HostCPU(), use_specs=False)
    kernel = engine.compile(workload)
    with workload.allocate(engine) as buffers:
        kernel.call(buffers)
        y = engine.runtime.to_host(buffers[-1]).copy()
    expected = np.exp(x.astype(np.float64))
    normal = expected >= np.finfo(np.float32).tiny
    normal &= np.isfinite(expected) & (expected <= np.finfo(np.float32).max)
    ulp = np.spacing(expected[normal].astype(np.float32)).astype(np.float64)
    assert np.max(np.abs(y[normal] - expected[normal]) / ulp) <= 4
    assert y[-8] == 0 and y[-7] == 0 and y[-6] <= np.finfo(np.float32).tiny  # -inf, -200, -88
    assert y[-5] == 1 and y[-4] == np.inf and y[-3] == np.inf and np.isnan(y[-2])
    assert y[-1] == 1
