"""Activations as element-wise ops: each verifies against its float64 reference on wide
inputs (both signs, past exp's overflow) and on odd and single-row or single-column
shapes, alone and inside a chain; PyTorch's form computes the same function."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from mlirtune.interfaces.errors import UsageError
from mlirtune.workloads.activations import ACTIVATIONS
from mlirtune.workloads.elementwise import Elementwise


def widened(workload: Elementwise, scale: float) -> Elementwise:
    """The workload with its X input scaled, so the inputs cover [-scale, scale)."""
    workload.__dict__["inputs"] = [workload.inputs[0] * scale, *workload.inputs[1:]]
    return workload


@pytest.mark.jit
@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_activation_verifies_on_wide_inputs(engine, name, dtype):
    result = engine.execute(widened(Elementwise(M=7, N=100, ops=name, dtype=dtype), 30.0))
    assert result.verification.ok, result.verification.summary()
    assert not result.verification.skipped


@pytest.mark.jit
@pytest.mark.parametrize(
    "options",
    [
        {"M": 1, "N": 129, "ops": "gelu"},
        {"M": 33, "N": 1, "ops": "softplus"},
        {"M": 1, "N": 1, "ops": "tanh"},
        {"M": 5, "N": 40, "ops": "add,silu,mul,gelu_tanh"},
    ],
)
def test_activation_shapes_and_chains_verify(engine, options):
    result = engine.execute(widened(Elementwise(**options), 4.0))
    assert result.verification.ok, result.verification.summary()


def test_unknown_activation_is_named():
    with pytest.raises(
        UsageError, match=r"unknown op .swiglu.*known: add, mul, scale, scale_rows, relu"
    ):
        Elementwise(ops="add,swiglu")


def test_references_agree_with_known_values():
    x = np.array([-30.0, -1.0, 0.0, 1.0, 30.0])
    expected = {
        "relu": [0, 0, 0, 1, 30],
        "hardtanh": [-1, -1, 0, 1, 1],
        "softsign": [-30 / 31, -0.5, 0, 0.5, 30 / 31],
        "hardsigmoid": [0, 1 / 3, 0.5, 2 / 3, 1],
        "softplus": [
            np.log1p(np.exp(-30)),
            np.log1p(np.exp(-1)),
            np.log(2),
            1 + np.log1p(np.exp(-1)),
            30,
        ],
    }
    for name, values in expected.items():
        np.testing.assert_allclose(ACTIVATIONS[name].reference(x), values, rtol=1e-12)


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="PyTorch not installed")
@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_torch_form_computes_the_same_function(name):
    workload = widened(Elementwise(M=4, N=64, ops=name), 10.0)
    got = workload.torch_baseline()().numpy()
    np.testing.assert_allclose(got, workload.reference_outputs[0], rtol=1e-5, atol=1e-6)
