"""Strided convolutions, as users write them. A transposed one is imported as one
stride-one convolution per output phase (s^D of them, interleaved), not as a convolution
of an input dilated with zeros, which does s^D times the multiply-adds; a strided 1-D or
3-D one as a sum of stride-one convolutions over the input's phases, whose rows vector
loads read. They verify, with padding, output padding and groups. A 3-D depthwise one,
which torch-mlir has no lowering for, imports as a grouped one and verifies. Skipped
without the torch extra."""

from __future__ import annotations

import math

import pytest
from mlir import ir

from mlirtune.api import engine_for
from mlirtune.ir.roots import indexing_maps, is_windowed
from mlirtune.targets.host_cpu import HostCPU
from tests.cpu_classes import cpu
from tests.torch import needs_torch, problem_workload

pytestmark = [pytest.mark.jit, needs_torch]

PROBLEM = """
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.ConvTranspose{dims}d({options})

    def forward(self, x):
        return torch.relu(self.layer(x))


batch_size = 2


def get_inputs():
    return [torch.randn(batch_size, 8, {shape})]


def get_init_inputs():
    return []
"""

# dims, options (in_channels 8), input shape, filter taps, output channels
LAYERS = {
    "1d_output_padding": (1, "8, 4, 5, stride=2, padding=2, output_padding=1", "30", 5, 4),
    "2d_upsampler": (2, "8, 6, 4, stride=2, padding=1", "10, 10", 16, 6),
    "2d_groups": (2, "8, 4, 3, stride=(2, 3), groups=2", "7, 9", 9, 4),
    "3d": (3, "8, 4, 3, stride=2, padding=1, output_padding=1", "4, 5, 6", 27, 4),
}


def problem(tmp_path, name: str):
    dims, options, shape, _, _ = LAYERS[name]
    text = PROBLEM.format(dims=dims, options=options, shape=shape)
    return problem_workload(tmp_path, f"{name}.py", text)


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_a_strided_transposed_conv_does_the_multiply_adds_of_its_taps_once(tmp_path, name):
    _, options, shape, taps, filters = LAYERS[name]
    workload = problem(tmp_path, name)
    groups = 2 if "groups" in options else 1
    inputs = 2 * 8 * math.prod(int(n) for n in shape.split(","))
    direct = 2 * inputs * taps * filters // groups  # one multiply-add per tap per input
    # The phases' edges add some: each phase is as long as the longest.
    assert workload.get_complexity().flops <= 1.6 * direct
    result = engine_for(HostCPU(), use_specs=False).execute(workload)
    assert result.verification.ok, result.verification


STRIDED = {
    "conv1d": "torch.nn.Conv1d(8, 6, 5, stride=2, padding=2)",
    "conv3d": "torch.nn.Conv3d(8, 4, 3, stride=2, padding=1)",
    "conv3d_groups": "torch.nn.Conv3d(8, 4, (3, 2, 4), stride=(2, 1, 3), groups=2)",
    # Dilated: the phases are dilated convolutions (d / gcd(s, d)), of every s / gcd taps.
    "conv1d_dilated": "torch.nn.Conv1d(8, 6, 5, stride=2, dilation=3, padding=2)",
    "conv3d_dilated": "torch.nn.Conv3d(8, 4, 3, stride=(2, 3, 1), dilation=(2, 2, 3))",
}
SHAPES = {
    "conv1d": "33",
    "conv3d": "7, 8, 9",
    "conv3d_groups": "7, 8, 10",
    "conv1d_dilated": "40",
    "conv3d_dilated": "9, 10, 11",
}


def windows(module: ir.Module) -> list[list[str]]:
    """The windowed reads (`d2 + d5`, `d2 * 2 + d5`) of every windowed linalg op."""
    found: list[list[str]] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name.startswith("linalg.") and is_windowed(op):
            reads = [e for m in indexing_maps(op) for e in m.results]
            found.append([str(e) for e in reads if isinstance(e, ir.AffineBinaryExpr)])
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


def layer_problem(tmp_path, name: str, layer: str, shape: str):
    """The workload of PROBLEM with `layer` in place of its transposed convolution."""
    text = PROBLEM.replace("torch.nn.ConvTranspose{dims}d({options})", layer)
    return problem_workload(tmp_path, f"{name}.py", text.format(shape=shape))


@pytest.mark.parametrize("name", sorted(STRIDED))
def test_a_strided_conv_is_convolutions_of_stride_one(tmp_path, name):
    workload = layer_problem(tmp_path, name, STRIDED[name], SHAPES[name])
    with ir.Context(), ir.Location.unknown():
        reads = windows(workload.payload_module())
    # The output position steps by one (`d2 + d5`, not `d2 * 2 + d5`); a tap may be dilated.
    assert reads and not any("*" in read.split(" + ")[0] for op in reads for read in op), reads
    result = engine_for(HostCPU(), use_specs=False).execute(workload)
    assert result.verification.ok, result.verification


DEPTHWISE = {
    "plain": "torch.nn.Conv3d(8, 8, 3, padding=1, groups=8)",
    "strided": "torch.nn.Conv3d(8, 8, 3, stride=2, padding=1, groups=8, bias=False)",
    "transposed": "torch.nn.ConvTranspose3d(8, 8, 3, stride=2, padding=1, groups=8)",
}


@pytest.mark.parametrize("name", sorted(DEPTHWISE))
def test_a_3d_depthwise_conv_imports_as_a_grouped_one(tmp_path, name):
    workload = layer_problem(tmp_path, f"depthwise_{name}", DEPTHWISE[name], "5, 6, 7")
    result = engine_for(HostCPU(), use_specs=False).execute(workload)
    assert result.verification.ok, result.verification


# 2-D depthwise convolutions strided along W: layer, input (H, W), W stride.
DEPTHWISE_2D = {
    "downsampling": (
        "torch.nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=8, bias=False)",
        "13, 13",
        2,
    ),
    "wide_taps": ("torch.nn.Conv2d(8, 8, 5, stride=(1, 2), padding=2, groups=8)", "9, 12", 2),
    "stride_3": ("torch.nn.Conv2d(8, 8, (3, 4), stride=(2, 3), groups=8)", "10, 17", 3),
}


@pytest.mark.parametrize("name", sorted(DEPTHWISE_2D))
@pytest.mark.parametrize("cpu_class", ["avx2", "avx512"])
def test_a_2d_depthwise_conv_strided_along_w_convolves_each_phase_of_its_rows(
    tmp_path, name, cpu_class
):
    layer, shape, stride = DEPTHWISE_2D[name]
    workload = layer_problem(tmp_path, f"depthwise_2d_{name}", layer, shape)
    lowering = engine_for(cpu(cpu_class), use_specs=False).plan(workload)
    # One depthwise convolution of W stride one per phase, each reading its phase in place
    # (the only dispatches left untuned copy each phase's taps from the filter) ...
    depthwise = [d for d in lowering.dispatches if d.kind == "depthwise"]
    assert len(depthwise) == stride
    assert sum(not d.scheduled for d in lowering.dispatches) == stride
    for dispatch in depthwise:
        (root,) = dispatch.lowering.roots
        assert root.attributes.get("stride", 1) == 1, root
        assert dispatch.scheduled
    # ... deinterleaved by one transpose, whose tiles read whole rows of phases.
    transposes = [
        root
        for d in lowering.dispatches
        for root in d.lowering.roots
        if root.attributes.get("transposed_read")
    ]
    (transpose,) = transposes
    plan = next(d for d in lowering.dispatches if transpose in d.lowering.roots)
    assert plan.lowering.values["ROWS"] >= stride
    result = engine_for(HostCPU(), use_specs=False).execute(workload)
    assert result.verification.ok, result.verification
