"""The `expand-math` step: f32 erf, log and log1p as vector arithmetic and f64 erf through
libm, compiled and checked against Python's math module, with the special values."""

from __future__ import annotations

import math

import numpy as np
import pytest
from mlir import ir

from mlirtune.ir.expand_math import expand_math
from tests.ir.math_kernels import apply_math

SIZE = 1024


def test_expanded_ops_leave_no_log_or_erf():
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse("""
          func.func @f(%a: vector<16xf32>, %b: vector<2x2xf64>)
              -> (vector<16xf32>, vector<2x2xf64>) {
            %x = math.erf %a : vector<16xf32>
            %y = math.log %x : vector<16xf32>
            %z = math.log1p %y : vector<16xf32>
            %w = math.erf %b : vector<2x2xf64>
            return %z, %w : vector<16xf32>, vector<2x2xf64>
          }""")
        expand_math(module)
        assert module.operation.verify()
        names: list[str] = []
        module.operation.walk(lambda op: names.append(op.name) or ir.WalkResult.ADVANCE)
        assert not {"math.erf", "math.log", "math.log1p"} & set(names)
        assert names.count("func.call") == 4  # one libm erf per f64 lane


@pytest.mark.jit
def test_f32_erf_is_within_its_approximation_error(tmp_path):
    x = np.linspace(-6, 6, SIZE, dtype=np.float32)
    x[:3] = [np.nan, np.inf, -np.inf]
    y = apply_math(tmp_path, "erf", x)
    expected = np.array([math.erf(v) for v in x[3:].astype(np.float64)])
    assert np.max(np.abs(y[3:] - expected)) < 5e-7  # 1.5e-7, plus f32 rounding
    assert np.isnan(y[0]) and y[1] == 1 and y[2] == -1


@pytest.mark.jit
def test_f64_erf_calls_libm(tmp_path):
    x = np.linspace(-5, 5, SIZE)
    y = apply_math(tmp_path, "erf", x)
    np.testing.assert_allclose(y, [math.erf(v) for v in x], rtol=1e-15, atol=1e-300)


@pytest.mark.jit
def test_f32_log_is_within_a_few_ulp(tmp_path):
    x = np.geomspace(1e-30, 1e30, SIZE, dtype=np.float32)
    x[:4] = [0.0, -1.0, np.inf, np.nan]
    y = apply_math(tmp_path, "log", x)
    expected = np.log(x[4:].astype(np.float64))
    ulp = np.spacing(np.abs(expected).astype(np.float32)).astype(np.float64)
    assert np.max(np.abs(y[4:] - expected) / ulp) <= 4
    assert y[0] == -np.inf and np.isnan(y[1]) and y[2] == np.inf and np.isnan(y[3])


@pytest.mark.jit
def test_f32_log1p_keeps_tiny_arguments(tmp_path):
    x = np.concatenate([np.geomspace(1e-20, 1e3, SIZE - 1), [0.0]]).astype(np.float32)
    y = apply_math(tmp_path, "log1p", x)
    expected = np.log1p(x.astype(np.float64))
    np.testing.assert_allclose(y, expected, rtol=1e-6)
