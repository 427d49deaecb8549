"""Element-wise chain workload: one fused generic, verification, schedule, complexity, options."""

import numpy as np
import pytest
from mlir import ir

from mlirtune.interfaces.errors import UsageError
from mlirtune.ir.context import new_context
from mlirtune.workloads.elementwise import Elementwise
from tests.payloads import build_schedule


@pytest.mark.jit
@pytest.mark.parametrize(
    "options",
    [
        {"M": 16, "N": 64},
        {"M": 13, "N": 70, "ops": "add,mul,relu,add"},  # nothing divides the default tiles
        {"M": 9, "N": 65, "ops": "mul", "dtype": "f64"},
        {"M": 5, "N": 3, "ops": "relu", "dtype": "f64"},
        {"M": 1, "N": 1, "ops": "relu,add"},
        {"M": 7, "N": 100, "ops": "scale"},
        {"M": 9, "N": 33, "ops": "add,scale_rows,relu,scale"},
        {"M": 1, "N": 1, "ops": "scale_rows", "dtype": "f64"},
    ],
)
def test_elementwise_verifies(engine, options):
    result = engine.execute(Elementwise(**options))
    assert result.verification.ok, result.verification.summary()
    assert not result.verification.skipped


@pytest.mark.jit
@pytest.mark.parametrize(
    "parameters", [{"ROWS": 3, "COLS": 7}, {"ROWS": 1, "COLS": 64}, {"ROWS": 64, "COLS": 1}]
)
def test_elementwise_with_non_dividing_schedule_parameters(engine, parameters):
    result = engine.execute(Elementwise(M=10, N=50, ops="add,relu,mul"), parameters)
    assert result.verification.ok, result.verification.summary()


def test_chain_semantics_and_arguments():
    workload = Elementwise(M=6, N=7, ops="add, mul ,relu")
    assert workload.ops == ("add", "mul", "relu")
    assert [a.name for a in workload.arguments()] == ["X", "Y0", "Y1", "out"]
    x, y0, y1 = (a.astype(np.float64) for a in workload.inputs)
    np.testing.assert_allclose(workload.reference_outputs[0], np.maximum((x + y0) * y1, 0.0))


def test_payload_is_one_fused_generic():
    with new_context(), ir.Location.unknown():
        text = str(Elementwise(M=4, N=8, ops="add,mul,relu,add").payload_module())
    assert text.count("linalg.generic") == 1
    assert text.count("arith.addf") == 2 and text.count("arith.mulf") == 1
    assert text.count("arith.maximumf") == 1


@pytest.mark.jit
def test_schedule_vectorizes_partial_tiles(engine):
    stages = {}
    engine.lower_payload(
        Elementwise(M=10, N=70),
        {"ROWS": 4, "COLS": 32},
        observer=lambda stage, module: stages.setdefault(stage, str(module)),
    )
    scheduled = next(text for stage, text in stages.items() if stage.startswith("schedule"))
    assert "linalg.generic" not in scheduled  # main and peeled partial tiles all vectorized
    assert "vector<4x32xf32>" in scheduled and "vector<2x6xf32>" in scheduled


@pytest.mark.jit
def test_wrong_reference_is_detected(engine):
    workload = Elementwise(M=8, N=16)
    wrong = workload.reference_outputs[0].copy()
    wrong[2, 3] += 1.0
    workload.__dict__["reference_outputs"] = [wrong]
    verification = engine.execute(workload).verification
    assert not verification.ok
    assert verification.worst_output == "out" and verification.worst_index == (2, 3)


def test_complexity():
    c = Elementwise(M=4, N=5, ops="add,mul,relu").get_complexity()
    assert c.flops == 3 * 4 * 5
    assert c.bytes_read == 3 * 4 * 5 * 4  # X, Y0, Y1
    assert c.bytes_written == 4 * 5 * 4
    c64 = Elementwise(M=4, N=5, ops="relu", dtype="f64").get_complexity()
    assert (c64.flops, c64.bytes_read, c64.bytes_written) == (20, 160, 160)


def test_numpy_baseline_matches_reference():
    workload = Elementwise(M=6, N=9, ops="relu,mul,add")
    run = workload.numpy_baseline()
    result = run()
    np.testing.assert_allclose(result, workload.reference_outputs[0], rtol=1e-6)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"ops": "add,sub"}, "unknown op 'sub'"),
        ({"ops": "add,,relu"}, "comma-separated list"),
        ({"ops": ""}, "comma-separated list"),
        ({"ops": " "}, "comma-separated list"),
        ({"ops": 3}, "ops must be a string"),
        ({"dtype": "bf16"}, "dtype='bf16' is not one of"),
        ({"M": 0}, "M must be positive"),
        ({"K": 4}, "unknown option"),
    ],
)
def test_bad_options(options, message):
    with pytest.raises(UsageError, match=message):
        Elementwise(**options)


def test_from_strings_parses_the_chain():
    workload = Elementwise.from_strings({"M": "3", "N": "4", "ops": "mul,relu"})
    assert workload.ops == ("mul", "relu") and workload.shape == (3, 4)
    with pytest.raises(UsageError, match="unknown op 'tanhh'"):
        Elementwise.from_strings({"ops": "tanhh"})


def test_bad_schedule_parameter_is_rejected():
    with pytest.raises(UsageError, match="XX"):
        build_schedule(Elementwise(M=4, N=4), {"XX": 2})


def test_broadcast_operands_have_their_own_shapes():
    workload = Elementwise(M=3, N=4, ops="scale,add,scale_rows")
    assert [a.shape for a in workload.arguments()] == [(3, 4), (), (3, 4), (3,), (3, 4)]
    x, s, y, rows = workload.inputs
    expected = (x.astype(np.float64) * s + y) * rows[:, None]
    np.testing.assert_allclose(workload.reference_outputs[0], expected)
    np.testing.assert_allclose(workload.numpy_baseline()(), expected, rtol=1e-6)
