"""Row normalisations (layer, RMS, L1, L2; with and without affine) and log-softmax:
verification on regular, odd and single-row or single-column shapes, PyTorch's forms, and
bad options."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from mlirtune.interfaces.errors import UsageError
from mlirtune.workloads.norm import KINDS, Norm
from mlirtune.workloads.softmax import Softmax

HAS_TORCH = importlib.util.find_spec("torch") is not None
VARIANTS = [
    {"kind": kind, "affine": affine}
    for kind in KINDS
    for affine in ((False, True) if kind in ("layer", "rms") else (False,))
]


@pytest.mark.jit
@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: f"{v['kind']}-{v['affine']}")
@pytest.mark.parametrize("shape", [(8, 128), (7, 100), (1, 300), (5, 1)])
def test_norm_verifies(engine, variant, shape):
    m, n = shape
    result = engine.execute(Norm(M=m, N=n, **variant))
    assert result.verification.ok, result.verification.summary()
    assert not result.verification.skipped


@pytest.mark.jit
@pytest.mark.parametrize("kind", ["layer", "l2"])
def test_norm_verifies_in_f64_with_non_dividing_tiles(engine, kind):
    workload = Norm(M=9, N=65, kind=kind, dtype="f64")
    result = engine.execute(workload, {"ROWS": 2, "COLS": 7})
    assert result.verification.ok, result.verification.summary()


def test_reference_statistics():
    out = Norm(M=4, N=256, kind="layer").reference_outputs[0]
    np.testing.assert_allclose(out.mean(axis=1), 0.0, atol=1e-12)
    np.testing.assert_allclose(out.var(axis=1), 1.0, rtol=1e-3)  # eps keeps it just below
    out = Norm(M=4, N=256, kind="l2").reference_outputs[0]
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-12)
    out = Norm(M=4, N=256, kind="l1").reference_outputs[0]
    np.testing.assert_allclose(np.abs(out).sum(axis=1), 1.0, rtol=1e-12)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"kind": "batch"}, "kind='batch' is not one of"),
        ({"kind": "l2", "affine": True}, "affine=true needs kind=layer or rms"),
        ({"N": 0}, "N must be positive"),
    ],
)
def test_bad_options(options, message):
    with pytest.raises(UsageError, match=message):
        Norm(**options)


@pytest.mark.jit
@pytest.mark.parametrize("shape", [(8, 128), (7, 100), (1, 1), (3, 1)])
def test_log_softmax_verifies(engine, shape):
    m, n = shape
    workload = Softmax(M=m, N=n, log=True)
    workload.__dict__["inputs"] = [workload.inputs[0] * 200.0]  # exp would overflow unshifted
    result = engine.execute(workload)
    assert result.verification.ok, result.verification.summary()


def test_log_softmax_numpy_baseline_matches_reference():
    workload = Softmax(M=5, N=33, log=True)
    np.testing.assert_allclose(
        workload.numpy_baseline()(), workload.reference_outputs[0], rtol=1e-5, atol=1e-6
    )


@pytest.mark.skipif(not HAS_TORCH, reason="PyTorch not installed")
@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: f"{v['kind']}-{v['affine']}")
def test_torch_forms_compute_the_same_norm(variant):
    workload = Norm(M=6, N=50, **variant)
    got = workload.torch_baseline()().numpy()
    np.testing.assert_allclose(got, workload.reference_outputs[0], rtol=1e-5, atol=1e-6)
