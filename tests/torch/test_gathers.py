"""Gathers as users write them (nn.Embedding, index_select): the indices are read in the
gather's body (mlirtune.ir.gathers), so a table row is one contiguous vector load per tile
rather than a lane-by-lane gather, on every CPU class. Skipped without the torch extra."""

from __future__ import annotations

import pytest
from mlir import ir

from mlirtune.api import engine_for
from mlirtune.ir.gathers import reads_rows
from mlirtune.ir.inspect import find_function, ops_named
from mlirtune.targets.host_cpu import HostCPU
from tests.cpu_classes import cpu
from tests.torch import needs_torch, problem_workload

pytestmark = [pytest.mark.jit, needs_torch]

PROBLEM = """
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.nn.Embedding(300, 48)

    def forward(self, ids):
        return {forward}


def get_inputs():
    return [torch.randint(0, 300, (4, 24))]


def get_init_inputs():
    return []
"""

FORMS = {
    "embedding": "self.table(ids)",
    "embedding_bag": "self.table(ids).sum(dim=1)",  # the axis reduction steps one row
    "index_select": "torch.index_select(self.table.weight, 0, ids.flatten())",
}


def problem(tmp_path, name: str):
    return problem_workload(tmp_path, f"{name}.py", PROBLEM.format(forward=FORMS[name]))


@pytest.mark.parametrize("name", sorted(FORMS))
def test_a_gather_reads_its_indices_in_its_body_and_verifies(tmp_path, name):
    workload = problem(tmp_path, name)
    with ir.Context(), ir.Location.unknown():
        module = workload.payload_module()
        assert reads_rows(find_function(module, workload.entry).operation)
    result = engine_for(HostCPU(), use_specs=False).execute(workload)
    assert result.verification.ok, result.verification


@pytest.mark.parametrize("name", ["embedding", "embedding_bag"])
@pytest.mark.parametrize("cpu_class", ["avx2", "avx512"])
def test_an_embedding_row_is_a_vector_load_for_each_cpu_class(tmp_path, cpu_class, name):
    """Every f32 the kernel loads comes in a vector of the target's width at least (the
    ids are the only scalars it reads), and none through a gather: summed over a bag, the
    rows are stepped one at a time (two per step were one vector.gather)."""
    workload = problem(tmp_path, name)
    engine = engine_for(cpu(cpu_class), use_specs=False)
    lanes = 16 if cpu_class == "avx512" else 8
    with ir.Context(), ir.Location.unknown():
        lowered = engine.lower_payload(workload)
        loaded = [op.results[0].type for op in ops_named(lowered.operation, "llvm.load")]
        floats = [t for t in loaded if str(t) == "f32" or isinstance(t, ir.VectorType)]
        widths = [ir.VectorType(t).shape[-1] if isinstance(t, ir.VectorType) else 1 for t in floats]
        gathers = ops_named(lowered.operation, "llvm.intr.masked.gather")
    assert widths and min(widths) >= lanes and not gathers, (widths, len(gathers))
