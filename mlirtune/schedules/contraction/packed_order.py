"""Which way the packed nest walks its register tiles: M outer with A read in place
(ORDER=1, PACK=1, the selector's default, packed.py), or N outer with A packed per block
(ORDER=2, PACK=2, BLIS's own order), and the column blocks of the latter.

N outer keeps a B micro-panel (KC x NR) in L1 while A's packed MC x KC block streams from
L2, one MR-element broadcast row per K step. M outer keeps A's MR x KC micro-panel in L1,
read in place, while B's block streams past it. Where A's rows are a multiple of one L1
way's bytes apart, the MR rows of each K step fall into one L1 set and compete for its
ways with B's streamed lines; packed, they are contiguous.
"""

from __future__ import annotations

from mlirtune.interfaces.dtype import element_bytes
from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.schedule import Config
from mlirtune.ir.prefetch import LINE_BYTES
from mlirtune.schedules.contraction.blocking import CacheLevel, b_block_budget, whole_block
from mlirtune.schedules.contraction.knob_values import PACK_AB, PACK_B
from mlirtune.schedules.contraction.packed_tails import column_tail
from mlirtune.targets.host_cpu import HostCPU

# B's block (KC x NC, streamed from L3 by every MC block) in twice L2's bytes: on an AMD Zen 3
# (512 KiB L2, KC=256) NC=1024 ran 4096^3 at 0.90x OpenBLAS against 0.77x for NC=4096,
# whose 64 MiB column panel of C passed L3; at 2048^3 and 512x4096x1024 wider blocks were
# within the noise of it (0.83x and 0.81x against 0.86x and 0.82x).
B_BLOCK_L2S = 2


def walk_n_outer(op: OpInfo, cpu: HostCPU, config: Config) -> Config:
    """`config` (the M-outer packed nest's blocks, A read in place) turned N outer, with A
    packed and column blocks as wide as B's block in B_BLOCK_L2S times L2's bytes allows,
    where:
    - A's rows fall into one L1 set (K's bytes a multiple of an L1 way's), and its MR rows
      take more than half of that set's ways (6 of a Zen 3's 8; a 12-way L1 has ways to
      spare, as the 6 x 64 tiles of AVX-512 hosts found);
    - B's KC x NR micro-panel fits half of L1 in rows of one cache line (AVX2's 16-column
      f32 tiles; AVX-512's 64- and 32-column ones, not measured N outer, are wider);
    - C's column panel (M x NC) passes B's share of L2, so the M-outer nest would read it
      back from L3 every K block anyway;
    - one thread, f32, both operands stored as [M, K] and [K, N], and no epilogue (the
      cases measured).
    Measured on an AMD Zen 3 (32 KiB 8-way L1d, 512 KiB L2; 6 x 16 tiles, KC=256; medians
    of 5-6 rounds against OpenBLAS in one run, M outer -> N outer with NC=1024): 2048^3
    0.70x -> 0.88x (NC=2048: 0.74x -> 0.93x), 4096^3 0.85x -> 0.93x, 1024^3 0.78x ->
    0.96x, 512x1024x1024 0.79x -> 0.90x. Where C's panel stayed in L2 (Llama's
    256x11008x4096, NC=256) N outer lost (0.91x -> 0.61x), as it did under an MLP's bias and
    ReLU (0.89x -> 0.85x) and where A's rows do not share a set (1000x999x1001: 0.93x ->
    0.55x)."""
    l1, l2, _ = CacheLevel.levels(cpu.features)
    size = element_bytes(op.element_type)
    m, n, k = op.dims["M"], op.dims["N"], op.dims["K"]
    kc, nc, nr = config["KC"], config["NC"], config["NR"]
    crowded_set = (k * size) % l1.way_bytes == 0 and config["MR"] > l1.ways // 2
    panel_in_l1 = nr * size <= LINE_BYTES and kc * nr * size <= l1.size_bytes // 2
    c_panel_past_l2 = m * nc * element_bytes(op.dtypes[-1]) > b_block_budget(cpu.features)
    measured = (
        cpu.threads == 1
        and op.element_type == op.dtypes[-1] == "f32"
        and not op.attributes.get("epilogue")
        and not op.attributes.get("transpose_a")
        and not op.attributes.get("transpose_b")
        and config["PACK"] == PACK_B
    )
    if not (measured and crowded_set and panel_in_l1 and c_panel_past_l2):
        return config
    columns = n - column_tail(op, config["MR"], nr, cpu.threads)
    wide = whole_block(columns, B_BLOCK_L2S * l2.size_bytes // (kc * size), nr, least=nc)
    return {**config, "NC": wide or nc, "ORDER": 2, "PACK": PACK_AB, "PREFETCH": 0}
