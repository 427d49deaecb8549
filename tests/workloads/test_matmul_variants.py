"""Matmul variants (KernelBench level 1, 14-18): operands stored transposed and triangular
masks of the product, on the contraction family's unpacked, packed and bf16 paths."""

import itertools

import numpy as np
import pytest
from mlir import ir

from mlirtune.interfaces.errors import UsageError
from mlirtune.ir.context import new_context
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.workloads import Matmul

TRANSPOSES = ("none", "a", "b", "ab")
MASKS = ("none", "upper", "lower")
SHAPES = (
    {"M": 16, "N": 32, "K": 16},
    {"M": 33, "N": 17, "K": 29},  # nothing divides the tiles; a one-column register tile
    {"M": 1, "N": 24, "K": 9},
    {"M": 12, "N": 1, "K": 7},
)


@pytest.mark.jit
@pytest.mark.parametrize(
    ("shape", "transpose", "mask"), list(itertools.product(SHAPES, TRANSPOSES, MASKS))
)
def test_variant_verifies(engine, shape, transpose, mask):
    result = engine.execute(Matmul(**shape, transpose=transpose, mask=mask))
    assert result.verification.ok, result.verification.summary()


@pytest.mark.jit
@pytest.mark.parametrize("transpose", TRANSPOSES)
@pytest.mark.parametrize("pack", [1, 2])
def test_packed_path_absorbs_the_transpose(engine, transpose, pack):
    """Packing B (and A) panels from any stored layout, with a fused mask and bias."""
    workload = Matmul(M=32, N=64, K=32, transpose=transpose, mask="upper", bias=True)
    parameters = {"MC": 16, "NC": 32, "KC": 16, "MR": 8, "NR": 16, "PACK": pack}
    result = engine.execute(workload, parameters)
    assert result.verification.ok, result.verification.summary()
    assert result.parameters["PACK"] == pack


@pytest.mark.jit
@pytest.mark.parametrize("narrow", ["bf16", "f16"])
@pytest.mark.parametrize("transpose", ["a", "ab"])
def test_half_precision_with_a_transposed_takes_the_fma_path(engine, transpose, narrow):
    workload = Matmul(M=16, N=32, K=16, dtype=narrow, transpose=transpose, mask="lower")
    result = engine.execute(workload)
    assert result.verification.ok, result.verification.summary()
    assert result.parameters["UNIT"] == 0


@pytest.mark.jit
@pytest.mark.parametrize("unit", [0, 1, 2])
def test_bf16_with_b_stored_n_by_k_runs_on_every_path_the_host_has(engine, unit):
    """A Linear layer's weight: the pair paths pack its K pairs transposed."""
    cpu = HostCPU()
    usable = {0: True, 1: cpu.has_bf16_dot(), 2: cpu.has_amx()}
    if not usable[unit]:
        pytest.skip(f"this host lacks UNIT={unit}'s instructions (or its OS refuses AMX)")
    workload = Matmul(M=64, N=96, K=64, dtype="bf16", transpose="b")
    result = engine.execute(workload, {"UNIT": unit})
    assert result.verification.ok, result.verification.summary()


def test_f16_has_no_pair_paths():
    """x86 has no f16 dot products or AMX tiles here: UNIT=1 is refused by name."""
    with (
        new_context(),
        ir.Location.unknown(),
        pytest.raises(UsageError, match=r"dot_needs_pair_types.*not matmul of f16"),
    ):
        Matmul(M=16, N=32, K=16, dtype="f16").schedule_module({"UNIT": 1})


def test_bf16_pair_paths_refuse_a_stored_k_by_m():
    with (
        new_context(),
        ir.Location.unknown(),
        pytest.raises(UsageError, match="dot_needs_plain_layout"),
    ):
        Matmul(M=16, N=32, K=16, dtype="bf16", transpose="a").schedule_module({"UNIT": 1})


def test_layouts_and_root():
    workload = Matmul(M=3, N=5, K=7, transpose="ab")
    assert [a.shape for a in workload.arguments()] == [(7, 3), (5, 7), (3, 5)]
    assert workload.root.kind == "matmul"
    assert workload.root.dims == {"M": 3, "N": 5, "K": 7}
    assert workload.root.attributes == {"transpose_a": 1, "transpose_b": 1}
    assert Matmul(M=3, N=5, K=7).root.attributes == {}


@pytest.mark.parametrize("transpose", TRANSPOSES)
@pytest.mark.parametrize("mask", MASKS)
def test_reference_and_baselines_agree(transpose, mask):
    workload = Matmul(M=6, N=5, K=4, transpose=transpose, mask=mask, relu=True)
    a, b = (x.astype(np.float64) for x in workload.inputs)
    c = np.maximum((a.T if "a" in transpose else a) @ (b.T if "b" in transpose else b), 0)
    c = {"upper": np.triu(c), "lower": np.tril(c), "none": c}[mask]
    np.testing.assert_allclose(workload.reference_outputs[0], c)
    np.testing.assert_allclose(workload.numpy_baseline()(), c, rtol=1e-5, atol=1e-6)
    torch_result = workload.torch_baseline()().numpy()
    np.testing.assert_allclose(torch_result, c, rtol=1e-5, atol=1e-6)


def test_complexity_counts_the_mask():
    plain = Matmul(M=4, N=5, K=6).get_complexity()
    masked = Matmul(M=4, N=5, K=6, mask="upper", transpose="ab").get_complexity()
    assert masked.flops == plain.flops + 4 * 5
    assert masked.bytes_read == plain.bytes_read


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"transpose": "c"}, "matmul: transpose='c' is not one of none, a, b, ab"),
        ({"transpose": "ba"}, "transpose='ba'"),
        ({"mask": "diagonal"}, "matmul: mask='diagonal' is not one of none, upper, lower"),
        ({"mask": ""}, "mask=''"),
    ],
)
def test_bad_options(options, message):
    with pytest.raises(UsageError, match=message):
        Matmul(**options)


def test_bad_options_from_strings():
    with pytest.raises(UsageError, match="matmul: mask='triu'"):
        Matmul.from_strings({"mask": "triu"})
    assert Matmul.from_strings({"transpose": "b", "mask": "lower"}).options["mask"] == "lower"
