"""Cache blocks of the packed contraction path, from the host's cache geometry.

An analytical model of the kind of Low et al. ("Analytical Modeling Is Enough for
High-Performance BLIS", 2016). A set-associative cache of W ways holds, per way,
`sets x line` bytes; each block that should stay in a cache level is given whole ways of
it, and one way is left to the lines of C that pass through. In the packed nest (packed.py)
the register tiles of a block run N by NR outer, M by MR inner, so:
- L1 keeps A's micro-panel (MR x KC), whose elements the micro-kernel broadcasts, in half
  of its ways; B's micro-panel (KC x NR), read as whole vectors, streams from L2. Low et
  al. keep B's micro-panel in L1 instead, which bounds KC four times lower for an 8 x 32
  f32 tile; the micro-kernel here loads and stores its accumulators once per KC block
  without prefetching C, so a long KC matters more (measured on a Zen 4, 2048^3 f32:
  KC=512 0.98x OpenBLAS, their KC=128 0.82x), and L2 feeds a B stream of NR elements per
  MR x NR / (lanes x FMA pipes) cycles with room to spare.
- L2 keeps A's packed block (MC x KC), reused by every micro-panel of B: MC fills the L2
  ways left by one B micro-panel and C.
- L3 keeps B's packed block (KC x NC), reused by every MC block: NC fills the L3 ways left
  by A's block and C.
- Except where L2 can hold C's panel (M x NC, loaded and stored once per KC block) with
  B's block and at least MIN_PANEL_COLUMNS columns of it (few rows, e.g. M = 256): then NC
  keeps both in L2's ways less one (for A's stream), and A is read in place, since
  packing it once per NC block would cost more than it saves (measured on a Zen 4, Llama
  256x11008x4096 f32: 0.99x OpenBLAS this way, 0.94x with all of N in one L3 block).
These are capacity bounds; the selector takes the largest whole blocks within them.
"""

from __future__ import annotations

from dataclasses import dataclass

import z3

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


# Fewest columns a C panel kept in L2 must span (four micro-panels of 32 f32), else NC is
# sized for L3: a narrower block re-reads all of A for too few columns.
MIN_PANEL_COLUMNS = 128


@dataclass(frozen=True)
class Blocking:
    """Largest MC, NC and KC the caches hold (bounds, not yet fitted to a shape), whether A
    is packed too, and NC's bound in L3 (where NC is C's panel in L2, the fallback for a
    shape with no whole block within that)."""

    mc: int
    nc: int
    kc: int
    pack_a: bool = True
    l3_nc: int = 0


def blis_blocking(
    features: CpuFeatures, mr: int, nr: int, element_bytes: int, rows: int
) -> Blocking:
    """The blocks an MR x NR micro-kernel on `element_bytes` operands takes for a product
    of `rows` rows (M) on a CPU with `features`' caches (see the module docstring)."""
    l1, l2, l3 = CacheLevel.levels(features)
    kc = max(1, max(1, l1.ways // 2) * l1.way_bytes // (mr * element_bytes))
    b_panel_ways = l2.ways_for(kc * nr * element_bytes)
    a_block_ways = max(1, l2.ways - 1 - b_panel_ways)
    mc = max(mr, a_block_ways * l2.way_bytes // (kc * element_bytes) // mr * mr)
    b_block_ways = max(1, l3.ways - 1 - l3.ways_for(mc * kc * element_bytes))
    nc = max(nr, b_block_ways * l3.way_bytes // (kc * element_bytes) // nr * nr)
    c_panel_nc = (l2.ways - 1) * l2.way_bytes // ((rows + kc) * element_bytes) // nr * nr
    if c_panel_nc >= MIN_PANEL_COLUMNS:
        return Blocking(mc=mc, nc=c_panel_nc, kc=kc, pack_a=False, l3_nc=nc)
    return Blocking(mc=mc, nc=nc, kc=kc, l3_nc=nc)


def whole_block(size: int, bound: int, step: int, parts: int = 1) -> int | None:
    """The largest block of a loop of `size` within `bound` that divides it, is a multiple
    of `step` and gives a block count that `parts` divides (the threads' even shares), so
    the packed buffers are static; None when the best such block is under a quarter of the
    bound (a finer block would re-pack too often). A whole block of a third of the bound
    beats padded ones (1000x1024x1001 f32 on a 48 KiB / 2 MiB Intel core, MC=200 against a
    bound of 592: 1.02x OpenBLAS, padded blocks 0.3x)."""
    if size <= bound and parts == 1:
        return size if size % step == 0 else None
    top = min(bound, size) - min(bound, size) % step
    block = next(
        (d for d in range(top, 0, -step) if size % d == 0 and (size // d) % parts == 0), None
    )
    return block if block is not None and 4 * block >= min(bound, size) else None


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
    cpu: HostCPU, size: int, knobs: KnobVariables, blocked: z3.BoolRef
) -> list[Constraint]:
    """The model's bounds as constraints on a config that `blocked` says the model blocks
    (PACK > 0, or the dot path): A's block with one
    B micro-panel in the L2 ways but one, B's block with A's in the L3 ways but one (A's
    micro-panel in L1 is the family's `a_panel_in_l1`, for every path: the L1 ways but
    two, which admits longer K blocks than the selector takes)."""
    _, l2, l3 = CacheLevel.levels(cpu.features)
    mc, nc, kc, nr = (knobs[name] for name in ("MC", "NC", "KC", "NR"))
    a_block, b_block = mc * kc * size, kc * nc * size
    return [
        Constraint(
            "packed_a_block_in_l2",
            f"(PACK == 0 and UNIT not in (1, 2)) or ceil(MC*KC*{size} / {l2.way_bytes}) + "
            f"ceil(KC*NR*{size} / {l2.way_bytes}) <= {l2.ways - 1}: the packed A block, "
            "re-read by every B micro-panel, and one micro-panel keep to L2's ways but one "
            "(for C)",
            z3.Or(
                z3.Not(blocked),
                l2.ways_term(a_block) + l2.ways_term(kc * nr * size) <= l2.ways - 1,
            ),
        ),
        Constraint(
            "packed_b_block_in_l3",
            f"(PACK == 0 and UNIT not in (1, 2)) or ceil(KC*NC*{size} / {l3.way_bytes}) + "
            f"ceil(MC*KC*{size} / {l3.way_bytes}) <= {l3.ways - 1}: the packed B block, "
            "re-read by every MC block, and the A block keep to L3's ways but one (for C)",
            z3.Or(z3.Not(blocked), l3.ways_term(b_block) + l3.ways_term(a_block) <= l3.ways - 1),
        ),
    ]
