"""A 1x1 convolution over several images with many channels (SqueezeNet's classifier at
batch 8) keeps the unit-stride NCHW path: on the channel-vector path its F_TILE x C filter
block became one vector hoisted out of the image loop, the schedule was refused and the conv
ran as scalar loops. Skipped without the torch extra."""

from __future__ import annotations

import pytest

from mlirtune.api import engine_for
from mlirtune.schedules.convolution.nchw_tiles import unit_taps
from mlirtune.targets.host_cpu import HostCPU
from tests.cpu_classes import cpu
from tests.torch import needs_torch, problem_workload

pytestmark = [pytest.mark.jit, needs_torch]

PROBLEM = """
import torch

batch_size = 2


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(320, 40, 1)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, 320, 7, 7)]


def get_init_inputs():
    return []
"""


@pytest.mark.parametrize("cpu_class", ["avx2", "avx512"])
def test_a_batched_pointwise_conv_is_scheduled_on_each_cpu_class(tmp_path, cpu_class):
    workload = problem_workload(tmp_path, "pointwise.py", PROBLEM)
    lowering = engine_for(cpu(cpu_class), use_specs=False).plan(workload)
    (root,) = lowering.roots
    assert root.kind == "conv2d" and unit_taps(root)
    assert not lowering.schedule_failed


def test_a_batched_pointwise_conv_verifies(tmp_path):
    workload = problem_workload(tmp_path, "pointwise.py", PROBLEM)
    result = engine_for(HostCPU(), use_specs=False).execute(workload)
    assert result.verification.ok, result.verification
    assert not any("schedule failed" in note for note in result.extra.get("notes", []))
