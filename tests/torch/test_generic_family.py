"""Ops no dedicated family schedules (3-D convolutions, 3-D pooling, transposed and
grouped convolutions) take the generic family's register tiles: they verify, on every CPU class,
and are vectorized rather than left as scalar loops. Skipped without the torch extra."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from mlir import ir

from mlirtune.api import engine_for
from mlirtune.ir.inspect import largest_vector
from mlirtune.schedules.generic import _short_tail
from mlirtune.targets.host_cpu import HostCPU
from tests.cpu_classes import cpu
from tests.torch import needs_torch, problem_workload

pytestmark = [
    pytest.mark.jit,
    needs_torch,
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
    # Neither dense nor depthwise: the conv2d family's schedule failed to vectorize it,
    # and it ran as scalar loops (0.22x eager at 4 x 64 x 56 x 56 in 4 groups).
    "grouped_conv2d": ("torch.nn.Conv2d(8, 8, 3, padding=1, groups=2)", "8, 12, 16"),
}

ODD_ROWS = PROBLEM.format(layer="torch.nn.Conv1d(8, 16, 3, dilation=2)", shape="8, 62")


def problem(tmp_path, name: str):
    layer, shape = LAYERS[name]
    return problem_workload(tmp_path, f"{name}.py", PROBLEM.format(layer=layer, shape=shape))


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_ops_no_family_owns_are_vectorized_and_verify(tmp_path, name):
    workload = problem(tmp_path, name)
    engine = engine_for(HostCPU(), use_specs=False)
    result = engine.execute(workload)
    assert result.verification.ok, result.verification
    dispatches = result.extra.get("dispatches")
    if dispatches:  # split: the root's dispatch is the generic family's, and scheduled
        roots = [d for d in dispatches if d["kind"] != "elementwise"]
        assert roots and all(d["kind"] == "generic" and d["scheduled"] for d in roots), roots
    else:
        assert Path(result.extra["pipeline"]).stem == "generic", result.extra["pipeline"]


@pytest.mark.parametrize("cpu_class", ["avx2", "avx512"])
def test_a_3d_convolution_is_register_tiled_for_each_cpu_class(tmp_path, cpu_class):
    """The tiles follow the target's vectors: 16 f32 lanes with 32 registers, 8 with 16;
    the accumulators fill half the registers, one loaded row of the input against
    broadcast filter taps."""
    workload = problem(tmp_path, "conv3d")
    engine = engine_for(cpu(cpu_class), use_specs=False)
    lowering = engine.plan(workload)
    values = lowering.values
    lanes = 16 if cpu_class == "avx512" else 8
    registers = 32 if cpu_class == "avx512" else 16
    assert values["VECTOR"] == 16  # the 16-wide output row: one vector, or two of 8
    assert values["UNROLL"] * values["UNROLL2"] * (16 // lanes) <= registers // 2
    assert values["UNROLL"] * values["UNROLL2"] > 1  # an outer product, not one row
    # UNROLL runs along the output rows (loaded), UNROLL2 along the 8 filters (broadcast):
    # the filters first, the rows only for what is left.
    accumulators = registers // 2 // (16 // lanes)
    assert values["UNROLL2"] == min(8, accumulators)
    assert values["UNROLL"] == accumulators // values["UNROLL2"]
    with ir.Context(), ir.Location.unknown():
        lowered = engine.lower_payload(workload)
        assert largest_vector(lowered) >= lanes


@pytest.mark.parametrize("cpu_class", ["avx2", "avx512"])
def test_a_vector_loop_of_odd_length_gets_whole_vectors(tmp_path, cpu_class):
    """A conv1d whose 58 outputs (2 x 29) no whole vector divides: tiles of whole vectors
    (the tail peeled, transform.py), not of the divisor 2 (a quarter of eager's speed); one
    vector, whose tail is the shorter (2 of 58 with 8 lanes, 10 with 16; two vectors leave
    10 and 26)."""
    workload = problem_workload(tmp_path, "conv1d.py", ODD_ROWS)
    lanes = 16 if cpu_class == "avx512" else 8
    assert engine_for(cpu(cpu_class), use_specs=False).plan(workload).values["VECTOR"] == lanes


def test_a_long_vector_loop_keeps_two_vectors_where_its_tail_is_short():
    assert _short_tail(1018, [8, 16]) == 16  # a tail of 10: 1% of the loop
    assert _short_tail(30, [8, 16]) == 8  # 14 of 30 left to the partial tile, against 6
    assert _short_tail(58, [16, 32]) == 16  # neither is short: the shorter tail


@pytest.mark.parametrize("threads", [1, 2])
def test_a_peeled_vector_tail_verifies(tmp_path, threads):
    """The whole tiles and the peeled partial one, each static and vectorized, on one
    thread or spread over two."""
    workload = problem_workload(tmp_path, "conv1d.py", ODD_ROWS)
    engine = engine_for(HostCPU(threads=threads), use_specs=False)
    result = engine.execute(workload)
    assert result.verification.ok, result.verification
    with ir.Context(), ir.Location.unknown():
        lowered = engine.lower_payload(workload)
        assert largest_vector(lowered) >= HostCPU().lanes("f32")


ATTENTION = """
import torch


class Model(torch.nn.Module):
    def forward(self, q, k, v):
        return {attention}


batch_size = 2


def get_inputs():
    return [torch.randn(batch_size, 2, 32, 16) for _ in range(3)]


def get_init_inputs():
    return []
"""


MANUAL = "torch.matmul(torch.softmax(torch.matmul(q, k.transpose(-2, -1)) * 0.125, -1), v)"
CAUSAL = "torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)"


def test_a_product_over_batch_and_head_dims_is_register_tiled(tmp_path):
    """[batch, heads, rows, k] x [batch, heads, k, cols] is no matmul the contraction
    family takes, and no row reduction: the generic family's outer products schedule it
    (it was a row reduction of 5 loops, scalar along its rows, before). The softmax
    between them, on rows kept 4-D and stored through a [batch * heads] view, is the
    row-wise family's."""
    workload = problem_workload(tmp_path, "attention.py", ATTENTION.format(attention=MANUAL))
    result = engine_for(HostCPU(), use_specs=False).execute(workload)
    assert result.verification.ok, result.verification
    products = [d for d in result.extra["dispatches"] if "batch_matmul" in d["function"]]
    assert products and all(d["scheduled"] for d in products), products
    assert any(d["pipeline"] == "generic" for d in products), products
    softmax = [d for d in result.extra["dispatches"] if d["kind"] == "reduction"]
    assert softmax and all(d["scheduled"] for d in softmax), softmax


# An NHWC conv, whose schedule tiles its root alone, and a ReLU after it.
NHWC_CONV_RELU = """\
func.func @payload(%x: memref<1x64x64x16xf32>, %w: memref<1x1x16x16xf32>,
                   %out: memref<1x64x64x16xf32>) {
  %tx = bufferization.to_tensor %x restrict : memref<1x64x64x16xf32> to tensor<1x64x64x16xf32>
  %tw = bufferization.to_tensor %w restrict : memref<1x1x16x16xf32> to tensor<1x1x16x16xf32>
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<1x64x64x16xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<1x64x64x16xf32>)
      -> tensor<1x64x64x16xf32>
  %conv = linalg.conv_2d_nhwc_hwcf ins(%tx, %tw : tensor<1x64x64x16xf32>, tensor<1x1x16x16xf32>)
      outs(%init : tensor<1x64x64x16xf32>) -> tensor<1x64x64x16xf32>
  %relu = linalg.generic {indexing_maps = [affine_map<(n, h, w, c) -> (n, h, w, c)>,
                                           affine_map<(n, h, w, c) -> (n, h, w, c)>],
                          iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%conv : tensor<1x64x64x16xf32>) outs(%empty : tensor<1x64x64x16xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = arith.maximumf %v, %zero : f32
    linalg.yield %r : f32
  } -> tensor<1x64x64x16xf32>
  bufferization.materialize_in_destination %relu in restrict writable %out
      : (tensor<1x64x64x16xf32>, memref<1x64x64x16xf32>) -> ()
  return
}
"""


def test_a_schedule_that_leaves_an_op_untiled_splits_the_payload(tmp_path):
    """The NHWC conv schedule tiles its root alone; a ReLU after it, vectorized whole, was
    one vector of 65,536 elements that would take LLVM minutes. Such a schedule counts as
    failed: the payload splits into dispatches, and no vector passes a register block."""
    from mlirtune.pipeline.driver import LARGEST_VECTOR
    from mlirtune.workloads.from_file import FromFile

    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((1, 64, 64, 16)), rng.standard_normal((1, 1, 16, 16))
    arrays = {"x": x, "w": w, "out": np.maximum(np.einsum("nhwc,cf->nhwf", x, w[0, 0]), 0)}
    for name, array in arrays.items():
        np.save(tmp_path / f"{name}.npy", array.astype(np.float32))
    (tmp_path / "payload.mlir").write_text(NHWC_CONV_RELU)
    inputs = [tmp_path / "x.npy", tmp_path / "w.npy"]
    workload = FromFile(tmp_path / "payload.mlir", inputs=inputs, expect=[tmp_path / "out.npy"])
    engine = engine_for(HostCPU(), use_specs=False)
    result = engine.execute(workload)
    assert result.verification.ok, result.verification.summary()
    assert any("left an op untiled" in n for n in result.extra["notes"]), result.extra["notes"]
    convs = [d for d in result.extra["dispatches"] if d["kind"] == "conv2d"]
    assert convs and all(d["scheduled"] for d in convs), result.extra["dispatches"]
    with ir.Context(), ir.Location.unknown():
        assert largest_vector(engine.lower_payload(workload)) <= LARGEST_VECTOR


def test_a_causal_attention_softmax_is_row_wise(tmp_path):
    """torch's safe softmax zeroes the rows a mask leaves without a finite score; its own
    decomposition tested every element again (a boolean reduction that no vectorizer
    takes, so the softmax was lowered untuned). The rows' maxima say it."""
    workload = problem_workload(tmp_path, "causal.py", ATTENTION.format(attention=CAUSAL))
    result = engine_for(HostCPU(), use_specs=False).execute(workload)
    assert result.verification.ok, result.verification
    softmax = [d for d in result.extra["dispatches"] if d["kind"] == "reduction"]
    assert softmax and all(d["scheduled"] for d in softmax), result.extra["dispatches"]


PRODUCERS_FIRST = """
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.BatchNorm1d(8)
        self.proj = torch.nn.Conv1d(8, 32, 1)

    def forward(self, x):
        return self.proj(torch.nn.functional.gelu(self.norm(x)))


def get_inputs():
    return [torch.randn(2, 8, 40)]


def get_init_inputs():
    return []
"""


def test_a_generic_root_reading_computed_values_is_split_from_them(tmp_path):
    """A 1x1 Conv1d after a BatchNorm1d and GELU: fused into the conv's register tiles, the
    GELU was computed again for every tile of output channels (0.20x eager); the payload
    is split, the element-wise ops in a dispatch of their own."""
    workload = problem_workload(tmp_path, "producers_first.py", PRODUCERS_FIRST)
    result = engine_for(HostCPU(), use_specs=False).execute(workload)
    assert result.verification.ok, result.verification
    kinds = [d["kind"] for d in result.extra["dispatches"]]
    assert "generic" in kinds and kinds.index("generic") > 0, kinds
