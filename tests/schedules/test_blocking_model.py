"""The packed path's cache blocking, derived from the host's cache geometry (blocking.py),
checked on overridden geometries: the selector's MC, NC and KC follow the caches, not one
CPU's measurements. Nothing is compiled."""

import dataclasses

import pytest

from mlirtune.interfaces.op import OpInfo
from mlirtune.schedules.contraction.blocking import (
    Blocking,
    blis_blocking,
    shared_blocks,
    whole_block,
    whole_near,
)
from mlirtune.schedules.registry import FAMILIES
from mlirtune.targets.host_cpu import HostCPU

# A Zen 4-like core (32 KiB 8-way L1d, 1 MiB 8-way L2, 32 MiB 16-way L3) and a Sapphire
# Rapids-like one (48 KiB 12-way L1d, 2 MiB 16-way L2, 105 MiB 15-way L3), both AVX-512.
AMD_LIKE = HostCPU(
    isa="avx512",
    l1d_bytes=32 << 10,
    l1d_ways=8,
    l2_bytes=1 << 20,
    l2_ways=8,
    l3_bytes=32 << 20,
    l3_ways=16,
)
INTEL_LIKE = HostCPU(
    isa="avx512",
    l1d_bytes=48 << 10,
    l1d_ways=12,
    l2_bytes=2 << 20,
    l2_ways=16,
    l3_bytes=105 << 20,
    l3_ways=15,
)
INTEL_LIKE_TWO_THREADS = HostCPU(dataclasses.replace(INTEL_LIKE.features, cores=2), threads=2)
F32 = ("f32", "f32", "f32")


def matmul(m: int, n: int, k: int, epilogue: int = 0) -> OpInfo:
    attributes = {"epilogue": epilogue} if epilogue else {}
    return OpInfo("matmul", {"M": m, "N": n, "K": k}, F32, attributes=attributes)


@pytest.mark.parametrize(
    ("cpu", "expected"),
    [
        # KC: an 8 x KC f32 A micro-panel in 4 of 8 ways of 4 KiB -> 512.
        # MC: 8 ways of 128 KiB, less one for a 512 x 32 B micro-panel and one for C ->
        #     6 x 128 KiB / (512 x 4 bytes) = 384.
        # B's block: 4 of the 8 ways -> 512 KiB (NC = 256 columns at KC = 512).
        # K blocks past one: B's 32-column micro-panel streams through floor(7 / (1 + 8/32))
        #     = 5 ways of L1 -> 20 KiB / (32 x 4 bytes) = 160.
        (AMD_LIKE, Blocking(mc=384, kc=512, b_block_bytes=512 << 10, kc_streamed=160)),
        # KC: 6 of 12 ways of 4 KiB -> 768. MC: 16 ways of 128 KiB less one for the
        # 96 KiB micro-panel and one for C -> 14 x 128 KiB / 3 KiB = 597, in rows of 8 ->
        # 592. B's block: 8 of the 16 ways -> 1 MiB (NC = 320 columns at KC = 768).
        # K blocks past one: floor(11 / (1 + 8/32)) = 8 ways -> 32 KiB / 128 bytes = 256.
        (INTEL_LIKE, Blocking(mc=592, kc=768, b_block_bytes=1 << 20, kc_streamed=256)),
    ],
    ids=["amd-like", "intel-like"],
)
def test_blocks_follow_the_cache_geometry(cpu, expected):
    assert blis_blocking(cpu.features, mr=8, nr=32, element_bytes=4) == expected


def test_wider_elements_take_shorter_blocks():
    f32 = blis_blocking(AMD_LIKE.features, mr=8, nr=16, element_bytes=4)
    f64 = blis_blocking(AMD_LIKE.features, mr=8, nr=16, element_bytes=8)
    assert f64.kc == f32.kc // 2


@pytest.mark.parametrize(
    ("cpu", "op", "blocks"),
    [
        # The packed micro-kernel's tile: 4 x 64 on the 8-way L1, whose sets have no ways
        # to spare beside 8 rows of A, 8 x 32 on the 12-way one. B's rows are several cache
        # lines, prefetched ahead, so K passes in streamed blocks: those that keep A's
        # panel in L1 while B's micro-panels stream through floor(7 / (1 + 4/64)) = 6 of 8
        # ways (96 rows of 256 bytes) or floor(11 / (1 + 8/32)) = 8 of 12 (256 rows of
        # 128 bytes), up to twice that with the prefetches, the shortest whole block from
        # the bound up where B's block then spans more columns: 128 (the only whole block
        # from 96 to 192) or 256 (not 512). B's block in half of L2 then spans
        # 512 KiB / 512 bytes = 1024 or 1 MiB / 1 KiB = 1024 columns.
        (AMD_LIKE, matmul(2048, 2048, 2048), (128, 1024, 128, 1)),
        (INTEL_LIKE, matmul(2048, 2048, 2048), (512, 1024, 256, 1)),
        # K = 11008 = 2^8 x 43: the KC knob's block in 256's octave is 344, past the AMD
        # bound (128 there), within the Intel one.
        (AMD_LIKE, matmul(256, 4096, 11008), (128, 1024, 128, 1)),
        (INTEL_LIKE, matmul(256, 4096, 11008), (256, 512, 344, 1)),
        # N = 11008 has no whole block within 512 over a quarter of it, but 256: with K in
        # short blocks already, B's block narrows rather than K's; and K's blocks of 256
        # would leave it at 256 columns, so they stay at 512.
        (INTEL_LIKE, matmul(256, 11008, 4096), (256, 256, 512, 1)),
        # K = 1024 passes twice the streamed bound too.
        (INTEL_LIKE, matmul(1024, 1024, 1024), (512, 1024, 256, 1)),
        # On two threads each takes 512 of its columns, which blocks of 256 would not widen.
        (INTEL_LIKE_TWO_THREADS, matmul(1024, 1024, 1024), (512, 512, 512, 1)),
        (INTEL_LIKE_TWO_THREADS, matmul(2048, 2048, 2048), (512, 1024, 256, 1)),
        # ... but under an epilogue (an MLP's bias and ReLU) it is one block, which applies
        # the epilogue in registers: B's 1 MiB block then spans 1 MiB / 4 KiB = 256
        # columns. Not where K spans more than two of the longest blocks (AMD's of 128
        # rows; Intel's of 512 at K = 2048).
        (INTEL_LIKE, matmul(512, 4096, 1024, epilogue=1), (512, 256, 1024, 1)),
        (AMD_LIKE, matmul(512, 4096, 1024, epilogue=1), (128, 1024, 128, 1)),
        (INTEL_LIKE, matmul(1024, 4096, 2048, epilogue=1), (512, 1024, 256, 1)),
        # 999 columns leave a 39-column tail past 64-wide tiles, which LLVM splits into odd
        # pieces: the 8 x 32 tile. 1000 rows in whole blocks of 200; the 992 columns of
        # whole register tiles (the packed nest splits off the other 7) have no whole block
        # of 128 or more within B's L2 bytes, so they are one block, and K's blocks are
        # shortened to keep it there: even ones of at most 512 KiB / (992 x 4 bytes) = 132
        # or 1 MiB / (992 x 4 bytes) = 264 rows, the remainder in the first.
        (AMD_LIKE, matmul(1000, 999, 1001), (200, 992, 126, 1)),
        (INTEL_LIKE, matmul(1000, 999, 1001), (200, 992, 251, 1)),
        # KernelBench's irregular shape: neither 4 nor 8 rows divide 8205 = 3 x 5 x 547, so
        # the tile is 5 x 64 (a 33-column tail, 0.6% of N), and A, read in place, takes
        # one row block spanning M; K = 2949 = 3 x 983.
        (AMD_LIKE, matmul(8205, 5921, 2949), (8205, 128, 738, 1)),
        (INTEL_LIKE, matmul(8205, 5921, 2949), (8205, 256, 983, 1)),
    ],
    ids=[
        "amd-2048",
        "intel-2048",
        "amd-llama",
        "intel-llama",
        "intel-llama-wide",
        "intel-1024",
        "intel-1024-two-threads",
        "intel-2048-two-threads",
        "intel-mlp",
        "amd-mlp",
        "intel-mlp-deep",
        "amd-odd",
        "intel-odd",
        "amd-irregular",
        "intel-irregular",
    ],
)
def test_the_selector_takes_the_largest_whole_blocks_within_the_bounds(cpu, op, blocks):
    config = FAMILIES["contraction"].select(op, cpu)
    assert (config["MC"], config["NC"], config["KC"], config["PACK"]) == blocks
    assert not FAMILIES["contraction"].violations(op, cpu, {**config, "KU": 1, "ORDER": 1})


def test_taller_tiles_where_l1_has_ways_beside_a_micro_panel_step():
    """8 x 32 halves B's L2 bytes per FMA of 4 x 64, and 6 x 64 (24 accumulators) takes a
    third fewer where 6 divides M; A's rows of a K step, which share a set at K = 2048,
    leave ways for B's lines in a 12-way L1 but not in an 8-way one."""
    tiles = {
        (name, m): FAMILIES["contraction"].select(matmul(m, 2048, 2048), cpu)
        for name, cpu in (("amd", AMD_LIKE), ("intel", INTEL_LIKE))
        for m in (2048, 384, 4099)
    }
    # A prime M: the preferred tile with a short row tail (3 rows past 4 x 64, 7 past
    # 6 x 64), not a taller one that fills the register file (14 x 32 ran at 0.62x).
    assert {key: (c["MR"], c["NR"]) for key, c in tiles.items()} == {
        ("amd", 2048): (4, 64),
        ("amd", 384): (4, 64),
        ("amd", 4099): (4, 64),
        ("intel", 2048): (8, 32),
        ("intel", 384): (6, 64),
        ("intel", 4099): (6, 64),
    }


def test_rows_that_divide_m_fill_the_register_file_where_4_and_8_do_not():
    for cpu in (AMD_LIKE, INTEL_LIKE):
        config = FAMILIES["contraction"].select(matmul(8205, 5921, 2949), cpu)
        assert (config["MR"], config["NR"]) == (5, 64)
        config = FAMILIES["contraction"].select(matmul(1029, 5921, 2949), cpu)
        assert (config["MR"], config["NR"]) == (7, 32)  # 7 x 2 vectors: 14 accumulators


@pytest.mark.parametrize("cpu", [AMD_LIKE, INTEL_LIKE], ids=["amd", "intel"])
def test_tiles_prefetching_b_ahead_keep_registers_for_their_broadcasts(cpu):
    """13 and 14 rows divide these M, but 26 or 28 accumulators of two vectors each spill
    beside their broadcasts where B's rows are prefetched ahead: at most 24 (11 x 2, 7 x 2)."""
    family = FAMILIES["contraction"]
    for m, rows in ((1001, 11), (1022, 7), (2002, 11)):
        config = family.select(matmul(m, 4096, 1024), cpu)
        assert (config["MR"], config["NR"], config["PREFETCH"]) == (rows, 32, 2)
        assert not family.violations(matmul(m, 4096, 1024), cpu, {**config, "KU": 1, "ORDER": 1})
    spilling = {**config, "MR": 13, "MC": 1001, "KU": 1, "ORDER": 1}
    broken = family.violations(matmul(1001, 4096, 1024), cpu, spilling)
    assert broken == ["prefetch_ahead_fits"]
    assert not family.violations(matmul(1001, 4096, 1024), cpu, {**spilling, "PREFETCH": 0})


# A Zen 3-like core: AVX2 (16 registers of 8 f32 lanes), 32 KiB 8-way L1d, 512 KiB 8-way L2.
ZEN3_LIKE = HostCPU(
    isa="avx2",
    l1d_bytes=32 << 10,
    l1d_ways=8,
    l2_bytes=512 << 10,
    l2_ways=8,
    l3_bytes=32 << 20,
    l3_ways=16,
)


@pytest.mark.parametrize(
    ("op", "tile", "blocks"),
    [
        # Neither 4 x 32 nor 8 x 16 fits beside a row of B: the tile that fills the 16
        # registers is 6 x 16 (12 accumulators + 2 vectors of B + the broadcast = 15), past
        # the 8 FMAs in flight. 2048 = 6 x 341 + 2: the 2-row tail is split off, re-reading
        # B for 4 x 2 x 8 / (8 x 2048) = 0.4% of the FMA cycles. MC: 2046 = 6 x 11 x 31
        # rows in blocks within the bound (192) -> 186. K = 2048 streams: blocks that keep
        # A's panel in L1 while B's 16-column micro-panels stream through floor(7 / (1 +
        # 6/16)) = 5 ways (320 rows) -> 256. A's rows, 8 KiB apart, fall into one L1 set:
        # the nest walks N outer with A packed (packed_order.py), and B's block spans
        # 2 x 512 KiB / 1 KiB = 1024 columns.
        (matmul(2048, 2048, 2048), (6, 16), (186, 1024, 256, 2)),
        (matmul(1536, 2048, 2048), (6, 16), (192, 1024, 256, 2)),
        # M = 256: its 4-row tail would re-read B for 4 x 2 x 8 / (8 x 256) = 3.1% of the
        # FMA cycles, past TAIL_REREAD_SHARE (2%): 4 x 16, which divides M.
        (matmul(256, 11008, 4096), (4, 16), (128, 256, 256, 1)),
    ],
    ids=["2048", "rows-of-6", "short-m"],
)
def test_avx2_takes_the_tile_that_fills_its_registers(op, tile, blocks):
    config = FAMILIES["contraction"].select(op, ZEN3_LIKE)
    assert (config["MR"], config["NR"]) == tile
    assert (config["MC"], config["NC"], config["KC"], config["PACK"]) == blocks
    assert not FAMILIES["contraction"].violations(op, ZEN3_LIKE, {**config, "KU": 1})


def test_whole_blocks_divide_the_loop_or_are_not_taken():
    assert whole_block(2048, 384, 8) == 256
    assert whole_block(11008, 512, 1) == 344
    assert whole_block(1000, 1536, 8) == 1000  # the whole loop fits
    assert whole_block(1000, 592, 8) == 200  # a third of the bound
    assert whole_block(1001, 768, 1) is None  # 143 is under a quarter of it
    assert whole_block(999, 14336, 32) is None  # no whole panels of 32
    assert whole_block(1009, 512, 1) is None  # prime: only 1 divides it below the bound


def test_whole_blocks_near_a_partial_one_for_threads_to_share():
    """Partial blocks are peeled, which keeps the loop on one thread: a whole block near
    the partial one, above it first, below it next, or the whole loop."""
    assert whole_near(1000, 16, 8) == 40  # 1000 = 25 x 40
    assert whole_near(1001, 14, 7) == 7  # 77 is past four times 14
    assert whole_near(300, 128, 32) == 300  # no multiple of 32 divides it
    assert whole_near(4099, 64, 8) is None  # prime
    op = OpInfo("matmul", {"M": 1000, "N": 300, "K": 2048}, F32)
    assert shared_blocks(op, 1, 16, 300, 8, 32) == (16, 300)  # one thread: as chosen
    two = shared_blocks(op, 2, 16, 300, 8, 32)
    assert 1000 % two[0] == 0 and 300 % two[1] == 0, two
    threaded = HostCPU(isa="avx512", l1d_bytes=48 << 10, l1d_ways=12, l2_bytes=2 << 20, threads=2)
    config = FAMILIES["contraction"].select(op, threaded)
    assert 1000 % config["MC"] == 0 and 300 % config["NC"] == 0, config


def test_packed_blocks_past_the_caches_break_named_constraints():
    op = matmul(2048, 2048, 2048)
    family = FAMILIES["contraction"]
    config = {"MC": 128, "NC": 256, "KC": 1024, "MR": 4, "NR": 64, "KU": 1, "ORDER": 1, "UNIT": 0}
    # B's block: 1 MiB, past half of the AMD-like 1 MiB L2 but within the Intel-like one's.
    assert "packed_b_block_in_l2" in family.violations(op, AMD_LIKE, {**config, "PACK": 1})
    assert "packed_b_block_in_l2" not in family.violations(op, INTEL_LIKE, {**config, "PACK": 1})
    assert "packed_b_block_in_l2" not in family.violations(op, AMD_LIKE, {**config, "PACK": 0})


def test_the_n_outer_packed_nest_keeps_b_in_l3_and_a_in_l2():
    op = matmul(2048, 2048, 2048)
    family = FAMILIES["contraction"]
    config = {"MC": 128, "NC": 1024, "KC": 256, "MR": 4, "NR": 16, "KU": 1, "UNIT": 0}
    # B's block: 1 MiB, past the Zen 3-like 512 KiB L2; A's block (128 KiB) within it.
    n_outer = {**config, "PACK": 2, "ORDER": 2, "PREFETCH": 0}
    assert "packed_b_block_in_l2" in family.violations(op, ZEN3_LIKE, {**n_outer, "ORDER": 1})
    assert family.violations(op, ZEN3_LIKE, n_outer) == []
    assert "paired_a_block_in_l2" in family.violations(op, ZEN3_LIKE, {**n_outer, "MC": 1024})
    # B's block of 32 MiB: all 16 ways of the 32 MiB L3, where C keeps one.
    wide = {**n_outer, "NC": 8192, "KC": 1024}
    assert "paired_b_block_in_l3" in family.violations(matmul(8192, 8192, 8192), ZEN3_LIKE, wide)


@pytest.mark.parametrize("cpu", [AMD_LIKE, INTEL_LIKE], ids=["amd", "intel"])
def test_rows_of_a_read_in_place_stay_within_the_l1_ways_where_they_alias(cpu):
    """A's rows K*4 bytes apart: a multiple of one L1 way's bytes puts every row of a
    micro-panel step in one set, so MR is capped at the ways; other K keep the full tile."""
    aliasing = FAMILIES["contraction"].select(matmul(512, 49, 2048), cpu)
    assert aliasing["PACK"] == 0 and aliasing["MR"] <= cpu.features.l1d_ways
    apart = FAMILIES["contraction"].select(matmul(512, 49, 2000), cpu)
    assert apart["MR"] > cpu.features.l1d_ways or apart["MR"] == 512


@pytest.mark.parametrize("cpu", [AMD_LIKE, INTEL_LIKE], ids=["amd", "intel"])
def test_an_a_stored_k_by_m_is_packed(cpu):
    """Read in place, A [K, M]'s MR values of a K step lie a row apart: it is packed."""
    plain = matmul(1024, 2048, 4096)
    transposed = OpInfo("matmul", plain.dims, F32, attributes={"transpose_a": 1})
    config = FAMILIES["contraction"].select(transposed, cpu)
    assert config["PACK"] == 2
    assert FAMILIES["contraction"].select(plain, cpu)["PACK"] == 1
    assert not FAMILIES["contraction"].violations(transposed, cpu, {**config, "KU": 1, "ORDER": 1})


@pytest.mark.parametrize(
    ("transpose", "dims", "pack"),
    [
        ("transpose_b", (128, 256, 1024), 1),  # a Linear layer's weight: always packed
        ("transpose_a", (512, 512, 512), 2),  # A past L1: packed
        ("transpose_a", (64, 64, 64), 0),  # A in L1: read in place
    ],
)
def test_the_selector_packs_transposed_operands_within_its_own_constraints(transpose, dims, pack):
    """The selector's choice for a transposed operand is a point of the search space: the
    PACK constraint allows what the selector picks (it did not for transposed B, so the
    tuner could not search the packed path for Linear layers)."""
    op = OpInfo("matmul", dict(zip("MNK", dims, strict=True)), F32, attributes={transpose: 1})
    config = FAMILIES["contraction"].select(op, INTEL_LIKE)
    assert config["PACK"] == pack
    assert not FAMILIES["contraction"].violations(op, INTEL_LIKE, {**config, "KU": 1, "ORDER": 1})


def test_unpacked_tiles_take_24_accumulators_where_l1_has_ways_to_spare():
    """Cache-resident f32 shapes on the 12-way L1: 12 rows of two vectors, or 6 of four
    where K puts A's rows a multiple of a way apart (12 rows would fill the set); the
    8-way L1 keeps 8 x 32, as do M under four tiles and other types."""
    select = FAMILIES["contraction"].select

    def tile(cpu, op):
        config = select(op, cpu)
        assert config["PACK"] == 0
        return config["MR"], config["NR"]

    assert tile(INTEL_LIKE, matmul(256, 256, 256)) == (12, 32)
    assert tile(INTEL_LIKE, matmul(128, 512, 2048)) == (6, 64)
    assert tile(AMD_LIKE, matmul(256, 256, 256)) == (8, 32)
    assert tile(INTEL_LIKE, matmul(32, 256, 256)) == (8, 32)
    f64 = OpInfo("matmul", {"M": 256, "N": 256, "K": 256}, ("f64",) * 3)
    assert select(f64, INTEL_LIKE)["MR"] != 12


def test_a_matmul_whose_output_leaves_l2_is_packed_even_where_b_stays():
    """256x1024x256 on the Intel-like core: B (1 MiB) stays within half of L2, but the
    1 MiB output with K blocks of A and B does not fit beside it, so the unpacked nest
    would block it in place: the packed nest takes it instead. 512^3 keeps its output
    (1 MiB) and K blocks (1 MiB) in the 2 MiB L2, unpacked."""
    select = FAMILIES["contraction"].select
    config = select(matmul(256, 1024, 256), INTEL_LIKE)
    assert (config["MC"], config["NC"], config["KC"], config["PACK"]) == (256, 1024, 256, 1)
    assert select(matmul(512, 512, 512), INTEL_LIKE)["PACK"] == 0
