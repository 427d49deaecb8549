"""The contraction family's packed path on the host CPU: when packing pays, its cache
blocks and its prefetches. The schedule is packed.py's, the blocking model blocking.py's and
the register tile register_tiles.py's.
"""

from __future__ import annotations

from dataclasses import dataclass

import z3

from mlirtune.interfaces.dtype import element_bytes
from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.schedule import Config, Constraint, KnobVariables
from mlirtune.ir.prefetch import LINE_BYTES
from mlirtune.schedules.contraction.blocking import (
    MIN_PANEL_COLUMNS,
    Blocking,
    blis_blocking,
    padded_block,
    whole_block,
)
from mlirtune.schedules.contraction.knob_values import PACK_AB, PACK_B
from mlirtune.schedules.contraction.packed_tails import column_tail, row_tail
from mlirtune.schedules.contraction.register_tiles import (
    ahead_accumulators,
    prefetches_rows_ahead,
    wide_register_tile,
)
from mlirtune.schedules.cpu_model import PAGE_BYTES, fit, register_tile, vectors
from mlirtune.schedules.knobs import cache_tiles
from mlirtune.targets.host_cpu import HostCPU

# The KC knob's cache-sized K blocks: one per power-of-two octave from 64, whole 8-row
# blocks where K has them.
K_CACHE_TILES = cache_tiles("K", floor=64, granule=8)


def packed_blocks(
    op: OpInfo, cpu: HostCPU, mr: int, nr: int, *, split_k_for_tail: bool = False
) -> Config | None:
    """Goto/BLIS blocks for operands past L2: the largest whole blocks within the analytical
    model's bounds (blocking.py), B packed. The packed nest splits off N's columns past the
    last whole register tile (`column_tail`) and takes K's remainder in its first K block,
    so NC need only divide the other columns and KC need not divide K. NC is at least
    MIN_PANEL_COLUMNS wide. An A stored [K, M] is always packed: read in place, each K
    step's MR values lie a row of A apart. Only then does a shape with no whole M or N
    blocks take this path, in even blocks whose last one is padded: with A read in place
    (PACK=1), A's partial panels are padded per register tile, unvectorized (measured 0.16x
    numpy at 1000x999x1001 against 0.97x unpacked), so otherwise None. A row tail is split
    off K blocks only (`row_tail`): with `split_k_for_tail`, K that fits one block is taken
    in two where M has one (AVX2's 6 x 16 tiles, `fullest_register_tile`, on an Intel Xeon
    restricted to AVX2: 1024^3 KC=1024 4 x 16 -> KC=512 6 x 16 +3.3%, 8 rounds)."""
    m, n, k = op.dims["M"], op.dims["N"], op.dims["K"]
    size = element_bytes(op.element_type)
    bounds = blis_blocking(cpu.features, mr, nr, size)
    pack_a = bool(op.attributes.get("transpose_a"))
    rows = m - row_tail(op, mr, nr, 0)
    # A read in place (PACK=1) packs nothing per row block: with no whole block of M
    # within the bound, one spanning M.
    mc = whole_block(rows, bounds.mc, mr) or (rows if rows % mr == 0 and not pack_a else None)
    ahead = not pack_a and prefetches_rows_ahead(op, nr)
    kc, longest, streamed = _k_blocks(op, bounds, ahead)
    if split_k_for_tail and rows < m and kc >= k:
        kc = longest = _k_block(op, -(-k // 2))
    columns = _ColumnBlocks(
        n - column_tail(op, mr, nr, cpu.threads), cpu.threads, nr, size, bounds, streamed
    )
    nc = None if pack_a else columns.block(kc)
    if ahead and streamed and nc is not None:
        # The shortest whole K block from the bound up, where B's block then spans more
        # columns in the same bytes: with 8 x 32 f32 tiles on a 48 KiB 12-way L1 (bound
        # 256 rows), KC=256 NC=1024 against KC=512 NC=512, ratios to OpenBLAS in three
        # rotating runs on an Intel Xeon: 1024^3 +1.7%, +3.4%, +1.4%, 2048^3 +3.9%, +0.3%,
        # +0.9%, 512x4096x1024 +4.5%, +0.9%, +1.2%, 4096^3 +1.4%, +0.9%, 512x1024x1024
        # +0.5%, +0.6%. Not where it narrows only K (two threads, 1024^3: KC=256 NC=512
        # -1.9%).
        shorter = _shortest_block_from(op, bounds.kc_streamed, longest)
        wider = columns.block(shorter)
        if wider is not None and wider > nc:
            kc, nc = shorter, wider
    if nc is None or nc < min(columns.per_thread, MIN_PANEL_COLUMNS):
        # A thread's columns in one block, K blocks short enough to keep B's block in L2:
        # where no whole block of B fits at this KC (1000x999x1001 f32, NC=992 on an Intel
        # Xeon: KC=143 0.98x OpenBLAS, KC=501 0.81x, KC=1001 0.64x), and for an A stored
        # [K, M], which is packed once per column block (1024x2048x4096: NC=2048 and
        # KC=128 120 ms, NC=256 and KC=1024 142-166 ms, numpy 111 ms).
        nc = whole_block(columns.count, columns.per_thread, nr, cpu.threads)
        if nc is not None:
            kc = longest = _k_block(op, min(bounds.kc, max(1, bounds.b_block_bytes // (nc * size))))
    tail = row_tail(op, mr, nr, kc)
    if (None in (mc, nc) and not pack_a) or (rows < m and not tail):
        return None  # no whole blocks; or a row tail, but K is one block
    if nc is not None and rows == m and kc < k <= 2 * longest and op.attributes.get("epilogue"):
        blocks = (kc, nc, longest)
        kc, nc = _one_k_block(op, cpu, blocks, columns.count, columns.per_thread, nr, bounds)
    return {
        "MC": mc or padded_block(m, bounds.mc, mr),
        "NC": nc or padded_block(columns.count, columns.bound(kc), nr),
        "KC": kc,
        "MR": mr,
        "NR": nr,
        "PACK": PACK_AB if pack_a else PACK_B,
        "PREFETCH": 0 if pack_a else prefetch_level(op, nr),
    }


def _k_blocks(op: OpInfo, bounds: Blocking, ahead: bool) -> tuple[int, int, bool]:
    """(KC, the longest K block, whether K streams in blocks). K in one block where A's
    micro-panel takes half of L1 at most, else in blocks that keep it in L1 while B's
    micro-panels stream (blocking.py), where K has whole 8-row blocks (the knob offers a K
    of none in at most EVEN_K_BLOCKS even ones). Where B's panel rows are prefetched ahead
    into L1 (`ahead`: wide rows, `prefetch_level`), streamed blocks of up to twice that
    bound won at every K they split: the tuner's best on an Intel Xeon was KC=256 from
    1024^3 to 4096^3, where the bound is 160 rows (4 x 64 f32; ratios to OpenBLAS in one
    rotating run, one block -> blocks of 256: 1024^3 1.02x -> 1.08x, 512x1024x1024 1.01x ->
    1.07x, 512x4096x1024 MLP 1.09x -> 1.13x; 4096^3 in blocks of 128 0.91x, of 256 0.98x,
    C being read back half as often)."""
    k = op.dims["K"]
    streamed_bound = bounds.kc_streamed * (2 if ahead else 1)
    streamed = k % 8 == 0 and k > (streamed_bound if ahead else bounds.kc)
    kc = _k_block(op, streamed_bound if streamed else bounds.kc)
    return kc, kc, streamed


@dataclass(frozen=True)
class _ColumnBlocks:
    """The column blocks of the packed nest's `count` columns (those left once the tail is
    split off), shared out over `threads`."""

    count: int
    threads: int
    nr: int
    size: int  # bytes of an element of B
    bounds: Blocking
    streamed: bool  # K streams in blocks

    @property
    def per_thread(self) -> int:
        """A column block per thread."""
        return max(self.nr, self.count // self.threads)

    def bound(self, kc: int) -> int:
        """The widest column block: a thread's columns, B's block within its L2 bytes."""
        return min(self.bounds.b_block_bytes // (kc * self.size), self.per_thread)

    def block(self, kc: int) -> int | None:
        """As many whole column blocks for each thread (128x768x3072, two threads: 3 blocks
        of 256 took 3.1 ms, 4 of 192 2.3 ms) within `bound`; with K in short blocks
        already, narrower blocks of B rather than shorter K blocks (256x11008x4096 f32 on
        an Intel Xeon: KC=128 NC=256 1.05x OpenBLAS)."""
        bound = self.bound(kc)
        nc = whole_block(self.count, bound, self.nr, self.threads)
        if nc is None and self.streamed:
            least = MIN_PANEL_COLUMNS
            nc = whole_block(self.count, bound, self.nr, self.threads, least=least)
        return nc


def _shortest_block_from(op: OpInfo, bound: int, longest: int) -> int:
    """The shortest whole K block of the KC knob's cache tiles from `bound` up to `longest`
    (a whole block itself), else `longest`."""
    k = op.dims["K"]
    whole = [b for b in K_CACHE_TILES(op, 1) if bound <= b <= longest and k % b == 0]
    return min(whole, default=longest)


def _one_k_block(
    op: OpInfo,
    cpu: HostCPU,
    chosen: tuple[int, int, int],
    columns: int,
    per_thread: int,
    nr: int,
    bounds: Blocking,
) -> tuple[int, int]:
    """KC and NC for an op with an element-wise epilogue whose K spans two of the longest
    streamed K blocks (`chosen`: KC, NC and that longest block): K in one block, with
    narrower column blocks that keep B's block within its L2 bytes, where such whole
    blocks exist (else KC and NC as chosen). On one K block the epilogue takes the
    accumulators in registers and C is stored once (packed.py), where two blocks read C
    back and run the epilogue as a pass of its own. Measured on an Intel Xeon (8 x 32
    f32, ratios to numpy's three ops in one rotating run): MLP 512x4096x1024 KC=512 NC=512
    1.10x -> KC=1024 NC=256 1.13x (and 1.05x -> 1.09x), 256x1024x1024 1.08x -> 1.13x,
    128x4096x1024 1.06x -> 1.08x; with NC=512 too, B's 2 MiB block lost (0.98x). Not at
    four blocks: 1024x4096x2048 1.04x -> 0.99x (NC=512 -> 128), hence column blocks at
    least half as wide. Without an epilogue it gains nothing (512x4096x1024 and 1024^3
    matmuls, within 1%)."""
    kc, nc, longest = chosen
    size = element_bytes(op.element_type)
    k = op.dims["K"]
    bound = min(bounds.b_block_bytes // (k * size), per_thread)
    # At least half the columns of B's block in K blocks of `longest` (same bytes).
    least = max(MIN_PANEL_COLUMNS, nc * kc // longest // 2)
    one = whole_block(columns, bound, nr, cpu.threads, least=least)
    return (k, one) if one is not None else (kc, nc)


def prefetch_level(op: OpInfo, nr: int) -> int:
    """PREFETCH for the packed nest reading A in place: 2 (the next row of register tiles'
    A panel, and B's panel rows ahead in the K loop, ir/prefetch_ahead.py) where B's
    panel rows span several cache lines (`prefetches_rows_ahead`); else 1 (the A panel
    only) where A's rows lie more than a PAGE_BYTES page apart; 2 where they lie a page
    apart or more, a panel row of the f32 micro-kernel is one cache line (NR = 16: AVX2)
    and no epilogue follows; else 0.
    Measured on an AMD Zen 3 (f32, 4 x 16, MC = NC = 128, KC = 512; GFLOP/s of the best
    and the median of 5-9 interleaved rounds, without -> with), 1 paid at K >= 2048 - 2048^3
    70.3 -> 75.8 and 72.8 -> 79.1 (medians 63.3 -> 69.0, 65.1 -> 68.9; two threads 98 ->
    115), 4096^3 72.2 -> 73.2 (67.4 -> 71.1), 256x11008x4096 68.8 -> 77.3, 256x4096x11008
    75.2 -> 79.8 (71.8 -> 75.8) - and not at K <= 1024: 512x1024x1024 86.8 -> 75.1 (66.2 ->
    51.7), 1024^3 89.9 -> 90.6 (81.7 -> 76.0), 4096x4096x256 78.3 -> 79.6 (76.0 -> 67.6),
    1000x999x1001 86.2 -> 85.9 (82.9 -> 80.9). Rows a page apart or closer lie in adjacent
    pages, whose lines the hardware prefetchers seem to find on their own.
    2 against the level chosen before (medians of the ratio to OpenBLAS over 40-550 bursts
    of about 10 ms, alternating with numpy's, the order of the configs rotating): 2048^3
    0.83x -> 0.87x, 256x11008x4096 0.86x -> 0.89x, 256x4096x11008 0.85x -> 0.93x,
    512x2048x2048 0.87x -> 0.90x (from 1); 1024^3 0.95x -> 0.99x, 512x4096x1024 0.86x ->
    0.91x, 512x1024x1024 0.88x -> 0.93x (from 0); on two threads against OpenBLAS's two,
    2048^3 0.85x both ways, 256x11008x4096 0.93x -> 0.97x. Not where A's rows lie closer:
    4096x4096x256 0.84x -> 0.74x, 1000x999x1001 (KC = 63) 0.87x -> 0.79x; nor under an
    MLP's bias and ReLU: 512x4096x1024 0.89x -> 0.82x numpy's three ops. Wider panel rows:
    see `prefetches_rows_ahead`."""
    if prefetches_rows_ahead(op, nr):
        return 2
    row_bytes = op.dims["K"] * element_bytes(op.element_type)
    if row_bytes < PAGE_BYTES:
        return 0
    one_line_rows = op.element_type == "f32" and nr * element_bytes("f32") == LINE_BYTES
    if one_line_rows and not op.attributes.get("epilogue"):
        return 2
    return int(row_bytes > PAGE_BYTES)


def _k_block(op: OpInfo, bound: int) -> int:
    """The largest whole K block of 8-row steps (the packing copies move 8 rows at a time)
    from the KC knob's floor of 64 rows (K_CACHE_TILES) within `bound`, down to a quarter
    of it, or K itself; else even ones (the first takes K's remainder), which the knob
    offers too. Any such block, not only the knob's cache tiles (one per octave): Llama's
    K = 11008 = 256 x 43 offers 344 and 128 there, and within a bound of 320 rows the
    block had been 128, B's block then 512 columns wide; on an AMD Zen 3 (4 x 16 tiles)
    KC=256 NC=256 ran 256x4096x11008 at 0.92-0.94x OpenBLAS against 0.73-0.74x."""
    k = op.dims["K"]
    top = min(bound, k)
    whole = [b for b in (*range(64, top + 1, 8), k) if b <= top and k % b == 0 and b % 8 == 0]
    if whole and 4 * max(whole) >= top:
        return max(whole)
    return padded_block(k, bound, 1)


def prefetch_needs_a_in_place(op: OpInfo, knobs: KnobVariables) -> Constraint:
    """PREFETCH=1 only on the packed nest reading A's rows in place: elsewhere it would
    repeat PREFETCH=0's kernel."""
    return Constraint(
        "prefetch_needs_a_in_place",
        f"PREFETCH == 0 or PACK == {PACK_B} with A stored [M, K]: only the packed nest that "
        "reads A's rows in place prefetches A's panels",
        z3.Or(
            knobs["PREFETCH"] == 0,
            z3.And(knobs["PACK"] == PACK_B, z3.BoolVal(not op.attributes.get("transpose_a"))),
        ),
    )


def prefetch_ahead_fits(knobs: KnobVariables, lanes: int, registers: int) -> Constraint:
    """PREFETCH=2 only on register tiles whose broadcasts fit beside their accumulators
    (register_tiles.ahead_accumulators): one vector per row, or at most that many."""
    most = ahead_accumulators(registers)
    return Constraint(
        "prefetch_ahead_fits",
        f"PREFETCH != 2, NR <= {lanes}, or MR*ceil(NR/{lanes}) <= {most}: with B's rows "
        "prefetched ahead, taller tiles of several vectors spilled their accumulators",
        z3.Or(
            knobs["PREFETCH"] != 2,
            knobs["NR"] <= lanes,
            knobs["MR"] * vectors(knobs["NR"], lanes) <= most,
        ),
    )


def transposed_packs(op: OpInfo, cpu: HostCPU) -> bool:
    """Whether an operand stored transposed is packed wherever whole packed blocks exist:
    B stored [N, K] (a Linear layer's weight), whose values of one K step lie a row apart
    (128 x 256 x 1024: 9 against 73 GFLOP/s unpacked), or A stored [K, M] once it passes
    L1, whose MR values of a K step then stream from L2 a row apart (512^3: 0.99x against
    0.85x numpy unpacked; 64^3, in L1, 1.20x against 1.34x)."""
    a_bytes = op.dims["M"] * op.dims["K"] * element_bytes(op.element_type)
    past_l1 = a_bytes > cpu.features.l1d_bytes
    return bool(op.attributes.get("transpose_b")) or (
        bool(op.attributes.get("transpose_a")) and past_l1
    )


def packing_pays(op: OpInfo, cpu: HostCPU) -> bool:
    """Whether the packed path is worth its copies: B passes half of L2, an operand is
    stored transposed (transposed_packs), or the unpacked nest cannot hold the whole output
    in L2 (`output_in_l2`), where it would block it in place instead. Measured on an Intel
    Xeon (f32, ratios to OpenBLAS in one rotating run, blocked unpacked -> packed, B at
    most half of L2): 256x1024x256 1.09x -> 1.19x, 512x1024x256 1.05x -> 1.23x,
    1024x1024x128 1.06x -> 1.26x, 1024x512x512 1.18x -> 1.24x, 2048x512x256 1.12x ->
    1.19x, 2048x2048x64 1.03x -> 1.45x."""
    in_l2 = output_in_l2(op, cpu, unpacked_tile(op, cpu)[2])
    return transposed_packs(op, cpu) or b_past_l2(op, cpu) or not in_l2


def output_in_l2(op: OpInfo, cpu: HostCPU, kc: int) -> bool:
    """Whether the unpacked nest holds the whole output in L2 beside a K block (`kc`, its
    `unpacked_tile`'s) of A's rows and of B's columns: its one output block."""
    m, n = op.dims["M"], op.dims["N"]
    size_in, size_out = element_bytes(op.element_type), element_bytes(op.dtypes[-1])
    return m * n * size_out + (m + n) * kc * size_in <= cpu.features.l2_bytes


def unpacked_tile(op: OpInfo, cpu: HostCPU) -> tuple[int, int, int]:
    """The unpacked nest's MR, NR (`register_tile`, widened by `wide_register_tile`) and K
    block: A's MR x KC micro-panel in a quarter of L1."""
    m, n = op.dims["M"], op.dims["N"]
    mr, nr = wide_register_tile(op, cpu, *register_tile(cpu, m, n, op.element_type))
    bound = cpu.features.l1d_bytes // 4 // (mr * element_bytes(op.element_type))
    return mr, nr, fit(op.dims["K"], bound, pow2=True)


def b_past_l2(op: OpInfo, cpu: HostCPU) -> bool:
    """Whether B (K x N) passes half of L2. It is re-streamed for every MC block, so
    packing its panels pays only then; a B that stays in L2 gains nothing from it."""
    b_bytes = op.dims["K"] * op.dims["N"] * element_bytes(op.element_type)
    return b_bytes * op.dims.get("B", 1) > cpu.features.l2_bytes // 2
