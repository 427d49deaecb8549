"""int8 matmuls (int8 x int8 -> int32, exact): which path each target takes, what the dot
path lowers to (AVX2 vpmaddwd, checked at the IR level on every host), and exact results
on every path, odd shapes and two threads included."""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest

from mlirtune.api import engine_for
from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.op import OpInfo
from mlirtune.ir.inspect import intrinsics_called, op_counts
from mlirtune.schedules.contraction.knob_values import PACK_B, UNIT_AMX, UNIT_DOT, UNIT_FMA
from mlirtune.schedules.contraction.rows import UNIT_ROWS
from mlirtune.schedules.contraction.steps.pair_products import PMADDWD
from mlirtune.schedules.registry import FAMILIES
from mlirtune.targets.host_cpu import CpuFeatures, HostCPU, detect_features
from mlirtune.workloads import Matmul
from tests.schedules.test_dot_contraction_path import AMX, BASE, assert_threads_agree, outputs

CONTRACTION = FAMILIES["contraction"]
AVX2 = dataclasses.replace(BASE, isa="avx2", vector_bits=256, vector_registers=16)
SSE = dataclasses.replace(BASE, isa="sse", vector_bits=128, vector_registers=16)
HOST_HAS_AVX2 = detect_features().isa in ("avx2", "avx512")
needs_avx2 = pytest.mark.skipif(not HOST_HAS_AVX2, reason="this host lacks AVX2 (vpmaddwd)")


def dot(mc: int, kc: int, mr: int) -> dict[str, int]:
    """Dot-path blocks: a 16-column panel per column block, as the selector's."""
    return {"MC": mc, "NC": 16, "KC": kc, "MR": mr, "NR": 16, "PACK": 0, "UNIT": UNIT_DOT}


def int8_op(m: int, n: int, k: int, **layout: int) -> OpInfo:
    """An int8 matmul's root; `layout` sets transpose_a / transpose_b."""
    return OpInfo("matmul", {"M": m, "N": n, "K": k}, ("i8", "i8", "i32"), attributes=layout)


@pytest.mark.parametrize(
    ("features", "unit"),
    [(AVX2, UNIT_DOT), (BASE, UNIT_DOT), (dataclasses.replace(BASE, flags=AMX), UNIT_DOT)],
    ids=["avx2", "avx512", "amx-bf16-only"],  # AMX-INT8 hosts: test_amx_contraction_path.py
)
def test_int8_matmuls_take_dot_products_on_avx2_and_later(features: CpuFeatures, unit: int):
    target = HostCPU(features)
    shapes = (int8_op(512, 512, 512), int8_op(128, 4096, 4096), int8_op(16, 4096, 512))
    weights = int8_op(256, 4096, 1024, transpose_b=1)  # a Linear layer's [N, K] weight
    for op in (*shapes, weights):
        config = CONTRACTION.select(op, target)
        assert config["UNIT"] == unit, op.dims
        assert config["NC"] == config["NR"] and config["NR"] % 8 == 0  # one contiguous panel
        assert not CONTRACTION.violations(op, target, {**config, "KU": 1, "ORDER": 1})


@pytest.mark.parametrize(
    ("op", "unit"),
    [
        (int8_op(8, 4096, 512), UNIT_FMA),  # skinny: memory-bound, no int16 copies
        (int8_op(64, 64, 33), UNIT_FMA),  # odd K has no whole pairs
        (int8_op(64, 1, 512), UNIT_ROWS),  # one column: the row-dot path
        (int8_op(256, 256, 256, transpose_a=1), UNIT_FMA),  # A stored [K, M]
    ],
    ids=["skinny", "odd-k", "one-column", "a-transposed"],
)
def test_shapes_the_int8_dot_path_does_not_take(op: OpInfo, unit: int):
    assert CONTRACTION.select(op, HostCPU(AVX2))["UNIT"] == unit


def test_constraints_keep_int8_off_hosts_and_units_without_its_products():
    op = int8_op(512, 256, 256)
    config = {**CONTRACTION.select(op, HostCPU(AVX2)), "KU": 1, "ORDER": 1}
    assert config["UNIT"] == UNIT_DOT
    assert "dot_needs_dot_products" in CONTRACTION.violations(op, HostCPU(SSE), config)
    amx = {**config, "MR": 16, "NR": 16, "UNIT": UNIT_AMX}
    broken = CONTRACTION.violations(op, HostCPU(dataclasses.replace(BASE, flags=AMX)), amx)
    assert "amx_needs_amx_tiles" in broken  # the host has AMX-BF16, not AMX-INT8
    assert "dot_needs_whole_vectors" in CONTRACTION.violations(
        op, HostCPU(AVX2), {**config, "NR": 12}
    )
    transposed_a = int8_op(512, 256, 256, transpose_a=1)
    assert "dot_needs_plain_layout" in CONTRACTION.violations(transposed_a, HostCPU(AVX2), config)


def intrinsics(workload: Matmul, parameters: dict[str, int]) -> set[str]:
    """The LLVM intrinsics `workload` lowers to for an AVX2 target (lowering runs nothing,
    so this holds on every host)."""
    engine = engine_for(HostCPU(AVX2), use_specs=False)
    return intrinsics_called(engine.lower_payload(workload, parameters))


@pytest.mark.jit
def test_the_int8_dot_path_lowers_to_vpmaddwd_on_any_host():
    workload = Matmul(M=64, N=64, K=64, dtype="i8")
    assert PMADDWD in intrinsics(workload, dot(64, 64, 4))
    assert PMADDWD not in intrinsics(workload, {"UNIT": UNIT_FMA, "PACK": PACK_B})


@pytest.mark.jit
def test_the_int8_b_pack_interleaves_whole_vectors():
    """B's pairs are packed as shuffles of two rows, not element by element (which took
    40% of the kernel's time): the lowered kernel's only scalar extracts are the register
    tile's MR broadcasts of A's pairs."""
    engine = engine_for(HostCPU(AVX2), use_specs=False)
    workload = Matmul(M=64, N=64, K=64, dtype="i8")
    names = op_counts(engine.lower_payload(workload, dot(64, 64, 4)))
    assert names["llvm.shufflevector"] > 0
    assert names["llvm.extractelement"] <= 4


def exact(workload: Matmul) -> np.ndarray:
    """The int64 product of the workload's operands, as stored (transposed where it says)."""
    a, b = (x.astype(np.int64) for x in workload.inputs)
    layout = workload.options["transpose"]
    return (a.T if "a" in layout else a) @ (b.T if "b" in layout else b)


@pytest.mark.jit
@needs_avx2
@pytest.mark.parametrize(
    ("shape", "parameters"),
    [
        ((64, 128, 96), dot(64, 96, 4)),
        ((100, 48, 64), dot(100, 64, 5)),  # M of no power of two: 5-row tiles
        ((96, 96, 2048), dot(96, 1024, 4)),  # several K blocks
        ((512, 64, 64), None),  # the selector's dot path
        ((4, 64, 128), dot(4, 128, 4)),  # skinny, forced onto the dot path
        ((100, 48, 64, "b"), dot(100, 64, 5)),  # B stored [N, K]
        ((256, 64, 96, "b"), None),  # B stored [N, K]: the selector's dot path
        ((128, 96, 64), {"UNIT": UNIT_FMA, "PACK": PACK_B}),  # widened to int32, packed
        ((1000, 999, 1001), None),  # odd and prime sizes: the selector's path
        ((1, 256, 96), None),  # one row
        ((64, 1, 128), None),  # one column
    ],
    ids=[
        "dot",
        "dot-odd-rows",
        "dot-k-blocks",
        "dot-selected",
        "dot-skinny",
        "dot-b-transposed",
        "dot-b-transposed-selected",
        "fma-packed",
        "odd",
        "one-row",
        "one-column",
    ],
)
def test_int8_kernels_are_exact(shape: tuple, parameters: dict[str, int] | None):
    m, n, k, *layout = shape
    workload = Matmul(M=m, N=n, K=k, dtype="i8", transpose=layout[0] if layout else "none")
    result, verified = outputs(workload, parameters)
    assert verified and result.dtype == np.int32
    expected = exact(workload)
    # Inputs span int8's range, so sums pass int16's (a kernel summing in int16 would fail).
    assert np.abs(expected).max() > np.iinfo(np.int16).max
    np.testing.assert_array_equal(result, expected)


@pytest.mark.jit
@needs_avx2
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs 2 cores")
def test_threads_give_the_int8_dot_path_the_same_results():
    workload = Matmul(M=64, N=128, K=64, dtype="i8")
    assert_threads_agree(workload, dot(64, 64, 4))


def test_int8_matmuls_refuse_float_epilogues():
    with pytest.raises(UsageError, match="dtype=i8 takes no bias, relu or mask"):
        Matmul(M=8, N=8, K=8, dtype="i8", relu=True)
