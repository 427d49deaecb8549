"""The packed micro-kernel's register tile, derived from the host's facts (register_tiles.py):
the register file, the FMAs the core keeps in flight, the caches. Checked for each CPU class
through overridden features, whatever CPU runs the tests. Nothing is compiled."""

from __future__ import annotations

import dataclasses

import pytest

from mlirtune.interfaces.op import OpInfo
from mlirtune.schedules.contraction.knob_values import UNIT_AMX
from mlirtune.schedules.contraction.register_tiles import (
    feeds_the_pipes,
    filling_tiles,
    fullest_register_tile,
    register_file_holds,
)
from mlirtune.schedules.registry import FAMILIES
from mlirtune.targets.host_cpu import HostCPU
from tests.cpu_classes import AMX, AVX2, AVX512, AVX512_BF16

CONTRACTION = FAMILIES["contraction"]


def matmul(m: int, n: int, k: int, dtype: str = "f32") -> OpInfo:
    out = "f32" if dtype in ("bf16", "f16") else dtype
    return OpInfo("matmul", {"M": m, "N": n, "K": k}, (dtype, dtype, out), "linalg.matmul")


def with_in_flight(features, in_flight: int) -> HostCPU:
    return HostCPU(dataclasses.replace(features, fma_in_flight=in_flight))


def test_avx2_fills_sixteen_registers_with_twelve_accumulators():
    """6 rows of two 8-lane vectors: 12 accumulators + 2 of B + 1 broadcast = 15 registers;
    7 rows would take 17. 4 x 4 vectors would take 21. Of the tiles with at least the 8
    FMAs in flight, the most accumulators come first; of as many, more rows."""
    cpu, op = HostCPU(AVX2), matmul(2048, 2048, 2048)
    assert register_file_holds(op, cpu, 6, 16) and not register_file_holds(op, cpu, 7, 16)
    assert not register_file_holds(op, cpu, 4, 32)
    assert filling_tiles(op, cpu) == [(6, 16), (5, 16), (4, 16), (2, 32)]
    assert fullest_register_tile(op, cpu) == (6, 16)


def test_more_fmas_in_flight_raise_the_accumulator_floor():
    """10 in flight leave AVX2 6 x 16 and 5 x 16; 12 only 6 x 16, which the selector takes
    within the family's constraints."""
    op = matmul(2048, 2048, 2048)
    assert filling_tiles(op, with_in_flight(AVX2, 10)) == [(6, 16), (5, 16)]
    assert filling_tiles(op, with_in_flight(AVX2, 12)) == [(6, 16)]
    config = {**CONTRACTION.select(op, with_in_flight(AVX2, 12)), "KU": 1}
    assert (config["MR"], config["NR"]) == (6, 16)
    assert not CONTRACTION.violations(op, with_in_flight(AVX2, 12), config)
    assert "min_accumulators" in CONTRACTION.violations(
        op, with_in_flight(AVX2, 12), {**config, "MR": 5, "MC": 185}
    )


def test_the_floor_is_a_named_constraint():
    """Four accumulators (4 x 8) cover fewer FMAs than the 8 in flight."""
    op, cpu = matmul(1024, 1024, 1024), HostCPU(AVX2)
    config = {**CONTRACTION.select(op, cpu), "KU": 1, "ORDER": 1}
    assert "min_accumulators" in CONTRACTION.violations(op, cpu, {**config, "MR": 4, "NR": 8})
    loose = with_in_flight(AVX2, 4)
    assert "min_accumulators" not in CONTRACTION.violations(op, loose, {**config, "MR": 4, "NR": 8})


def test_avx512_keeps_its_measured_tile_preference():
    """32 registers hold tile_preference's 16- and 24-accumulator tiles: the fullest-tile
    rule stands aside, and 2048^3 takes 4 x 64 on an 8-way L1 and 8 x 32 on a 12-way one."""
    op = matmul(2048, 2048, 2048)
    assert fullest_register_tile(op, HostCPU(AVX512)) is None
    picks = {name: CONTRACTION.select(op, HostCPU(f)) for name, f in (("8", AVX512), ("12", AMX))}
    assert {name: (c["MR"], c["NR"]) for name, c in picks.items()} == {"8": (4, 64), "12": (8, 32)}


def test_amx_takes_bf16_products_and_the_fma_tile_for_f32():
    cpu = HostCPU(AMX)
    assert CONTRACTION.select(matmul(2048, 2048, 2048, "bf16"), cpu)["UNIT"] == UNIT_AMX
    assert CONTRACTION.select(matmul(2048, 2048, 2048), cpu)["UNIT"] == 0


def test_one_row_tiles_are_bound_by_their_loads():
    """A K step of r x v loads v vectors of B and r broadcasts for r * v FMAs: 1 x 4 issues
    5 loads for 4 FMAs, 2 x 4 6 for 8, 2 x 2 4 for 4 (two load ports, two FMA pipes)."""
    assert not any(feeds_the_pipes(1, v) for v in (1, 2, 4))
    assert feeds_the_pipes(2, 4) and feeds_the_pipes(2, 2)
    four_in_flight = with_in_flight(AVX512_BF16, 4)  # 1 x 4 vectors meets that floor
    assert all(rows > 1 for rows, _ in filling_tiles(matmul(197, 192, 768), four_in_flight))


def test_a_prime_m_takes_a_full_tile_and_a_row_tail_where_four_fmas_are_in_flight():
    """ViT's 197 x 192 x 768 with B stored [N, K], on a core that keeps four FMAs in flight
    (an AMD Zen 4's 512-bit FMAs): 1 x 64 meets that floor and divides 197, but is bound by
    its loads; 5 x 64 leaves a 2-row tail, split off."""
    op = OpInfo(
        "matmul",
        {"M": 197, "N": 192, "K": 768},
        ("f32",) * 3,
        "linalg.matmul",
        {"transpose_b": True},
    )
    config = CONTRACTION.select(op, with_in_flight(AVX512_BF16, 4))
    assert (config["MR"], config["NR"], config["MC"], config["PACK"]) == (5, 64, 195, 1)
    assert not CONTRACTION.violations(op, with_in_flight(AVX512_BF16, 4), {**config, "KU": 1})


def test_k_in_one_block_is_split_for_a_row_tail():
    """1024 = 6 x 170 + 4: the tail is split off K blocks only, so K (one block at 4 x 16)
    is taken in two."""
    cpu = HostCPU(AVX2, l1d_bytes=48 << 10, l1d_ways=12, l2_bytes=2 << 20, l2_ways=16)
    config = CONTRACTION.select(matmul(1024, 1024, 1024), cpu)
    assert (config["MR"], config["NR"], config["KC"]) == (6, 16, 512)


@pytest.mark.parametrize("narrow", ["bf16", "f16"])
@pytest.mark.parametrize("features", [AVX2, AVX512], ids=["avx2", "avx512"])
def test_half_precision_widened_for_fma_takes_the_f32_blocks(features, narrow):
    """Widened before the nest (widen.py), bf16 and f16 operands are f32 in its blocks:
    sized for 2 bytes, B's block held twice its bytes. Those of the M-outer nest, which a
    fixed PACK names: N outer is taken for f32 operands only (packed_order.py)."""
    cpu = HostCPU(features)
    keys = ("MC", "NC", "KC", "MR", "NR", "PACK", "PREFETCH", "ORDER")
    f32 = CONTRACTION.select(matmul(2048, 2048, 2048), cpu, {"PACK": 1})
    half = CONTRACTION.select(matmul(2048, 2048, 2048, narrow), cpu)
    assert half["UNIT"] == 0
    assert {k: half[k] for k in keys} == {k: f32[k] for k in keys}


@pytest.mark.parametrize("features", [AVX2, AVX512], ids=["avx2", "avx512"])
def test_fixed_register_tiles_get_blocks_of_whole_tiles(features):
    """A caller's MR and NR (--param MR=8 NR=32) are not the selector's (6 x 16 on AVX2):
    the blocks it selects around them hold whole tiles, the packed path's requirement."""
    cpu, op = HostCPU(features), matmul(512, 512, 512)
    for mr, nr in ((8, 32), (4, 16), (5, 16)):
        chosen = CONTRACTION.select(op, cpu, {"MR": mr, "NR": nr})
        assert chosen["MC"] % mr == 0 and chosen["NC"] % nr == 0, (mr, nr, chosen)
