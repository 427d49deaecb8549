"""Losses reduced to a scalar (mse, huber, cosine, kl_div, hinge, cross_entropy, triplet):
verification on regular, odd and single-row or single-column shapes, the numpy and PyTorch
forms against the reference, the schedule's knobs, and bad options."""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest
from mlir import ir

from mlirtune.api import engine_for
from mlirtune.interfaces.errors import UsageError
from mlirtune.ir.context import new_context
from mlirtune.schedules.full_reduction import FullReductionKnobs, full_reduction_schedule
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.workloads import WORKLOADS
from mlirtune.workloads.loss import KINDS, Loss

HAS_TORCH = importlib.util.find_spec("torch") is not None
CORES = os.cpu_count() or 1


@pytest.mark.jit
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("shape", [(8, 128), (7, 100), (1, 300), (5, 1)])
def test_loss_verifies(engine, kind, shape):
    m, n = shape
    result = engine.execute(Loss(M=m, N=n, kind=kind))
    assert result.verification.ok, result.verification.summary()
    assert not result.verification.skipped


@pytest.mark.jit
@pytest.mark.parametrize("kind", ["huber", "cosine", "cross_entropy"])
def test_loss_verifies_in_f64_with_non_dividing_tiles(engine, kind):
    workload = Loss(M=9, N=65, kind=kind, dtype="f64")
    result = engine.execute(workload, {"ROWS": 2, "COLS": 8})
    assert result.verification.ok, result.verification.summary()


def test_output_is_a_scalar():
    workload = Loss(M=4, N=8, kind="triplet")
    (out,) = [a for a in workload.arguments() if a.is_output]
    assert out.shape == ()
    assert workload.reference_outputs[0].shape == ()
    assert [a.name for a in workload.arguments()] == ["anchor", "positive", "negative", "out"]


def test_inputs_have_the_structure_each_loss_needs():
    p, t = Loss(M=4, N=16, kind="kl_div").inputs
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-5)
    assert (p > 0).all() and (t > 0).all()
    assert set(np.unique(Loss(M=64, N=1, kind="hinge").inputs[1])) == {-1.0, 1.0}
    _, targets = Loss(M=64, N=10, kind="cross_entropy").inputs
    assert targets.dtype == np.int64 and targets.min() >= 0 and targets.max() < 10


@pytest.mark.parametrize("kind", KINDS)
def test_numpy_baseline_matches_reference(kind):
    workload = Loss(M=6, N=40, kind=kind)
    np.testing.assert_allclose(workload.numpy_baseline()(), workload.reference_outputs[0], 1e-5)


@pytest.mark.skipif(not HAS_TORCH, reason="PyTorch is not installed")
@pytest.mark.parametrize("kind", KINDS)
def test_torch_baseline_matches_reference(kind):
    workload = Loss(M=6, N=40, kind=kind)
    got = float(workload.torch_baseline()())
    np.testing.assert_allclose(got, workload.reference_outputs[0], rtol=1e-5, atol=1e-6)


def test_registered_with_its_own_pipeline():
    from mlirtune.pipeline.plan import plan_for
    from mlirtune.targets.host_cpu import HostCPU

    assert WORKLOADS["loss"] is Loss
    lowering = plan_for(Loss(M=128, N=4096), HostCPU())
    assert lowering.descriptor.name.endswith("loss")
    assert {"ROWS", "COLS"} <= set(lowering.values)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"kind": "nll"}, "kind='nll' is not one of"),
        ({"N": 0}, "N must be positive"),
        ({"M": -3}, "M must be positive"),
        ({"dtype": "bf16"}, "dtype='bf16' is not one of"),
        ({"reduction": "sum"}, "unknown option"),
    ],
)
def test_bad_options(options, message):
    with pytest.raises(UsageError, match=message):
        Loss(**options)


@pytest.mark.jit
@pytest.mark.skipif(CORES < 2, reason="needs 2 cores")
@pytest.mark.parametrize(("kind", "shape"), [("cosine", (64, 100)), ("cross_entropy", (7, 10))])
def test_loss_verifies_on_two_threads(kind, shape):
    # 64 rows: two threads of whole row tiles; 7 rows: not whole tiles, so one thread.
    engine = engine_for(HostCPU(threads=2), use_specs=False)
    m, n = shape
    result = engine.execute(Loss(M=m, N=n, kind=kind))
    assert result.verification.ok, result.verification.summary()


@pytest.mark.parametrize(("rows", "split"), [(64, True), (7, False)])
def test_rows_are_split_over_threads_only_in_whole_row_tiles(rows, split):
    with new_context(), ir.Location.unknown():
        module = full_reduction_schedule(
            shape=[rows, 100], knobs=FullReductionKnobs(rows=4, cols=32, threads=2)
        )
        names: list[str] = []
        module.operation.walk(lambda op: names.append(op.name) or ir.WalkResult.ADVANCE)
    assert ("transform.structured.tile_reduction_using_forall" in names) == split
