"""A linear layer on one row (a classifier at batch 1) imports as the weight's rows times
that row, a product of one column that the row-dot path takes, its bias beside it; a
linear layer on several rows keeps the weight as the right operand."""

from __future__ import annotations

import pytest

from mlirtune.api import engine_for
from mlirtune.schedules.contraction.rows import UNIT_ROWS
from mlirtune.targets.host_cpu import HostCPU
from tests.cpu_classes import cpu
from tests.torch import needs_torch, problem_workload

pytestmark = [pytest.mark.jit, needs_torch]

CLASSIFIER = """
import torch

batch_size = {rows}


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(96, 40, bias={bias})

    def forward(self, x):
        return self.fc(x)


def get_inputs():
    return [torch.randn({shape})]


def get_init_inputs():
    return []
"""


def product_values(lowering) -> dict[str, object]:
    """The schedule values of the module's matmul: its dispatch's, or the module's own where
    the module is that one dispatch."""
    products = [d.lowering.values for d in lowering.dispatches or [] if d.kind == "matmul"]
    assert len(products) <= 1 and (products or lowering.descriptor.name == "matmul")
    return products[0] if products else lowering.values


def classifier(tmp_path, rows: int, shape: str, bias: bool = True):
    text = CLASSIFIER.format(rows=rows, shape=shape, bias=bias)
    return problem_workload(tmp_path, f"classifier_{rows}.py", text)


@pytest.mark.parametrize("cpu_class", ["avx2", "avx512"])
@pytest.mark.parametrize(
    ("shape", "bias"), [("batch_size, 96", True), ("1, batch_size, 96", True), ("1, 96", False)]
)
def test_a_linear_layer_on_one_row_is_a_product_of_one_column(tmp_path, cpu_class, shape, bias):
    workload = classifier(tmp_path, 1, shape, bias)
    values = product_values(engine_for(cpu(cpu_class), use_specs=False).plan(workload))
    assert values["UNIT"] == UNIT_ROWS and values["NC"] == 1


def test_one_row_verifies_and_several_rows_keep_the_weight_on_the_right(tmp_path):
    engine = engine_for(HostCPU(), use_specs=False)
    assert engine.execute(classifier(tmp_path, 1, "1, 1, 96")).verification.ok
    several = classifier(tmp_path, 8, "batch_size, 96")
    assert product_values(engine.plan(several))["UNIT"] != UNIT_ROWS
    assert engine.execute(several).verification.ok
