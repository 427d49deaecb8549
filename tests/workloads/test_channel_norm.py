"""channel_norm: batch norm (inference and training), group norm and RMS norm over the channel
axis of NCHW. Verification on regular, odd and single-element shapes, non-dividing schedule
parameters and two threads; the schedule's fusion; PyTorch's and numpy's forms; bad options."""

from __future__ import annotations

import importlib.util
import itertools

import numpy as np
import pytest

from mlirtune.api import engine_for
from mlirtune.interfaces.errors import UsageError
from mlirtune.pipeline.plan import plan_for
from mlirtune.schedules.registry import FAMILIES
from mlirtune.targets import HostCPU
from mlirtune.tune.space_for import space_for
from mlirtune.workloads import WORKLOADS
from mlirtune.workloads.channel_norm import KINDS, ChannelNorm

HAS_TORCH = importlib.util.find_spec("torch") is not None
# (shape, groups for kind=group): regular; odd (C=3, H=5, W=7); N=1 with H=W=1; G=1; one
# element.
SHAPES = [("2,8,4,6", 4), ("3,3,5,7", 3), ("1,4,1,1", 2), ("2,6,3,5", 1), ("1,1,1,1", 1)]


def _workload(kind: str, shape: str, groups: int, **options) -> ChannelNorm:
    extra = {"groups": groups} if kind == "group" else {}
    return ChannelNorm(kind=kind, shape=shape, **extra, **options)


@pytest.mark.jit
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("shape", "groups"), SHAPES)
def test_channel_norm_verifies(engine, kind, shape, groups):
    result = engine.execute(_workload(kind, shape, groups))
    assert result.verification.ok, result.verification.summary()
    assert not result.verification.skipped


@pytest.mark.jit
@pytest.mark.parametrize("kind", KINDS)
def test_channel_norm_verifies_in_f64_with_non_dividing_tiles(engine, kind):
    """H*W = 65: COLS=16 leaves partial column tiles; rms's S_TILE=48 a partial block and
    R_STEP=3 a partial step over its 7 channels."""
    workload = _workload(kind, "2,7,5,13", 7, dtype="f64", eps=1e-3)
    result = engine.execute(workload, {"COLS": 16, "S_TILE": 48, "R_STEP": 3})
    assert result.verification.ok, result.verification.summary()


@pytest.mark.jit
@pytest.mark.parametrize("kind", KINDS)
def test_channel_norm_on_two_threads(kind):
    engine = engine_for(HostCPU(threads=2), use_specs=False)
    result = engine.execute(_workload(kind, "4,6,4,8", 2))
    assert result.verification.ok, result.verification.summary()


@pytest.mark.jit
@pytest.mark.parametrize("kind", KINDS)
def test_every_op_is_fused_and_vectorized(engine, kind):
    """One outer loop holds every statistic and the last op; nothing stays a linalg op."""
    stages = {}
    engine.lower_payload(
        _workload(kind, "2,8,4,16", 2),
        None,
        observer=lambda stage, module: stages.setdefault(stage, str(module)),
    )
    scheduled = next(text for stage, text in stages.items() if stage.startswith("schedule"))
    assert "linalg." not in scheduled
    body = scheduled.split("func.func")[1]
    outermost = [
        line for line in body.splitlines() if line.startswith("    %") and "scf.for" in line
    ]
    # group also loops over its broadcast weight and bias before the outer loop.
    assert len(outermost) == (3 if kind == "group" else 1), outermost


@pytest.mark.parametrize("kind", KINDS)
def test_the_plan_uses_the_channel_norm_schedule(kind):
    lowering = plan_for(_workload(kind, "2,8,4,6", 2), HostCPU())
    assert lowering.descriptor.name.endswith("channel_norm")
    assert [s.name for s in lowering.descriptor.stages if s.kind == "schedule"] == ["channel_norm"]


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
@pytest.mark.parametrize("kind", KINDS)
def test_the_selection_is_valid_and_the_space_agrees(kind, isa):
    """At KernelBench's shape: the selector's config breaks no constraint, and the family's
    violations agree with the tuner's search space."""
    op = _workload(kind, "16,64,256,256", 8).root
    cpu = HostCPU(isa=isa, l1d_bytes=32 << 10, l2_bytes=1 << 20)
    family = FAMILIES["channel_norm"]
    assert family.violations(op, cpu, family.select(op, cpu)) == []
    space = space_for(op, "channel_norm", cpu)
    for values in itertools.product(*space.domains.values()):
        config = dict(zip(space.domains, values, strict=True))
        assert family.violations(op, cpu, config) == space.violations(config)


def test_reference_statistics():
    workload = ChannelNorm(kind="batch_train", shape="4,3,5,6")
    out = workload.reference_outputs[0]
    _, weight, bias = workload.inputs
    normalised = (out - bias[None, :, None]) / weight[None, :, None]
    np.testing.assert_allclose(normalised.mean(axis=(0, 2)), 0.0, atol=1e-12)
    np.testing.assert_allclose(normalised.var(axis=(0, 2)), 1.0, rtol=1e-3)
    out = ChannelNorm(kind="rms", shape="2,16,3,3").reference_outputs[0]
    np.testing.assert_allclose((out * out).mean(axis=1), 1.0, rtol=1e-3)
    workload = ChannelNorm(kind="group", shape="2,8,3,3", groups=4)
    assert workload.arguments()[0].shape == (8, 2, 9)  # [N*G, C/G, H*W]
    assert workload.inputs[2].shape == (8,)  # bias per channel


def test_running_variance_is_positive():
    _, _, var, _, _ = ChannelNorm(kind="batch", shape="2,64,2,2").inputs
    assert (var > 0).all()


@pytest.mark.parametrize("kind", KINDS)
def test_numpy_baseline_matches_reference(kind):
    workload = _workload(kind, "2,6,3,5", 3)
    np.testing.assert_allclose(
        workload.numpy_baseline()().reshape(workload.view),
        workload.reference_outputs[0],
        rtol=1e-4,
        atol=1e-5,
    )


@pytest.mark.skipif(not HAS_TORCH, reason="torch not installed")
@pytest.mark.parametrize("kind", KINDS)
def test_torch_baseline_matches_reference(kind):
    workload = _workload(kind, "2,6,3,5", 3)
    result = workload.torch_baseline()().numpy()
    np.testing.assert_allclose(
        result.reshape(workload.view), workload.reference_outputs[0], rtol=1e-4, atol=1e-5
    )


def test_from_strings_parses_eps():
    workload = ChannelNorm.from_strings({"kind": "rms", "shape": "1,2,3,4", "eps": "1e-3"})
    assert workload.eps == 1e-3 and workload.describe()["eps"] == 1e-3
    assert WORKLOADS["channel_norm"] is ChannelNorm


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"kind": "layer"}, "channel_norm: kind='layer' is not one of batch"),
        ({"kind": "group", "shape": "2,6,4,4", "groups": 4}, "groups=4 does not divide the 6"),
        ({"kind": "group", "groups": 0}, "channel_norm: groups must be positive"),
        ({"shape": "16,64,256"}, "channel_norm: shape='16,64,256' must be N,C,H,W"),
        ({"shape": "2,0,3,3"}, "channel_norm: shape='2,0,3,3' must have 1 to 5 positive"),
        ({"shape": "2,x,3,3"}, "channel_norm: shape='2,x,3,3' must be comma-separated"),
        ({"eps": 0.0}, "channel_norm: eps=0.0 must be a positive"),
        ({"eps": -1e-5}, "channel_norm: eps=-1e-05 must be a positive"),
        ({"eps": "tiny"}, "channel_norm: eps='tiny' is not a number"),
        ({"axis": 1}, "channel_norm: unknown option"),
    ],
)
def test_bad_options(options, message):
    with pytest.raises(UsageError, match=message):
        ChannelNorm(**options)
