"""Ops no dedicated family schedules (3-D convolutions, 3-D pooling, transposed
convolutions) take the generic family's register tiles: they verify, on every CPU class,
and are vectorized rather than left as scalar loops. Skipped without the torch extra."""

from __future__ import annotations

import importlib.util
import textwrap

import pytest
from mlir import ir

from mlirtune.api import engine_for
from mlirtune.ir.inspect import largest_vector
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.torch.factory import workload_from_factory
from tests.cpu_classes import cpu

pytestmark = [
    pytest.mark.jit,
    pytest.mark.skipif(
        importlib.util.find_spec("torch_mlir") is None or importlib.util.find_spec("torch") is None,
        reason="the torch extra is not installed (pip install -e '.[torch]')",
    ),
]

PROBLEM = """
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = {layer}

    def forward(self, x):
        return torch.relu(self.layer(x))


batch_size = 2


def get_inputs():
    return [torch.randn(batch_size, {shape})]


def get_init_inputs():
    return []
"""

LAYERS = {
    "conv3d": ("torch.nn.Conv3d(4, 8, 3, padding=1)", "4, 6, 8, 16"),
    "maxpool3d": ("torch.nn.MaxPool3d(2, stride=2)", "8, 8, 8, 16"),
    "conv_transpose1d": ("torch.nn.ConvTranspose1d(8, 4, 3)", "8, 30"),
}


def problem(tmp_path, name: str):
    layer, shape = LAYERS[name]
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(PROBLEM).lstrip().format(layer=layer, shape=shape))
    return workload_from_factory(str(path))


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_ops_no_family_owns_are_vectorized_and_verify(tmp_path, name):
    workload = problem(tmp_path, name)
    engine = engine_for(HostCPU(), use_specs=False)
    result = engine.execute(workload)
    assert result.verification.ok, result.verification
    dispatches = [d for d in result.extra.get("dispatches") or [] if d["kind"] == "generic"]
    assert all(d["scheduled"] for d in dispatches), dispatches
    pipelines = [d["pipeline"] for d in dispatches] or [result.extra["pipeline"]]
    assert pipelines and all("generic" in p for p in pipelines), pipelines


@pytest.mark.parametrize("cpu_class", ["avx2", "avx512"])
def test_a_3d_convolution_is_register_tiled_for_each_cpu_class(tmp_path, cpu_class):
    """The tiles follow the target's vectors: 16 f32 lanes with 32 registers, 8 with 16;
    the accumulators fill half the registers."""
    workload = problem(tmp_path, "conv3d")
    engine = engine_for(cpu(cpu_class), use_specs=False)
    lowering = engine.plan(workload)
    values = lowering.values
    lanes = 16 if cpu_class == "avx512" else 8
    registers = 32 if cpu_class == "avx512" else 16
    assert values["VECTOR"] == 16  # the 16-wide output row: one vector, or two of 8
    assert values["UNROLL"] * values["UNROLL2"] * (16 // lanes) <= registers // 2
    assert values["UNROLL"] * values["UNROLL2"] > 1  # an outer product, not one row
    with ir.Context(), ir.Location.unknown():
        lowered = engine.lower_payload(workload)
        assert largest_vector(lowered) >= lanes
