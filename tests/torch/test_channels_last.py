"""A LayerNorm over the channels of an NCHW tensor, written as timm and torchvision write it
(permute to channels-last, layer_norm, permute back), is computed on the untransposed input
(mlirtune.dispatch.channels_last): no transpose is left, its reductions run over the middle
axis, and every dispatch is scheduled. Skipped without the torch extra."""

from __future__ import annotations

import pytest
from mlir import ir

from mlirtune.api import engine_for
from mlirtune.ir.inspect import ops_named
from mlirtune.targets.host_cpu import HostCPU
from tests.torch import needs_torch, problem_workload

pytestmark = [pytest.mark.jit, needs_torch]

PROBLEM = """
import torch
import torch.nn.functional as F

batch_size = 2


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(24))
        self.bias = torch.nn.Parameter(torch.randn(24))

    def forward(self, x):
        y = F.layer_norm(x.permute(0, 2, 3, 1), (24,), self.weight, self.bias, 1e-6)
        return {returned}


def get_inputs():
    return [torch.randn(batch_size, 24, 10, 12)]


def get_init_inputs():
    return []
"""

# What the module returns: the norm back in NCHW, or the channels-last norm itself too
# (a value of the chain read outside it: nothing is rebuilt).
RETURNED = {
    "layer_norm_2d": "y.permute(0, 3, 1, 2)",
    "escaping": "y.permute(0, 3, 1, 2), y",
}


def problem(tmp_path, name: str):
    return problem_workload(tmp_path, f"{name}.py", PROBLEM.format(returned=RETURNED[name]))


def test_a_channel_layer_norm_drops_its_transposes_and_is_scheduled(tmp_path):
    workload = problem(tmp_path, "layer_norm_2d")
    with ir.Context(), ir.Location.unknown():
        module = workload.payload_module()
        assert not ops_named(module.operation, "linalg.transpose")
    result = engine_for(HostCPU(), use_specs=False).execute(workload)
    assert result.verification.ok, result.verification
    dispatches = result.extra["dispatches"]
    assert dispatches and all(d["scheduled"] for d in dispatches), dispatches


def test_a_chain_read_outside_keeps_its_transposes(tmp_path):
    workload = problem(tmp_path, "escaping")
    with ir.Context(), ir.Location.unknown():
        module = workload.payload_module()
        assert ops_named(module.operation, "linalg.transpose")
    result = engine_for(HostCPU(), use_specs=False).execute(workload)
    assert result.verification.ok, result.verification
