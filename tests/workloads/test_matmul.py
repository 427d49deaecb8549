"""Matmul and MLP workloads: verification, caching, tolerance, complexity, options."""

import numpy as np
import pytest
from mlir import ir

from mlirtune.interfaces.errors import UsageError
from mlirtune.ir.context import new_context
from mlirtune.pipeline import apply_schedule
from mlirtune.pipeline.plan import annotated_payload
from mlirtune.workloads import Matmul, Mlp, Softmax


@pytest.mark.jit
@pytest.mark.parametrize(
    "options",
    [
        {"M": 64, "N": 64, "K": 64},
        {"M": 50, "N": 30, "K": 70},  # nothing divides the default tiles
        {"M": 8, "N": 200, "K": 3},
        {"M": 32, "N": 48, "K": 16, "dtype": "f64"},
        {"M": 16, "N": 64, "K": 32, "dtype": "bf16"},
        {"M": 16, "N": 64, "K": 32, "dtype": "f16"},
        {"M": 50, "N": 30, "K": 70, "dtype": "f16"},  # partial tiles: converted as loaded
        {"M": 64, "N": 96, "K": 200, "dtype": "f16", "bias": True, "relu": True},
        {"M": 24, "N": 40, "K": 8, "bias": True},
        {"M": 24, "N": 40, "K": 8, "relu": True},
    ],
)
def test_matmul_verifies(engine, options):
    result = engine.execute(Matmul(**options))
    assert result.verification.ok, result.verification.summary()
    assert not result.verification.skipped


@pytest.mark.jit
def test_mlp_fuses_bias_and_relu_and_verifies(engine):
    workload = Mlp(M=40, N=72, K=24)
    assert [a.name for a in workload.arguments()] == ["A", "B", "bias", "C"]
    result = engine.execute(workload)
    assert result.verification.ok, result.verification.summary()
    # ReLU really applied: the reference has zeros and negatives were clipped.
    assert (workload.reference_outputs[0] == 0).any()
    assert (workload.reference_outputs[0] >= 0).all()


@pytest.mark.jit
def test_matmul_with_non_default_schedule_parameters(engine):
    result = engine.execute(Matmul(M=48, N=96, K=40), {"MC": 16, "NC": 32, "KC": 8, "MR": 4})
    assert result.verification.ok
    # NR is left to the selector, whose choice depends on the host's vector width.
    assert result.parameters["MR"] == 4 and result.parameters["KC"] == 8


@pytest.mark.jit
def test_wrong_reference_is_reported_with_location(engine):
    workload = Matmul(M=16, N=16, K=16)
    wrong = workload.reference_outputs[0].copy()
    wrong[3, 5] += 10.0
    workload.__dict__["reference_outputs"] = [wrong]
    verification = engine.execute(workload).verification
    assert not verification.ok
    assert verification.worst_output == "C" and verification.worst_index == (3, 5)
    assert verification.max_abs_error == pytest.approx(10.0, rel=1e-3)
    assert "FAILED" in verification.summary()


def test_inputs_are_cached_and_seeded():
    workload = Matmul(M=8, N=8, K=8)
    assert workload.inputs is workload.inputs
    assert workload.reference_outputs is workload.reference_outputs
    same_seed = Matmul(M=8, N=8, K=8)
    np.testing.assert_array_equal(workload.inputs[0], same_seed.inputs[0])
    other_seed = Matmul(M=8, N=8, K=8, seed=1)
    assert not np.array_equal(workload.inputs[0], other_seed.inputs[0])


@pytest.mark.jit
def test_reference_is_computed_once_across_executions(engine, monkeypatch):
    workload = Matmul(M=8, N=8, K=8)
    calls = []
    original = Matmul.reference
    monkeypatch.setattr(Matmul, "reference", lambda self, x: calls.append(1) or original(self, x))
    for _ in range(3):
        assert engine.execute(workload).verification.ok
    assert len(calls) == 1


def test_complexity():
    c = Matmul(M=4, N=5, K=6).get_complexity()
    assert c.flops == 2 * 4 * 5 * 6
    assert c.bytes_read == (4 * 6 + 6 * 5) * 4
    assert c.bytes_written == 4 * 5 * 4
    mlp = Mlp(M=4, N=5, K=6).get_complexity()
    assert mlp.flops == 2 * 4 * 5 * 6 + 2 * 4 * 5
    assert mlp.bytes_read == (4 * 6 + 6 * 5 + 5) * 4


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"M": 0}, "M must be positive"),
        ({"K": -3}, "K must be positive"),
        ({"M": 2.5}, "M must be an integer"),
        ({"dtype": "f8"}, "dtype='f8' is not one of f32, f64, bf16, f16, i8"),
        ({"Q": 1}, "unknown option"),
    ],
)
def test_bad_options(options, message):
    with pytest.raises(UsageError, match=message):
        Matmul(**options)


def test_bad_schedule_parameter_names_it():
    with new_context(), ir.Location.unknown():
        with pytest.raises(UsageError, match=r"unknown parameter\(s\) XX"):
            Matmul().schedule_module({"XX": 4})
        with pytest.raises(UsageError, match="parameter MR=0 must be a positive integer"):
            Matmul().schedule_module({"MR": 0})


@pytest.mark.jit
@pytest.mark.parametrize(
    "workload", [Matmul(M=48, N=40, K=24), Mlp(M=32, N=64, K=16), Softmax(M=8, N=100)]
)
def test_schedule_module_is_what_the_pipeline_applies(engine, workload):
    """Applying `schedule_module(parameters)` by hand gives the IR the engine's schedule
    stage gives, and the parameters reach it."""
    after_schedule = []

    def observe(stage, module):
        if stage.startswith("schedule "):
            after_schedule.append(str(module))

    engine.lower_payload(workload, observer=observe)
    with new_context(), ir.Location.unknown():
        payload, _ = annotated_payload(workload)
        schedule = workload.schedule_module()
        apply_schedule(payload, schedule)
        assert after_schedule == [str(payload)]
    if isinstance(workload, Matmul):
        with new_context(), ir.Location.unknown():
            assert str(workload.schedule_module({"MR": 4})) != str(workload.schedule_module())


def test_int8_matmul_sums_in_int32_exactly():
    workload = Matmul(M=4, N=3, K=300, dtype="i8")
    a, b, c = workload.arguments()
    assert (a.dtype.name, b.dtype.name, c.dtype.name) == ("i8", "i8", "i32")
    x, y = workload.inputs
    assert x.dtype == np.int8 and x.min() < -100 and x.max() > 100  # integers, whole range
    exact = x.astype(np.int64) @ y.astype(np.int64)
    np.testing.assert_array_equal(workload.reference_outputs[0], exact)
    assert c.dtype.rtol == c.dtype.atol_per_term == 0.0  # verification is exact
    # numpy's baseline is OpenBLAS's sgemm on float32 copies: the same shape's f32 anchor.
    assert workload.numpy_baseline()().dtype == np.float32
    # PyTorch's is torch._int_mm, int32 sums like ours (torch.matmul keeps int8 ones).
    np.testing.assert_array_equal(workload.torch_baseline()().numpy(), exact)


@pytest.mark.parametrize("narrow", ["bf16", "f16"])
def test_half_precision_matmuls_sum_in_f32(narrow):
    """bf16 and f16 operands, C in f32: the reference sums the stored (rounded) operands in
    float64, and numpy's baseline is sgemm on f32 copies of them."""
    workload = Matmul(M=8, N=6, K=40, dtype=narrow, bias=True)
    a, b, bias, c = workload.arguments()
    assert (a.dtype.name, b.dtype.name, bias.dtype.name, c.dtype.name) == (
        narrow,
        narrow,
        "f32",
        "f32",
    )
    x, y, z = workload.inputs
    exact = x.astype(np.float64) @ y.astype(np.float64) + z
    np.testing.assert_allclose(workload.reference_outputs[0], exact)
    baseline = workload.numpy_baseline()()
    assert baseline.dtype == np.float32
    np.testing.assert_allclose(baseline, exact, rtol=1e-5, atol=1e-5)


def test_int8_is_for_plain_matmuls():
    with pytest.raises(UsageError, match="dtype=i8 takes no bias"):
        Matmul(M=8, N=8, K=8, dtype="i8", bias=True)
    with pytest.raises(UsageError, match="dtype='i8' is not one of"):
        Mlp(M=8, N=8, K=8, dtype="i8")
