"""Every built-in workload lowers through a pipeline with a schedule family, never through
the unscheduled default lowering (which a payload of several root ops would otherwise
take): including the variants with several root ops."""

from __future__ import annotations

import pytest

from mlirtune.pipeline.plan import plan_for
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.workloads import WORKLOADS

VARIANTS = [(name, {}) for name in sorted(WORKLOADS)] + [
    ("norm", {"kind": "layer", "affine": True}),  # two row reductions
    ("softmax", {"log": True}),
    ("pool", {"spatial": "8,8,8", "kernel": 2}),  # 3-D: two pooling stages
    ("loss", {"kind": "triplet"}),
    ("reduce", {"op": "argmax"}),
    ("conv2d", {"layout": "nchw", "padding": 1}),
]


@pytest.mark.parametrize(("name", "options"), VARIANTS, ids=lambda v: str(v))
def test_the_plan_has_a_schedule_stage(name, options):
    lowering = plan_for(WORKLOADS[name](**options), HostCPU())
    schedules = [stage for stage in lowering.descriptor.stages if stage.kind == "schedule"]
    assert schedules, f"{name} {options} lowers through {lowering.descriptor.name}, unscheduled"
