"""What a convolution's dispatch takes besides the convolution: its bias, broadcast over
the output that it accumulates onto (as a dispatch of its own, the broadcast wrote an
output-sized tensor that the convolution's dispatch copied twice: ConvNeXt-atto at batch 8
spent 11 of 80 ms in those copies), and, for unit-stride NCHW convolutions, the
element-wise ops after it, tiled by its output rows. Skipped without the torch extra."""

from __future__ import annotations

import pytest
from mlir import ir

from mlirtune.api import engine_for
from mlirtune.ir.inspect import largest_vector, ops_named
from mlirtune.pipeline.driver import LARGEST_VECTOR
from mlirtune.targets.host_cpu import HostCPU
from tests.cpu_classes import cpu
from tests.torch import needs_torch, problem_workload

pytestmark = [pytest.mark.jit, needs_torch]

BIASED = """
import torch

batch_size = 2


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.expand = torch.nn.Conv2d(8, 32, 1)
        self.spatial = torch.nn.Conv2d(32, 32, 7, padding=3, groups=32)
        self.project = torch.nn.Conv2d(32, 8, 3, stride=2, padding=1)

    def forward(self, x):
        return self.project(self.spatial(self.expand(x)))


def get_inputs():
    return [torch.randn(batch_size, 8, 14, 14)]


def get_init_inputs():
    return []
"""

# A unit-stride conv and its epilogue: a scale, a residual add and a GELU.
EPILOGUE = """
import torch

batch_size = 2


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(
            16, {channels}, {kernel}, stride={stride}, padding={kernel} // 2, groups={groups}
        )

    def forward(self, x, residual):
        return torch.nn.functional.gelu(self.conv(x) * 0.5 + residual)


def get_inputs():
    image = torch.randn(batch_size, 16, {size}, {size})
    return [image, torch.randn(batch_size, {channels}, {out}, {out})]


def get_init_inputs():
    return []
"""
# (kernel, stride, groups, image, output) of the conv2d family's flat path (a 1x1 conv over
# rows of 28: partial vectors), row path (3x3 over rows of 32, whole vectors) and strided
# path, and of a depthwise conv.
SHAPES = {
    "flat": (1, 1, 1, 28, 28),
    "rows": (3, 1, 1, 32, 32),
    "strided": (3, 2, 1, 32, 16),
    "depthwise": (3, 1, 16, 32, 32),
}


def _problem(path: str) -> str:
    kernel, stride, groups, size, out = SHAPES[path]
    channels = 16 if groups > 1 else 24
    return EPILOGUE.format(
        kernel=kernel, stride=stride, groups=groups, size=size, out=out, channels=channels
    )


def test_each_convolution_takes_its_bias_into_its_dispatch(tmp_path):
    workload = problem_workload(tmp_path, "biased.py", BIASED)
    engine = engine_for(HostCPU(), use_specs=False)
    lowering = engine.plan(workload)
    kinds = [dispatch.kind for dispatch in lowering.dispatches]
    assert kinds == ["conv2d", "depthwise", "conv2d"], kinds
    result = engine.execute(workload)
    assert result.verification.ok, result.verification


def _allocated_shapes(module: ir.Module) -> list[list[int]]:
    allocs = ops_named(module.operation, "memref.alloc")
    return [ir.MemRefType(op.results[0].type).shape for op in allocs]


@pytest.mark.parametrize("path", sorted(SHAPES))
@pytest.mark.parametrize("cpu_class", ["avx2", "avx512"])
@pytest.mark.parametrize("threads", [1, 2])
def test_an_epilogue_runs_on_the_convolutions_output_rows(tmp_path, path, cpu_class, threads):
    """Scheduled with the conv (none of its ops left untiled, no vector past a register
    block), and no buffer holds the conv's whole output between it and its epilogue."""
    workload = problem_workload(tmp_path, f"{path}.py", _problem(path))
    engine = engine_for(cpu(cpu_class, threads), use_specs=False)
    lowering = engine.plan(workload)
    kinds = [d.kind for d in lowering.dispatches]
    assert kinds in ([], ["depthwise" if path == "depthwise" else "conv2d"]), kinds
    with ir.Context(), ir.Location.unknown():
        lowered = engine.lower_payload(workload)
        assert largest_vector(lowered) <= LARGEST_VECTOR
        output = SHAPES[path][-1]
        assert not [s for s in _allocated_shapes(lowered) if s[2:] == [output, output]]
    assert not [n for n in lowering.notes if "untiled" in n or "failed" in n], lowering.notes


@pytest.mark.parametrize("path", sorted(SHAPES))
@pytest.mark.parametrize("threads", [1, 2])
def test_a_convolution_with_its_epilogue_verifies(tmp_path, path, threads):
    workload = problem_workload(tmp_path, f"{path}.py", _problem(path))
    result = engine_for(HostCPU(threads=threads), use_specs=False).execute(workload)
    assert result.verification.ok, result.verification
    assert not [n for n in result.extra["notes"] if "untiled" in n or "failed" in n]
