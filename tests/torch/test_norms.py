"""Norms as users write them (torch.nn.LayerNorm, GroupNorm, InstanceNorm2d, and a
variance): their statistics are taken in the input's precision, f32, as eager takes them
(torch-mlir's own lowering of a variance upcasts to f64: half the vector width), and a
group norm is one row-wise dispatch and a per-channel scale and shift. Skipped without the
torch extra."""

from __future__ import annotations

import pytest
from mlir import ir

from mlirtune.api import engine_for
from mlirtune.targets.host_cpu import HostCPU
from tests.torch import needs_torch, problem_workload

pytestmark = [pytest.mark.jit, needs_torch]

PROBLEM = """
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = {norm}

    def forward(self, x):
        return {forward}


batch_size = 2


def get_inputs():
    return [torch.randn(batch_size, {shape})]


def get_init_inputs():
    return []
"""

NORMS = {
    "layer_norm": ("torch.nn.LayerNorm(48)", "self.norm(x)", "10, 48"),
    "group_norm": ("torch.nn.GroupNorm(4, 16)", "self.norm(x)", "16, 6, 8"),
    # Rows of 25200 (a 3-D conv's output): tiles of one row, whose 1-D ops are still tiled.
    "group_norm_long_rows": ("torch.nn.GroupNorm(8, 16)", "self.norm(x)", "16, 14, 30, 30"),
    "instance_norm": ("torch.nn.InstanceNorm2d(8)", "self.norm(x)", "8, 6, 16"),
    "variance": ("torch.nn.Identity()", "torch.var(x, dim=-1, keepdim=True)", "12, 40"),
}


def problem(tmp_path, name: str):
    norm, forward, shape = NORMS[name]
    text = PROBLEM.format(norm=norm, forward=forward, shape=shape)
    return problem_workload(tmp_path, f"{name}.py", text)


def element_types_in(module: ir.Module) -> set[str]:
    """The element types of every shaped value the module's ops make."""
    found: set[str] = set()

    def visit(op: ir.Operation) -> ir.WalkResult:
        for result in op.results:
            if isinstance(result.type, ir.ShapedType):
                found.add(str(ir.ShapedType(result.type).element_type))
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


@pytest.mark.parametrize("name", sorted(NORMS))
def test_norm_statistics_stay_in_f32_and_verify(tmp_path, name):
    workload = problem(tmp_path, name)
    with ir.Context(), ir.Location.unknown():
        assert "f64" not in element_types_in(workload.payload_module())
    result = engine_for(HostCPU(), use_specs=False).execute(workload)
    assert result.verification.ok, result.verification
    dispatches = result.extra.get("dispatches") or []
    assert all(d["scheduled"] for d in dispatches), dispatches


def test_a_group_norm_is_one_row_wise_dispatch_and_a_scale_and_shift(tmp_path):
    """The statistics and the normalisation over [N, G, C/G*H*W] rows are one row-wise
    dispatch; the per-channel scale and shift, on [N, C, H, W] after a reshape that
    regroups the rows, are an element-wise one of their own."""
    result = engine_for(HostCPU(), use_specs=False).execute(problem(tmp_path, "group_norm"))
    assert result.verification.ok, result.verification
    kinds = [d["kind"] for d in result.extra["dispatches"]]
    assert kinds == ["reduction", "elementwise"], result.extra["dispatches"]


POSITIONS = """
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.tokens = torch.nn.Embedding(64, 32)
        self.positions = torch.nn.Embedding(16, 32)
        self.norm = torch.nn.LayerNorm(32)

    def forward(self, ids):
        positions = torch.arange(ids.shape[1], device=ids.device)
        return self.norm(self.tokens(ids) + self.positions(positions))


batch_size = 2


def get_inputs():
    return [torch.randint(0, 64, (batch_size, 16), dtype=torch.int64)]


def get_init_inputs():
    return []
"""


def test_a_layer_norm_reading_a_position_table_is_scheduled(tmp_path):
    """The position table is read at the loop indices (a tensor.extract in the norm's
    dispatch), which the row-wise schedule vectorizes: it failed to, and the dispatch ran
    untuned (0.49x eager)."""
    workload = problem_workload(tmp_path, "positions.py", POSITIONS)
    result = engine_for(HostCPU(), use_specs=False).execute(workload)
    assert result.verification.ok, result.verification.summary()
    norms = [d for d in result.extra["dispatches"] if d["kind"] == "reduction"]
    assert norms and all(d["scheduled"] for d in norms), result.extra["dispatches"]
