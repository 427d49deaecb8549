"""Every packaged host descriptor, on every workload it can schedule, verifies against numpy
(dividing and non-dividing shapes)."""

import pytest

from mlirtune.engine import MlirJitEngine
from mlirtune.pipeline import list_descriptors, load_descriptor
from mlirtune.schedules.registry import FAMILIES
from mlirtune.workloads import BatchMatmul, Conv2d, Elementwise, Matmul, Mlp, Softmax

WORKLOADS = [
    Matmul(M=64, N=64, K=64),
    Matmul(M=37, N=50, K=23),
    Matmul(M=48, N=32, K=16, dtype="f64"),
    Mlp(M=32, N=96, K=40),
    Mlp(M=33, N=70, K=9),
    BatchMatmul(B=2, M=32, N=32, K=16),
    BatchMatmul(B=3, M=17, N=40, K=11),
    Conv2d(H=10, W=12, C=4, F=32),
    Conv2d(H=11, W=13, C=3, F=20, stride=2),
    Softmax(M=16, N=128),
    Softmax(M=7, N=45),
    Elementwise(M=16, N=128, ops="add,mul,relu"),
    Elementwise(M=9, N=30),
]


def _schedulable(descriptor_path):
    """Root kinds the descriptor's schedule stages handle on the host (None: no schedule
    stage, or one whose family does not run on the host)."""
    families = [
        FAMILIES[s.name] for s in load_descriptor(descriptor_path).stages if s.kind == "schedule"
    ]
    if not families or any("host" not in f.target_kinds for f in families):
        return None
    return set.union(*(set(f.root_kinds) for f in families))


CASES = [
    pytest.param(
        path,
        workload,
        id=f"{name}-{workload.name}-{'x'.join(map(str, workload.root.dims.values()))}",
    )
    for name, _, path in list_descriptors()
    if (kinds := _schedulable(path))
    for workload in WORKLOADS
    if workload.root.kind in kinds
]


@pytest.mark.jit
@pytest.mark.parametrize(("path", "workload"), CASES)
def test_packaged_pipeline_verifies(path, workload):
    result = MlirJitEngine(pipeline=path).execute(workload)
    assert result.verification.ok, result.verification.summary()


def test_every_schedule_kind_is_covered():
    covered = {workload.root.kind for _, workload in (c.values for c in CASES)}
    assert {"matmul", "batch_matmul", "conv2d", "reduction", "elementwise"} <= covered


@pytest.mark.jit
def test_unscheduled_default_pipeline_still_verifies():
    generic = next(path for name, _, path in list_descriptors() if name == "generic/default")
    assert MlirJitEngine(pipeline=generic).execute(Matmul(M=9, N=7, K=5)).verification.ok


@pytest.mark.parametrize(
    "path", [p for _, _, p in list_descriptors() if _schedulable(p)], ids=lambda p: p.stem
)
def test_schedule_stages_bind_every_knob_their_family_selects(path):
    """A knob the selector chooses but the stage does not pass would be reported as chosen
    while the schedule ran its default (conv_transpose once missed FLAT_ROWS so)."""
    for stage in load_descriptor(path).stages:
        if stage.kind == "schedule":
            unbound = set(FAMILIES[stage.name].selected()) - set(stage.arguments)
            assert not unbound, f"{stage.origin}: {sorted(unbound)}"
