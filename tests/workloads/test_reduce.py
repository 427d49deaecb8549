"""Reduce workload: one-axis reductions (sum, mean, max, min, prod, argmax, argmin) over an
[OUTER, R, INNER] view, the axis_reduction root kind and schedule, verification, options."""

import subprocess
import sys

import numpy as np
import pytest
from mlir import ir

from mlirtune.api import engine_for
from mlirtune.interfaces.errors import UsageError
from mlirtune.ir.context import new_context
from mlirtune.targets import HostCPU
from mlirtune.workloads import WORKLOADS
from mlirtune.workloads.reduce import OPS, Reduce
from tests.payloads import build_schedule

SHAPES = [
    ("3,40,33", 1),  # the KernelBench 16,256,256 axis 1 case, scaled down and odd
    ("5,7,9", 0),  # axis 0: OUTER = 1
    ("4,2,3,9", 2),  # rank 4
    ("7,100", -1),  # the row case: rowwise
    ("100", 0),  # rank 1
    ("7,100", 0),  # rank 2, odd, column reduction
    ("9,1,6", 1),  # single-element axis
    ("13,1", 0),  # single column
]


@pytest.mark.jit
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize(("shape", "axis"), SHAPES)
def test_reduce_verifies(engine, op, shape, axis):
    result = engine.execute(Reduce(shape=shape, axis=axis, op=op))
    assert result.verification.ok, result.verification.summary()
    assert not result.verification.skipped


@pytest.mark.jit
@pytest.mark.parametrize("op", ["sum", "max", "argmin"])
def test_reduce_f64(engine, op):
    result = engine.execute(Reduce(shape="3,17,20", axis=1, op=op, dtype="f64"))
    assert result.verification.ok, result.verification.summary()


@pytest.mark.jit
@pytest.mark.parametrize(
    "parameters",
    [
        {"COLS": 8, "R_STEP": 3},  # partial column and R tiles
        {"COLS": 1, "R_STEP": 1},
        {"COLS": 64, "R_STEP": 64},  # tiles larger than the shape
        {"OUTER": 2, "COLS": 16, "R_STEP": 2},
    ],
)
@pytest.mark.parametrize("op", ["sum", "max", "argmax"])
def test_axis_reduction_with_non_dividing_parameters(engine, parameters, op):
    result = engine.execute(Reduce(shape="3,21,35", axis=1, op=op), parameters)
    assert result.verification.ok, result.verification.summary()


@pytest.mark.jit
@pytest.mark.parametrize("op", ["sum", "argmax"])
def test_axis_reduction_on_two_threads(op):
    engine = engine_for(HostCPU(threads=2), use_specs=False)
    result = engine.execute(Reduce(shape="4,24,40", axis=1, op=op), {"OUTER": 2})
    assert result.verification.ok, result.verification.summary()


@pytest.mark.jit
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_ties_keep_the_first_index_and_nan_wins(engine, op):
    workload = Reduce(shape="2,30,17", axis=1, op=op)
    x = np.random.default_rng(1).integers(0, 3, size=(2, 30, 17)).astype(np.float32)
    x[1, 4:9, 3] = np.nan  # PyTorch (and numpy) count NaN as the extreme: the first wins
    workload.__dict__["inputs"] = [x]
    result = engine.execute(workload)
    assert result.verification.ok, result.verification.summary()
    assert workload.reference_outputs[0][1, 3] == 4


@pytest.mark.jit
@pytest.mark.parametrize("op", ["sum", "mean"])
@pytest.mark.parametrize(
    ("shape", "axis"),
    [("3,40,33", 1), ("40,33", 0), ("1,40,33", 1)],  # no OUTER loop: a column reduction
)
def test_schedule_vectorizes_the_r_loop(engine, op, shape, axis):
    """Vector adds of whole rows: no horizontal reduction, and mean's multiply by 1/R stays
    element-wise (not a vector.contract)."""
    stages = {}
    engine.lower_payload(
        Reduce(shape=shape, axis=axis, op=op),
        {"COLS": 16, "R_STEP": 4},
        observer=lambda stage, module: stages.setdefault(stage, str(module)),
    )
    scheduled = next(text for stage, text in stages.items() if stage.startswith("schedule"))
    assert "linalg." not in scheduled
    assert "vector.reduction" not in scheduled and "vector.multi_reduction" not in scheduled
    assert "vector.contract" not in scheduled
    assert "vector<4x16xf32>" in scheduled and "arith.addf" in scheduled


def test_root_kinds():
    assert Reduce(shape="16,256,256", axis=1).root.kind == "axis_reduction"
    assert Reduce(shape="16,256,256", axis=1).root.dims == {"OUTER": 16, "R": 256, "INNER": 256}
    assert Reduce(shape="16,256,256", axis=-1).root.kind == "reduction"
    assert Reduce(shape="16,256,256", axis=2, op="argmax").root.attributes == {"outputs": 2}


def test_payload_views_the_tensor_collapsed():
    workload = Reduce(shape="2,3,4,5,6", axis=2, op="argmin")
    assert [spec.shape for spec in workload.arguments()] == [(6, 4, 30), (6, 30)]
    assert workload.arguments()[1].dtype.numpy is np.int64
    with new_context(), ir.Location.unknown():
        text = str(workload.payload_module())
    assert "memref<6x30xi64>" in text and "linalg.index 1" in text


@pytest.mark.parametrize("op", OPS)
def test_baselines_match_reference(op):
    pytest.importorskip("torch")
    workload = Reduce(shape="3,5,4", axis=1, op=op)
    expected = workload.reference_outputs[0].reshape(3, 4)
    np.testing.assert_allclose(workload.numpy_baseline()(), expected, rtol=1e-5)
    np.testing.assert_allclose(workload.torch_baseline()().numpy(), expected, rtol=1e-5)


def test_complexity():
    c = Reduce(shape="4,5,6", axis=1).get_complexity()
    assert (c.flops, c.bytes_read, c.bytes_written) == (120, 480, 96)
    assert Reduce(shape="4,5,6", axis=1, op="argmax").get_complexity().bytes_written == 192


def test_workload_is_registered():
    assert WORKLOADS["reduce"] is Reduce


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"shape": "4,x"}, "shape='4,x' must be comma-separated"),
        ({"shape": "4,0"}, "shape='4,0' must have 1 to 5 positive dims"),
        ({"shape": "1,2,3,4,5,6"}, "must have 1 to 5"),
        ({"shape": ""}, "shape='' must be"),
        ({"shape": "4,5", "axis": 2}, "axis=2 is out of range"),
        ({"shape": "4,5", "axis": -3}, "axis=-3 is out of range"),
        ({"axis": 1.5}, "axis must be an integer"),
        ({"op": "median"}, "op='median' is not one of"),
        ({"dtype": "bf16"}, "dtype='bf16' is not one of"),
        ({"dim": 0}, "unknown option"),
    ],
)
def test_bad_options(options, message):
    with pytest.raises(UsageError, match=f"reduce: .*{message}|{message}"):
        Reduce(**options)


def test_bad_schedule_parameters_are_rejected():
    with pytest.raises(UsageError, match="R_STEP=0"):
        build_schedule(Reduce(shape="4,8,8", axis=1), {"R_STEP": 0})


@pytest.mark.jit
def test_cli_run():
    command = [sys.executable, "-m", "mlirtune", "run", "reduce", "shape=4,64,48", "axis=1"]
    done = subprocess.run([*command, "op=sum"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    bad = subprocess.run([*command, "op=median"], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "op" in bad.stderr
