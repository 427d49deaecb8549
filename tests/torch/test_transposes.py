"""Transposes of the two innermost dims in element-wise dispatches: a tile covers up to a
vector's rows of the result, so it reads a block of the input whole (contiguous rows of it)
and transposes it in registers, where a tile of one row gathered its elements one by one
(a strided depthwise convolution's rows, deinterleaved into their phases). The tile stays
within the family's register share. Skipped without the torch extra."""

from __future__ import annotations

import pytest

from mlirtune.api import engine_for
from mlirtune.interfaces.lowering import Lowering
from mlirtune.targets.host_cpu import HostCPU
from tests.cpu_classes import cpu
from tests.torch import needs_torch, problem_workload

pytestmark = [pytest.mark.jit, needs_torch]

PROBLEM = """
import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x.transpose(-1, -2)) * 2.0


def get_inputs():
    return [torch.randn({shape})]


def get_init_inputs():
    return []
"""
# input shape, the transposed result's row loop (its second innermost dim)
SHAPES = {
    "phases": ("4, 9, 29, 2", 2),  # a row of 58 deinterleaved into 2 phases
    "odd_rows": ("6, 3", 3),
    "square": ("64, 64", 64),
}


def chain_lowering(plan: Lowering) -> Lowering:
    """The lowering of the model's one element-wise chain (its dispatch, where it was split
    into one)."""
    (lowering,) = [d.lowering for d in plan.dispatches] or [plan]
    return lowering


@pytest.mark.parametrize("name", sorted(SHAPES))
@pytest.mark.parametrize("cpu_class", ["avx2", "avx512"])
def test_a_transposing_tile_covers_the_rows_a_vector_load_reads(tmp_path, name, cpu_class):
    shape, rows = SHAPES[name]
    workload = problem_workload(tmp_path, f"{name}.py", PROBLEM.format(shape=shape))
    target = cpu(cpu_class)
    lowering = chain_lowering(engine_for(target, use_specs=False).plan(workload))
    (root,) = lowering.roots
    assert root.attributes.get("transposed_read") == 1
    values = lowering.values
    lanes = target.lanes("f32")
    # Every row when there are a few (the phases of a row), several where there are many,
    # as many as the registers hold.
    assert values["ROWS"] >= rows if rows <= 4 else values["ROWS"] >= 4
    assert values["ROWS"] * -(-values["COLS"] // lanes) <= target.features.vector_registers
    result = engine_for(HostCPU(), use_specs=False).execute(workload)
    assert result.verification.ok, result.verification


@pytest.mark.parametrize(
    "forward", ["torch.relu(x) * 2.0", "x * x[:, :1]"], ids=["plain", "first_column"]
)
def test_a_chain_without_a_transpose_keeps_one_row_per_tile(tmp_path, forward):
    """Nor is an input broadcast along the rows (read once per row) a transposed read (an
    embedding's ids are one: tests/torch/test_gathers.py)."""
    text = PROBLEM.format(shape="6, 40").replace("torch.relu(x.transpose(-1, -2)) * 2.0", forward)
    workload = problem_workload(tmp_path, "rows.py", text)
    lowering = chain_lowering(engine_for(cpu("avx512"), use_specs=False).plan(workload))
    assert "transposed_read" not in lowering.roots[0].attributes
    assert lowering.values["ROWS"] == 1
