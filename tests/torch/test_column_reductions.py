"""Reductions down the columns of a matrix as torch writes them (`dim=0`): torch-mlir's
generic has no loop outside the reduced one, or a unit one, and the axis_reduction schedule
takes it after its unit loops are folded, rather than failing and leaving it untuned; a
middle-axis reduction with a unit inner loop keeps its three loops. Skipped without the
torch extra."""

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


def get_inputs():
    return [torch.randn({shape})]  # more elements than one vector may hold


def get_init_inputs():
    return []
"""

FORMS = {
    "sum": ("torch.sum(x, dim=0)", "96, 64"),
    "amax_kept": ("torch.amax(x, dim=0, keepdim=True)", "96, 64"),
    "softmax": ("torch.softmax(x, dim=0)", "96, 64"),
    "sum_middle_of_unit_columns": ("torch.sum(x, dim=1)", "8, 800, 1"),  # keeps its loops
}


@pytest.mark.parametrize("name", sorted(FORMS))
def test_a_column_reduction_is_scheduled_and_verifies(tmp_path, name):
    forward, shape = FORMS[name]
    workload = problem_workload(
        tmp_path, f"{name}.py", PROBLEM.format(forward=forward, shape=shape)
    )
    result = engine_for(HostCPU(), use_specs=False).execute(workload)
    assert result.verification.ok, result.verification
    notes = result.extra.get("notes", [])
    assert not any("schedule failed" in note for note in notes), notes
    dispatches = result.extra.get("dispatches") or []
    assert all(d["scheduled"] for d in dispatches), dispatches
