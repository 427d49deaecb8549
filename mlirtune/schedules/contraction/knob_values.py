"""The contraction family's typed knobs and its PACK and UNIT knob values, apart from the
schedules that take them (packed.py, dot.py) so that the modules those import, such as
widen.py, can name them too."""

from __future__ import annotations

from dataclasses import dataclass

from mlirtune.interfaces.schedule import KnobValues

# No packing (the unpacked path), B's panels, or A's and B's.
PACK_NONE, PACK_B, PACK_AB = 0, 1, 2
# Micro-kernel instructions (the row-dot path's value, 3, is rows.py's): FMA micro-kernels
# (narrow operands widened first), dot products of pairs of K, or AMX tile products.
UNIT_FMA, UNIT_DOT, UNIT_AMX = 0, 1, 2


@dataclass(frozen=True)
class ContractionKnobs(KnobValues):
    """An `mc` x `nc` x `kc` cache tile around an `mr` x `nr` register tile whose K steps
    are unrolled `ku` times, output blocks walked in `order` (1: M outer, 2: N outer);
    `pack` the operand packing (PACK_*), `prefetch` the packed nest's prefetches (0-2),
    `unit` the micro-kernel instructions (UNIT_*, or rows.py's UNIT_ROWS); `threads` and
    `vector_bits` come from the target."""

    mc: int
    nc: int
    kc: int
    mr: int
    nr: int
    ku: int
    order: int
    pack: int
    prefetch: int
    unit: int
    threads: int
    vector_bits: int
