"""Where the packed f32 nest walks N outer with A packed (packed_order.py): A's MR rows
crowding one L1 set, B's micro-panel in half of L1, C's column panel past B's share of L2.
Checked for each CPU class through overridden features; nothing is compiled."""

from __future__ import annotations

import dataclasses

import pytest

from mlirtune.interfaces.op import OpInfo
from mlirtune.schedules.registry import FAMILIES
from mlirtune.targets.host_cpu import HostCPU
from tests.cpu_classes import AMX, AVX2, AVX512, AVX512_BF16

CONTRACTION = FAMILIES["contraction"]
XEON_AVX2 = dataclasses.replace(AVX2, l1d_bytes=48 << 10, l1d_ways=12, l2_bytes=2 << 20, l2_ways=16)


def matmul(m: int, n: int, k: int, **attributes: object) -> OpInfo:
    return OpInfo("matmul", {"M": m, "N": n, "K": k}, ("f32",) * 3, "linalg.matmul", attributes)


def order(config: dict) -> tuple[int, int, int]:
    return config["ORDER"], config["PACK"], config["PREFETCH"]


@pytest.mark.parametrize(("shape", "nc"), [((2048, 2048, 2048), 1024), ((512, 4096, 1024), 1024)])
def test_avx2_walks_n_outer_with_a_packed(shape, nc):
    """K of 1024 or 2048 f32 puts A's rows 4 or 8 KiB apart: one set of a 4 KiB-way L1. B's
    256 x 16 micro-panel is 16 KiB, half of the 32 KiB L1; C's panel of 256 columns passes
    the 256 KiB of L2 that B's block takes. Columns: B's 256-row block in twice the 512 KiB
    of L2 spans 1024 of them."""
    cpu, op = HostCPU(AVX2), matmul(*shape)
    config = CONTRACTION.select(op, cpu)
    assert order(config) == (2, 2, 0)
    assert (config["KC"], config["NC"], config["MR"], config["NR"]) == (256, nc, 6, 16)
    assert not CONTRACTION.violations(op, cpu, {**config, "KU": 1})


@pytest.mark.parametrize(
    ("cpu_class", "op"),
    [
        # C's panel (256 rows x 256 columns, 256 KiB) stays in L2 between K blocks.
        (AVX2, matmul(256, 11008, 4096)),
        # Rows 4004 bytes apart spread over L1's sets.
        (AVX2, matmul(1000, 999, 1001)),
        # B stored [N, K] (a Linear layer's weight): not measured N outer.
        (AVX2, matmul(2048, 2048, 2048, transpose_b=True)),
        # Under a bias and ReLU (measured slower).
        (AVX2, matmul(512, 4096, 1024, epilogue=("add", "relu"))),
        # A 12-way L1 (an Intel Xeon restricted to AVX2) has ways to spare beside 6 rows.
        (XEON_AVX2, matmul(2048, 2048, 2048)),
        # AVX-512's micro-panels (64 or 32 columns x KC) take more than half of L1.
        (AVX512, matmul(2048, 2048, 2048)),
        (AVX512_BF16, matmul(2048, 2048, 2048)),
        (AMX, matmul(2048, 2048, 2048)),
    ],
)
def test_m_outer_stays_elsewhere(cpu_class, op):
    assert order(CONTRACTION.select(op, HostCPU(cpu_class)))[:2] == (1, 1)


def test_fixed_packing_keeps_the_m_outer_nest():
    """--param PACK=1 (or a PREFETCH) names the M-outer nest: its blocks come back whole."""
    cpu, op = HostCPU(AVX2), matmul(2048, 2048, 2048)
    config = CONTRACTION.select(op, cpu, {"PACK": 1})
    assert order(config) == (1, 1, 2) and config["NC"] == 256
    assert order(CONTRACTION.select(op, cpu, {"ORDER": 2})) == (2, 2, 0)
