"""A model's pooling: its dispatch is scheduled by the pooling family (its descriptor is
named after the root kind; it was lowered as scalar loops, 6 ms of ResNet-18's stem at
batch 8) and takes the padding it reads (a dispatch of its own, the padded copy took 3 ms
more). Skipped without the torch extra."""

from __future__ import annotations

import pytest

from mlirtune.api import engine_for
from mlirtune.targets.host_cpu import HostCPU
from tests.cpu_classes import cpu
from tests.torch import needs_torch, problem_workload

pytestmark = [pytest.mark.jit, needs_torch]

# A ResNet stem (conv, ReLU, 3 x 3 max pool of stride 2 over a padded input), SqueezeNet's
# ceil-mode pool and a unit-stride one.
POOLED = """
import torch

batch_size = 2


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.pool = torch.nn.MaxPool2d(3, {stride}, padding={padding}, ceil_mode={ceil})

    def forward(self, x):
        return self.pool(torch.relu(self.conv(x)))


def get_inputs():
    return [torch.randn(batch_size, 3, 29, 29)]


def get_init_inputs():
    return []
"""
POOLS = {
    "stem": {"stride": 2, "padding": 1, "ceil": False},
    "ceil_mode": {"stride": 2, "padding": 0, "ceil": True},
    "unit_stride": {"stride": 1, "padding": 1, "ceil": False},
}


@pytest.mark.parametrize("pool", sorted(POOLS))
@pytest.mark.parametrize("cpu_class", ["avx2", "avx512"])
@pytest.mark.parametrize("threads", [1, 2])
def test_a_pool_is_a_scheduled_dispatch_with_its_padding(tmp_path, pool, cpu_class, threads):
    workload = problem_workload(tmp_path, f"{pool}.py", POOLED.format(**POOLS[pool]))
    engine = engine_for(cpu(cpu_class, threads), use_specs=False)
    lowering = engine.plan(workload)
    assert [d.kind for d in lowering.dispatches] == ["conv2d", "pooling"]
    assert all(d.scheduled for d in lowering.dispatches)
    (pooling,) = (d for d in lowering.dispatches if d.kind == "pooling")
    lanes = cpu(cpu_class).lanes("f32")
    if POOLS[pool]["stride"] > 1:  # the strided_tile_in_one_vector constraint
        assert pooling.lowering.values["OW_TILE"] <= lanes
    engine.lower_payload(workload)


@pytest.mark.parametrize("pool", sorted(POOLS))
@pytest.mark.parametrize("threads", [1, 2])
def test_a_pooled_model_verifies(tmp_path, pool, threads):
    workload = problem_workload(tmp_path, f"{pool}.py", POOLED.format(**POOLS[pool]))
    result = engine_for(HostCPU(threads=threads), use_specs=False).execute(workload)
    assert result.verification.ok, result.verification
