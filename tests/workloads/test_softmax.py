"""Softmax workload: stable payload, row-wise schedule, verification, complexity, options."""

import numpy as np
import pytest
from mlir import ir

from mlirtune.interfaces.errors import UsageError
from mlirtune.ir.context import new_context
from mlirtune.workloads.softmax import FLOPS_PER_ELEMENT, Softmax
from tests.payloads import build_schedule


@pytest.mark.jit
@pytest.mark.parametrize(
    "options",
    [
        {"M": 8, "N": 128},
        {"M": 7, "N": 100},  # neither rows nor columns divide the default tiles
        {"M": 9, "N": 65, "dtype": "f64"},
        {"M": 13, "N": 64, "dtype": "f64"},
        {"M": 4, "N": 1},
        {"M": 1, "N": 1},
    ],
)
def test_softmax_verifies(engine, options):
    result = engine.execute(Softmax(**options))
    assert result.verification.ok, result.verification.summary()
    assert not result.verification.skipped


@pytest.mark.jit
@pytest.mark.parametrize(
    "parameters",
    [
        {"ROWS": 3, "COLS": 7},  # partial row and column tiles
        {"ROWS": 1, "COLS": 64},  # single-row tiles
        {"ROWS": 2, "COLS": 1},  # single-column tiles
        {"ROWS": 64, "COLS": 512},  # tiles larger than the shape
    ],
)
def test_softmax_with_non_dividing_schedule_parameters(engine, parameters):
    result = engine.execute(Softmax(M=10, N=129), parameters)
    assert result.verification.ok, result.verification.summary()


@pytest.mark.jit
def test_large_inputs_stay_finite(engine):
    """exp(x) overflows f32 beyond ~88: only the max-subtracted form verifies."""
    workload = Softmax(M=6, N=40)
    workload.__dict__["inputs"] = [workload.inputs[0] * 500.0]
    assert np.isfinite(workload.reference_outputs[0]).all()
    result = engine.execute(workload)
    assert result.verification.ok, result.verification.summary()


def test_reference_rows_are_distributions():
    out = Softmax(M=5, N=33).reference_outputs[0]
    assert (out > 0).all()
    np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=1e-12)


def test_payload_structure():
    with new_context(), ir.Location.unknown():
        text = str(Softmax(M=4, N=8).payload_module())
    assert text.count("linalg.generic") == 4  # max, exp, sum, divide
    assert text.count("linalg.fill") == 2  # -inf and 0 for the two reductions
    assert "math.exp" in text and "0xFF800000" in text


@pytest.mark.jit
def test_schedule_fuses_and_vectorizes_everything(engine):
    stages = {}
    engine.lower_payload(
        Softmax(M=7, N=100),
        {"ROWS": 4, "COLS": 32},
        observer=lambda stage, module: stages.setdefault(stage, str(module)),
    )
    scheduled = next(text for stage, text in stages.items() if stage.startswith("schedule"))
    assert "linalg." not in scheduled  # every op, partial tiles included, became vector code
    assert "vector.reduction <maxnumf>" in scheduled and "vector.reduction <add>" in scheduled
    assert "vector<4x32xf32>" in scheduled and "vector<3x4xf32>" in scheduled


@pytest.mark.jit
def test_wrong_reference_is_detected(engine):
    workload = Softmax(M=8, N=16)
    wrong = workload.reference_outputs[0].copy()
    wrong[5, 1] *= 1.01
    workload.__dict__["reference_outputs"] = [wrong]
    verification = engine.execute(workload).verification
    assert not verification.ok
    assert verification.worst_output == "out" and verification.worst_index == (5, 1)


def test_complexity():
    c = Softmax(M=4, N=5).get_complexity()
    assert c.flops == FLOPS_PER_ELEMENT * 4 * 5
    assert c.bytes_read == c.bytes_written == 4 * 5 * 4
    assert Softmax(M=4, N=5, dtype="f64").get_complexity().bytes_read == 4 * 5 * 8


def test_numpy_baseline_matches_reference():
    workload = Softmax(M=6, N=9)
    result = workload.numpy_baseline()()
    np.testing.assert_allclose(result, workload.reference_outputs[0], rtol=1e-5)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"dtype": "bf16"}, "dtype='bf16' is not one of"),
        ({"N": 0}, "N must be positive"),
        ({"M": 1.5}, "M must be an integer"),
        ({"axis": 0}, "unknown option"),
    ],
)
def test_bad_options(options, message):
    with pytest.raises(UsageError, match=message):
        Softmax(**options)


def test_bad_schedule_parameters_are_rejected():
    with pytest.raises(UsageError, match="XX"):
        build_schedule(Softmax(M=4, N=4), {"XX": 2})
    with pytest.raises(UsageError, match="ROWS=0"):
        build_schedule(Softmax(M=4, N=4), {"ROWS": 0})


@pytest.mark.jit
@pytest.mark.parametrize("prefetch", [0, 1])
def test_prefetching_the_next_row_tile_verifies(engine, prefetch):
    parameters = {"ROWS": 4, "COLS": 16, "PREFETCH": prefetch}
    workload = Softmax(M=10, N=48)  # two whole row tiles and a peeled one
    result = engine.execute(workload, parameters)
    assert result.verification.ok, result.verification.summary()
    stages = {}
    engine.lower_payload(
        workload, parameters, observer=lambda stage, module: stages.setdefault(stage, str(module))
    )
    # One prefetch per row of the next tile: a 16-column step reads one line of each row.
    assert stages["lowering"].count("llvm.intr.prefetch") == 4 * prefetch
