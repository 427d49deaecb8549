"""Cumulative sums, as users write them (along any dim, reversed, exclusive, masked), and
cumulative products: the import makes the sums products with triangular blocks of ones and
the products element-wise steps of doubling, where torch-mlir's scan op has no lowering to
linalg and the module was refused. Skipped without the torch extra."""

from __future__ import annotations

import pytest

from mlirtune.api import engine_for
from mlirtune.targets.host_cpu import HostCPU
from tests.torch import needs_torch, problem_workload

pytestmark = [pytest.mark.jit, needs_torch]

PROBLEM = """
import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return {forward}


batch_size = 3


def get_inputs():
    return [torch.randn(batch_size, 5, 70)]


def get_init_inputs():
    return []
"""

SCANS = {
    "last_dim": "torch.cumsum(x, dim=-1)",
    "middle_dim": "torch.cumsum(x, dim=1)",
    "reversed": "torch.cumsum(x.flip(2), dim=2).flip(2)",
    "exclusive_masked": "torch.cumsum(x * (x > 0), dim=2) - x * (x > 0)",
    # Values near one keep 70 factors in range; zeros and signs pass through as they are.
    "product_last_dim": "torch.cumprod(1 + 0.1 * x, dim=-1)",
    "product_middle_dim": "torch.cumprod(x * (x.abs() > 0.5), dim=1)",
}


@pytest.mark.parametrize("name", sorted(SCANS))
def test_a_cumulative_sum_imports_and_verifies(tmp_path, name):
    workload = problem_workload(tmp_path, f"{name}.py", PROBLEM.format(forward=SCANS[name]))
    result = engine_for(HostCPU(), use_specs=False).execute(workload)
    assert result.verification.ok, result.verification
