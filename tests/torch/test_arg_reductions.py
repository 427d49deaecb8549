"""argmax, argmin and max(dim) as users write them: split into an extreme and the first index
holding it (mlirtune.dispatch.arg_reductions), two row reductions that are vectorized and
give torch's indices, ties and NaN included. Skipped without the torch extra."""

from __future__ import annotations

import pytest
from mlir import ir

from mlirtune.api import engine_for
from mlirtune.ir.inspect import largest_vector, ops_named
from mlirtune.targets.host_cpu import HostCPU
from tests.cpu_classes import cpu
from tests.torch import needs_torch, problem_workload

pytestmark = [pytest.mark.jit, needs_torch]

PROBLEM = """
import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return {forward}


def get_inputs():
    x = torch.randint(0, 5, ({shape},)).float()  # small integers: many ties
    x[1, 2] = {nan}
    return [x]


def get_init_inputs():
    return []
"""

# forward, input shape, a value planted in it (a NaN wins an argmax or argmin, as in torch;
# a NaN maximum is no value the verifier compares)
FORMS = {
    "argmax_rows": ("torch.argmax(x, dim=-1)", "6, 40, 96", 'float("nan")'),
    "argmin_middle_axis": ("torch.argmin(x, dim=1)", "6, 40, 24", 'float("nan")'),
    "argmax_columns": ("torch.argmax(x, dim=0)", "96, 64", 'float("nan")'),
    "max_values_and_indices": ("torch.max(x, dim=-1)", "8, 200", "9.0"),
}


def problem(tmp_path, name: str):
    forward, shape, planted = FORMS[name]
    text = PROBLEM.format(forward=forward, shape=shape, nan=planted)
    return problem_workload(tmp_path, f"{name}.py", text)


@pytest.mark.parametrize("name", sorted(FORMS))
def test_arg_reductions_split_and_give_torch_indices(tmp_path, name):
    workload = problem(tmp_path, name)
    with ir.Context(), ir.Location.unknown():
        module = workload.payload_module()
        generics = ops_named(module.operation, "linalg.generic")
        assert generics and all(len(op.results) == 1 for op in generics)
    result = engine_for(HostCPU(), use_specs=False).execute(workload)
    assert result.verification.ok, result.verification
    dispatches = result.extra.get("dispatches") or []
    assert all(d["scheduled"] for d in dispatches), dispatches


@pytest.mark.parametrize("cpu_class", ["avx2", "avx512"])
def test_an_argmax_over_rows_is_vectorized_for_each_cpu_class(tmp_path, cpu_class):
    """Both reductions are scheduled (not lowered untuned, as the one two-result op was)
    and step through the row in vectors of the target's width at least."""
    workload = problem(tmp_path, "argmax_rows")
    engine = engine_for(cpu(cpu_class), use_specs=False)
    lowering = engine.plan(workload)
    assert not lowering.schedule_failed and not any(d.schedule_failed for d in lowering.dispatches)
    with ir.Context(), ir.Location.unknown():
        lowered = engine.lower_payload(workload)
        assert largest_vector(lowered) >= (16 if cpu_class == "avx512" else 8)
