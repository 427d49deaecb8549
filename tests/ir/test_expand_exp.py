"""The `expand-exp` step: f32 exp as vector arithmetic, within a few ulp of numpy's, with
inf, 0 and NaN where exp has them, on both of its paths (ldexp for AVX-512, exponent bits
elsewhere)."""

from __future__ import annotations

import numpy as np
import pytest
from mlir import ir

from mlirtune.ir.expand_exp import MAX_LOG, MIN_LOG, expand_exp
from mlirtune.targets.host_cpu import HostCPU
from tests.ir.math_kernels import apply_math

SIZE = 4096


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


def test_avx512_scales_by_ldexp_and_others_by_exponent_bits():
    source = """
      func.func @f(%a: vector<2x16xf32>) -> vector<2x16xf32> {
        %x = math.exp %a : vector<2x16xf32>
        return %x : vector<2x16xf32>
      }"""
    for isa, intrinsics in (("avx512", 2), ("avx2", 0)):
        with ir.Context(), ir.Location.unknown():
            module = ir.Module.parse(source)
            expand_exp(module, isa=isa)
            assert module.operation.verify()
            calls: list[str] = []
            module.operation.walk(
                lambda op: calls.append(op.name) or ir.WalkResult.ADVANCE  # noqa: B023
            )
            # ldexp takes 1-D vectors: one call per row of the 2-D vector.
            assert calls.count("llvm.call_intrinsic") == intrinsics, isa
            assert ("arith.shli" in calls) == (intrinsics == 0), isa


ISAS = ["avx2", pytest.param("avx512", marks=pytest.mark.skipif(
    HostCPU().features.isa != "avx512", reason="the host has no AVX-512"))]  # fmt: skip


@pytest.mark.jit
@pytest.mark.parametrize("isa", ISAS)
def test_expanded_exp_is_within_a_few_ulp_of_numpy(tmp_path, isa):
    x = np.concatenate(
        [
            np.linspace(MIN_LOG, MAX_LOG, SIZE - 8, dtype=np.float32),
            np.array([-np.inf, -200.0, -88.0, 0.0, 89.0, np.inf, np.nan, 1e-30], np.float32),
        ]
    )
    y = apply_math(tmp_path, "exp", x, HostCPU(isa=isa))
    expected = np.exp(x.astype(np.float64))
    normal = expected >= np.finfo(np.float32).tiny
    normal &= np.isfinite(expected) & (expected <= np.finfo(np.float32).max)
    ulp = np.spacing(expected[normal].astype(np.float32)).astype(np.float64)
    assert np.max(np.abs(y[normal] - expected[normal]) / ulp) <= 4
    assert y[-8] == 0 and y[-7] == 0 and y[-6] <= np.finfo(np.float32).tiny  # -inf, -200, -88
    assert y[-5] == 1 and y[-4] == np.inf and y[-3] == np.inf and np.isnan(y[-2])
    assert y[-1] == 1


@pytest.mark.jit
@pytest.mark.parametrize("isa", ISAS)
def test_results_below_the_normal_range_are_flushed_to_zero(tmp_path, isa):
    """No subnormal comes out (each would cost its readers a microcode assist): below
    MIN_LOG exp is 0, from MIN_LOG up a normal f32."""
    x = np.linspace(-103.0, MIN_LOG + 1, SIZE, dtype=np.float32)
    y = apply_math(tmp_path, "exp", x, HostCPU(isa=isa))
    below = x < np.float32(MIN_LOG)
    assert np.all(y[below] == 0)
    assert np.all(y[~below] >= np.finfo(np.float32).tiny)
