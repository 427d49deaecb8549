"""Cumulative sums and products, as users write them (along any dim, reversed, exclusive,
masked, of integers and of bf16): torch-mlir's scan op becomes a loop nest of vector steps
(mlirtune.torch.scans), a dispatch of its own, and the results are torch's. Skipped without
the torch extra."""

from __future__ import annotations

import pytest
from mlir import ir

from mlirtune.api import engine_for
from mlirtune.ir.inspect import ops_named
from mlirtune.ir.roots import SCAN_ATTRIBUTE
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
    "many_rows": "torch.cumsum(x.reshape(15, 70), dim=1)",  # a tile of 8 rows, then 7
    "first_dim": "torch.cumsum(x, dim=0)",
    "whole_flattened": "torch.cumsum(x.flatten(), dim=0)",
    "reversed": "torch.cumsum(x.flip(2), dim=2).flip(2)",
    "exclusive_masked": "torch.cumsum(x * (x > 0), dim=2) - x * (x > 0)",
    "integers": "torch.cumsum((x > 0).long(), dim=-1)",
    "bf16": "torch.cumsum(x.bfloat16(), dim=-1).float()",
    # An infinity changes the sums after it and none before (a product with a triangular
    # block of ones made every sum of its block NaN).
    "infinity": (
        'torch.cumsum(torch.cat([x[..., :40], torch.full_like(x[..., :1], float("inf")), '
        "x[..., 41:]], dim=-1), dim=-1)"
    ),
    # Values near one keep 70 factors in range; zeros and signs pass through as they are.
    "product_last_dim": "torch.cumprod(1 + 0.1 * x, dim=-1)",
    "product_middle_dim": "torch.cumprod(x * (x.abs() > 0.5), dim=1)",
}


def scan_workload(tmp_path, name: str):
    return problem_workload(tmp_path, f"{name}.py", PROBLEM.format(forward=SCANS[name]))


@pytest.mark.parametrize("name", sorted(SCANS))
def test_a_scan_imports_and_verifies(tmp_path, name):
    result = engine_for(HostCPU(), use_specs=False).execute(scan_workload(tmp_path, name))
    assert result.verification.ok, result.verification


@pytest.mark.parametrize("name", ["last_dim", "middle_dim"])
def test_a_scan_is_a_dispatch_of_vector_steps(tmp_path, name):
    workload = scan_workload(tmp_path, name)
    lowering = engine_for(HostCPU(), use_specs=False).plan(workload)
    kinds = [d.kind for d in lowering.dispatches]
    assert kinds.count("scan") == 1, kinds
    assert len(kinds) == 1, kinds  # nothing is copied around it (transposed, say)
    with ir.Context(), ir.Location.unknown():
        payload = workload.payload_module()
        loops = [op for op in ops_named(payload.operation, "scf.for")]
        assert loops and all(SCAN_ATTRIBUTE in op.attributes for op in loops)
        reads = ops_named(payload.operation, "vector.transfer_read")
        widths = [ir.VectorType(op.results[0].type).shape[0] for op in reads]
        assert max(widths) > 1, widths
        assert not ops_named(payload.operation, "linalg.matmul")
        assert not ops_named(payload.operation, "linalg.batch_matmul")
