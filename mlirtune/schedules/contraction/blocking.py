"""Cache blocks of the packed contraction path, from the host's cache geometry.

An analytical model of the kind of Low et al. ("Analytical Modeling Is Enough for
High-Performance BLIS", 2016). A set-associative cache of W ways holds, per way,
`sets x line` bytes; each block that should stay in a cache level is given whole ways of
it. In the packed nest (packed.py) the register tiles of a block run M by MR outer, N by NR
inner: BLIS's loops with A and B in each other's roles, since here B's rows are the
vectors and A's elements the broadcasts. So:
- L1 keeps A's micro-panel (MR x KC), whose elements the micro-kernel broadcasts, reused
  by every NR tile of a row. Low et al. keep the broadcast operand's micro-panel there too.
  K in one block takes up to half of L1's ways for it: C is then neither read back nor
  filled by a pass of its own. Past one block, K blocks are short enough for the panel to
  survive its reuse while a B micro-panel (KC x NR) streams through L1 between two uses:
  Low et al.'s split of L1's ways but one in proportion to the two panels' sizes, the
  streamed one taking floor((W - 1) / (1 + MR/NR)) ways (4 x 64 f32 tile, 48 KiB 12-way
  L1: KC <= 160). Measured on an Intel Xeon (f32, 4 x 64, ratios to OpenBLAS in one
  rotating run): 2048^3 KC=1024 NC=256 0.90x, KC=128 NC=2048 1.00x; 4096^3 0.88x ->
  0.94x (KC=256 NC=1024); 256x4096x11008 0.89x -> 1.06x; but 1024^3 with K in one block
  1.03x, in blocks of 128 0.99x. Where B's rows are prefetched ahead into L1, longer
  streamed blocks and every K past them win (packed_host.packed_blocks).
- L2 keeps B's packed block (KC x NC), whose micro-panels every row of register tiles
  streams as vectors, in half of its ways: the A panels, the C tiles and the hardware
  prefetchers' lines share the rest. Measured on an Intel Xeon (2 MiB L2), 2048^3 f32 with
  A read in place: B blocks of 1 MiB ran at 1.01-1.04x OpenBLAS, of 1.5 and 2 MiB at
  0.55-0.61x.
- A's block (MC x KC) takes L2's ways left by one B micro-panel and C: the dot path
  (dot.py) re-reads it for every micro-panel of B. In the packed FMA nest A's rows are read
  once per column block, a micro-panel at a time, so MC only splits M (2048^3: MC from
  128 to 1024 within the run's noise).
These are capacity bounds; the selector takes the largest whole blocks within them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import z3

from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.schedule import Constraint, KnobVariables
from mlirtune.targets.host_cpu import CpuFeatures, HostCPU


@dataclass(frozen=True)
class CacheLevel:
    """One cache level's capacity and associativity."""

    size_bytes: int
    ways: int

    @property
    def way_bytes(self) -> int:
        """Bytes one way holds: sets x line size."""
        return self.size_bytes // self.ways

    def ways_for(self, nbytes: int) -> int:
        """Whole ways a block of `nbytes` occupies."""
        return -(-nbytes // self.way_bytes)

    def ways_term(self, nbytes: z3.ArithRef) -> z3.ArithRef:
        """`ways_for` as a z3 term of a block size in bytes."""
        return (nbytes + self.way_bytes - 1) / self.way_bytes

    @classmethod
    def levels(cls, features: CpuFeatures) -> tuple[CacheLevel, CacheLevel, CacheLevel]:
        """L1d, L2 and L3 of `features`."""
        return (
            cls(features.l1d_bytes, max(1, features.l1d_ways)),
            cls(features.l2_bytes, max(1, features.l2_ways)),
            cls(features.l3_bytes, max(1, features.l3_ways)),
        )


# Fewest columns a B block spans: a narrower one re-reads all of A for too few columns.
MIN_PANEL_COLUMNS = 128


@dataclass(frozen=True)
class Blocking:
    """Largest MC and KC the caches hold (bounds, not yet fitted to a shape), and the bytes
    of B's packed block, which bound NC for a fitted KC and KC for a fitted NC. `kc` bounds
    K in one block, `kc_streamed` the K blocks of a K past `kc`."""

    mc: int
    kc: int
    b_block_bytes: int
    kc_streamed: int


def blis_blocking(features: CpuFeatures, mr: int, nr: int, element_bytes: int) -> Blocking:
    """The blocks an MR x NR micro-kernel on `element_bytes` operands takes on a CPU with
    `features`' caches (see the module docstring)."""
    l1, l2, _ = CacheLevel.levels(features)
    b_block_bytes = b_block_budget(features)
    # A's micro-panel in half of L1's ways, and B's block at least MIN_PANEL_COLUMNS wide:
    # a short register tile on a small L2 (4 x 16 on a 32 KiB / 512 KiB AMD Zen 3) would
    # otherwise take K blocks whose B block is a few panels wide.
    kc = max(1, max(1, l1.ways // 2) * l1.way_bytes // (mr * element_bytes))
    kc = max(1, min(kc, b_block_bytes // (MIN_PANEL_COLUMNS * element_bytes)))
    b_panel_ways = l2.ways_for(kc * nr * element_bytes)
    a_block_ways = max(1, l2.ways - 1 - b_panel_ways)
    mc = max(mr, a_block_ways * l2.way_bytes // (kc * element_bytes) // mr * mr)
    # K blocks past one: A's micro-panel lives through a streamed B micro-panel.
    streamed_ways = max(1, (l1.ways - 1) * nr // (nr + mr))
    kc_streamed = max(1, min(kc, streamed_ways * l1.way_bytes // (nr * element_bytes)))
    return Blocking(mc=mc, kc=kc, b_block_bytes=b_block_bytes, kc_streamed=kc_streamed)


def b_block_ways(l2: CacheLevel) -> int:
    """L2's ways for B's packed block: half of them (see the module docstring)."""
    return max(1, l2.ways // 2)


def b_block_budget(features: CpuFeatures) -> int:
    """Bytes of B's packed block on a CPU with `features`: its ways of L2."""
    l2 = CacheLevel.levels(features)[1]
    return b_block_ways(l2) * l2.way_bytes


def whole_block(
    size: int, bound: int, step: int, parts: int = 1, least: int | None = None
) -> int | None:
    """The largest block of a loop of `size` within `bound` that divides it, is a multiple
    of `step` and gives a block count that `parts` divides (the threads' even shares), so
    the packed buffers are static; None when the best such block is under `least` (by
    default a quarter of the bound: a finer block would re-pack too often). A whole block
    of a third of the bound beats padded ones (1000x1024x1001 f32 on a 48 KiB / 2 MiB Intel
    core, MC=200 against a bound of 592: 1.02x OpenBLAS, padded blocks 0.3x)."""
    if size <= bound and parts == 1:
        return size if size % step == 0 else None
    top = min(bound, size) - min(bound, size) % step
    block = next(
        (d for d in range(top, 0, -step) if size % d == 0 and (size // d) % parts == 0), None
    )
    least = min(bound, size) / 4 if least is None else least
    return block if block is not None and block >= least else None


def padded_block(size: int, bound: int, step: int) -> int:
    """A block of a loop of `size` that no whole block fits: as many blocks as `bound`
    allows, evened out and rounded up to a multiple of `step`, so the last (padded) one
    wastes little (2949 by at most 512: six blocks of 492)."""
    if size <= bound:
        return size  # one block spanning the loop; its last register tile is padded
    blocks = -(-size // bound)
    even = -(-size // blocks)
    block = -(-even // step) * step
    return block if block <= bound else max(step, bound - bound % step)


def packed_blocks_in_caches(
    cpu: HostCPU, size: int, knobs: KnobVariables, packed: z3.BoolRef, paired: z3.BoolRef
) -> list[Constraint]:
    """The model's bounds as constraints: on the packed FMA nest (`packed`: PACK > 0, M
    outer), B's block in half of L2's ways; on the pair paths' nest and the packed FMA nest
    walking N outer (`paired`: dot products, AMX, ORDER=2), A's block with one B
    micro-panel in L2's ways but one, and B's block with A's in L3's ways but one. (A's
    micro-panel in L1 is the family's `a_panel_in_l1`, for every path: the L1 ways but two,
    which admits longer K blocks than the selector takes.)"""
    _, l2, l3 = CacheLevel.levels(cpu.features)
    mc, nc, kc, nr = (knobs[name] for name in ("MC", "NC", "KC", "NR"))
    a_block, b_block = mc * kc * size, kc * nc * size
    return [
        Constraint(
            "packed_b_block_in_l2",
            f"PACK == 0, UNIT > 0, ORDER == 2 or ceil(KC*NC*{size} / {l2.way_bytes}) <= "
            f"{b_block_ways(l2)}: B's packed block, streamed by every row of register "
            "tiles, keeps to half of L2's ways (past that it ran at 0.55-0.61x)",
            z3.Or(z3.Not(packed), l2.ways_term(b_block) <= b_block_ways(l2)),
        ),
        Constraint(
            "paired_a_block_in_l2",
            f"UNIT not in (1, 2) and ORDER == 1, or ceil(MC*KC*{size} / {l2.way_bytes}) + "
            f"ceil(KC*NR*{size} / {l2.way_bytes}) <= {l2.ways - 1}: the pair paths' (and "
            "the N-outer packed nest's) A block, re-read by every B micro-panel, and one "
            "micro-panel keep to L2's ways but one (for C)",
            z3.Or(
                z3.Not(paired),
                l2.ways_term(a_block) + l2.ways_term(kc * nr * size) <= l2.ways - 1,
            ),
        ),
        Constraint(
            "paired_b_block_in_l3",
            f"UNIT not in (1, 2) and ORDER == 1, or ceil(KC*NC*{size} / {l3.way_bytes}) + "
            f"ceil(MC*KC*{size} / {l3.way_bytes}) <= {l3.ways - 1}: the pair paths' (and "
            "the N-outer packed nest's) B block, re-read by every MC block, and the A block "
            "keep to L3's ways but one (for C)",
            z3.Or(z3.Not(paired), l3.ways_term(b_block) + l3.ways_term(a_block) <= l3.ways - 1),
        ),
    ]


def shared_blocks(op: OpInfo, threads: int, mc: int, nc: int, mr: int, nr: int) -> tuple[int, int]:
    """MC and NC with as many whole output blocks for each thread (the blocks are one
    scf.forall): N's block split where that does it, else M's; unchanged on one thread.
    Partial blocks are peeled, which leaves the loop on one thread: whole blocks near them
    take their place (`whole_near`), where there are any. An output held in L2 was one
    block, which one thread ran (128x768x3072: 4.2 ms on two threads as on one, 2.2 ms in
    two)."""
    m, n, batch = op.dims["M"], op.dims["N"], op.dims.get("B", 1)
    if threads == 1:
        return mc, nc
    whole_m = mc if m % mc == 0 else whole_near(m, mc, min(mr, mc))
    whole_n = nc if n % nc == 0 else whole_near(n, nc, min(nr, nc))
    if whole_m is None or whole_n is None:
        return mc, nc
    mc, nc = whole_m, whole_n
    # The factor of the thread count that N's (or M's) block count must bring.
    n_parts = threads // math.gcd(threads, batch * (m // mc))
    m_parts = threads // math.gcd(threads, batch * (n // nc))
    if n_parts == 1:  # the blocks share out evenly already
        return mc, nc
    split_n = whole_block(n, nc, min(nr, nc), n_parts)
    if split_n:
        return mc, split_n
    return whole_block(m, mc, min(mr, mc), m_parts) or mc, nc


def whole_near(size: int, block: int, step: int) -> int | None:
    """A block that divides a loop of `size` (of which `block` leaves a partial one), for
    threads to share: the smallest multiple of `step` that divides it from `block` up to
    four times `block`, else the largest below it, else all of `size` where that is within
    four times `block`; None if none is. Two threads of an Intel Xeon, f32, ratios to
    numpy's two: 1000x300x2048 MC=16 (partial) 0.30x, 40 0.83x, 8 0.41x; 1001x300x1001
    MC=14 0.49x, 77 0.89x, 7 0.90x; 2048x300x64 NC=128 0.48x, NC=300 1.01x."""
    dividing = [d for d in range(step, min(size, 4 * block) + 1, step) if size % d == 0]
    above = [d for d in dividing if d >= block]
    if above or dividing:
        return above[0] if above else dividing[-1]
    return size if size <= 4 * block else None
