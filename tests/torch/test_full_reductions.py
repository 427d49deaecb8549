"""Losses and norms that reduce a whole tensor to a scalar, as users write them: split into
a row reduction and a reduction of its rows (mlirtune.dispatch.full_reductions), every
dispatch scheduled (the one all-reduction op was lowered untuned, after its row schedule
aborted), and torch's value. Skipped without the torch extra."""

from __future__ import annotations

import pytest
from mlir import ir

from mlirtune.api import engine_for
from mlirtune.ir.inspect import largest_vector
from mlirtune.ir.roots import loop_sizes, reduction_loops
from mlirtune.targets.host_cpu import HostCPU
from tests.cpu_classes import cpu
from tests.torch import needs_torch, problem_workload

pytestmark = [pytest.mark.jit, needs_torch]

PROBLEM = """
import torch
import torch.nn.functional as F


class Model(torch.nn.Module):
    def forward(self, {arguments}):
        return {forward}


def get_inputs():
    return [torch.rand({shape}) + 0.1 for _ in range({count})]


def get_init_inputs():
    return []
"""

# forward, its arguments, their shape
FORMS = {
    "huber": ("F.smooth_l1_loss(p, t)", "p, t", "24, 96"),
    "kl_div": ('F.kl_div(torch.log(p), t, reduction="batchmean")', "p, t", "24, 96"),
    "frobenius": ('x / torch.norm(x, p="fro")', "x", "4, 6, 8, 40"),
    "cosine": ("torch.mean(1 - F.cosine_similarity(p, t, dim=1))", "p, t", "24, 96"),
    "max_of_all": ("torch.amax(x, dim=(0, 1))", "x", "24, 96"),
    # A scalar's element-wise ops (logsumexp's last steps) have no loops: they were taken
    # for a chain's root and the planning failed with an IndexError.
    "logsumexp_of_sums": ("torch.logsumexp(x.sum(1), dim=0)", "x", "24, 96"),
}


def problem(tmp_path, name: str):
    forward, arguments, shape = FORMS[name]
    count = len(arguments.split(","))
    text = PROBLEM.format(forward=forward, arguments=arguments, shape=shape, count=count)
    return problem_workload(tmp_path, f"{name}.py", text)


def whole_reductions(module: ir.Module) -> int:
    """linalg.generic ops whose two or more loops are all reduced."""
    found = 0

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal found
        if op.name == "linalg.generic":
            loops = loop_sizes(op) or []
            found += len(loops) > 1 and len(reduction_loops(op)) == len(loops)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


@pytest.mark.parametrize("name", sorted(FORMS))
def test_a_whole_tensor_reduction_is_rows_then_their_sum(tmp_path, name):
    workload = problem(tmp_path, name)
    engine = engine_for(HostCPU(), use_specs=False)
    lowering = engine.plan(workload)
    assert not any(d.schedule_failed for d in lowering.dispatches), lowering.dispatches
    assert not lowering.schedule_failed
    with ir.Context(), ir.Location.unknown():
        assert whole_reductions(workload.payload_module()) == 0
    result = engine.execute(workload)
    assert result.verification.ok, result.verification


@pytest.mark.parametrize("cpu_class", ["avx2", "avx512"])
def test_a_loss_reads_its_rows_in_vectors_for_each_cpu_class(tmp_path, cpu_class):
    workload = problem(tmp_path, "huber")
    engine = engine_for(cpu(cpu_class), use_specs=False)
    with ir.Context(), ir.Location.unknown():
        lowered = engine.lower_payload(workload)
        assert largest_vector(lowered) >= (16 if cpu_class == "avx512" else 8)


# Reductions over the innermost dims (mlirtune.dispatch.trailing_reductions).
TRAILING = {
    "global_avg_pool": ("torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)", "x", "4, 8, 14, 14"),
    "sum_of_planes": ("x.sum(dim=(2, 3))", "x", "4, 6, 8, 40"),
    "max_of_planes": ("torch.amax(x, dim=(-2, -1))", "x", "4, 6, 8, 40"),
}


@pytest.mark.parametrize("name", sorted(TRAILING))
def test_a_reduction_of_innermost_dims_is_a_row_reduction(tmp_path, name):
    """[N, C, H, W] reduced over H and W is [N * C] rows of H * W: the row family's
    reduction, not the generic family's two reduction loops."""
    forward, arguments, shape = TRAILING[name]
    text = PROBLEM.format(forward=forward, arguments=arguments, shape=shape, count=1)
    workload = problem_workload(tmp_path, f"{name}.py", text)
    engine = engine_for(HostCPU(), use_specs=False)
    lowering = engine.plan(workload)
    roots = lowering.dispatches or []
    kinds = [d.kind for d in roots] or [lowering.descriptor.name]
    assert "reduction" in kinds and "generic" not in kinds, kinds
    assert all(d.scheduled for d in roots if d.kind == "reduction"), roots
    result = engine.execute(workload)
    assert result.verification.ok, result.verification
