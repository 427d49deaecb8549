"""Knob derivations: how a knob's candidate values follow from the root op and the vector width.

A derivation `derive(op, lanes)` lists plausible values of one schedule parameter for the root
op `op` on a target with `lanes` elements per vector register; the family's constraints
decide which combinations are valid. The Knob type itself is in mlirtune.interfaces.schedule.
"""

from __future__ import annotations

from collections.abc import Sequence

from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.schedule import Derivation, Knob
from mlirtune.targets.isa import ISA_VECTORS

# The vector width of a target that names none (the generic baseline, lower_cpu.yaml's too).
GENERIC_VECTOR_BITS = ISA_VECTORS["generic"][0]

# Rows of an outer-product register tile: the small counts a register file holds, with the
# 3-, 6- and 12-row tiles that fill it when a row spans two or four vectors.
REGISTER_ROWS = (1, 2, 3, 4, 6, 8, 12, 16)


def threads_knob() -> Knob:
    """THREADS: the cores a family's outer tile loop is spread over. Neither selected nor
    searched: the target fills it (HostCPU.threads, the THREADS slot of lower_cpu.yaml)."""
    return Knob(
        "THREADS",
        "threads the outer tile loop is spread over (set by the target)",
        1,
        choices(1),
        selected=False,
        searched=False,
    )


def vector_bits_knob() -> Knob:
    """VECTOR_BITS: the width of the target's vector registers, for code whose shape follows
    the instruction set (the packed path's transposing shuffles). Neither selected nor
    searched: the target fills it (HostCPU's vector ISA, the VECTOR_BITS slot of
    lower_cpu.yaml); 128, the generic baseline, where none does."""
    return Knob(
        "VECTOR_BITS",
        "bits of a vector register (set by the target)",
        GENERIC_VECTOR_BITS,
        choices(GENERIC_VECTOR_BITS),
        selected=False,
        minimum=0,
        searched=False,
    )


def cache_tiles(dim: str, *, floor: int, granule: int = 1, in_lanes: bool = False) -> Derivation:
    """Tile sizes for the loop `dim`: one per power-of-two octave from `floor` up, the largest
    divisor of the loop in that octave that is a multiple of `granule` (no partial tile to
    peel) or else the power of two, plus the whole loop. `in_lanes` counts `floor` and
    `granule` in vectors."""

    def derive(op: OpInfo, lanes: int) -> list[int]:
        size = op.dims[dim]
        scale = lanes if in_lanes else 1
        low, step = min(floor * scale, size), granule * scale
        sizes = [size]
        power = 1
        while power < size:
            if power >= low:
                top = min(2 * power, size)
                divisors = [d for d in range(power, top) if size % d == 0 and d % step == 0]
                sizes.append(max(divisors, default=power))
            power *= 2
        return sizes

    return derive


def register_rows(dim: str) -> Derivation:
    """REGISTER_ROWS up to the loop `dim`, and the loop's divisors up to the largest of them
    (whole tiles: a selector picks 7 rows of a 14- or 28-pixel row), the whole loop among
    them when it is that short."""

    def derive(op: OpInfo, lanes: int) -> list[int]:
        size = op.dims[dim]
        whole = [r for r in range(1, REGISTER_ROWS[-1] + 1) if size % r == 0]
        return sorted({r for r in REGISTER_ROWS if r <= size} | set(whole))

    return derive


def vector_columns(dim: str, vectors: Sequence[int]) -> Derivation:
    """Rows of `vectors` whole vector registers up to the loop `dim`, or the whole loop when
    it is narrower than one vector."""

    def derive(op: OpInfo, lanes: int) -> list[int]:
        size = op.dims[dim]
        return [v * lanes for v in vectors if v * lanes <= size] + ([size] if size < lanes else [])

    return derive


def divisors(dim: str, cap: int) -> Derivation:
    """Divisors of the loop `dim` up to `cap`."""

    def derive(op: OpInfo, lanes: int) -> list[int]:
        size = op.dims[dim]
        return [d for d in range(1, min(size, cap) + 1) if size % d == 0]

    return derive


def powers_of_two(dim: str, cap: int) -> Derivation:
    """Powers of two up to the loop `dim` and `cap`, and the whole loop when within `cap`."""

    def derive(op: OpInfo, lanes: int) -> list[int]:
        size = op.dims[dim]
        powers = [1 << i for i in range(cap.bit_length()) if 1 << i <= min(size, cap)]
        return powers + ([size] if size <= cap else [])

    return derive


def choices(*values: int) -> Derivation:
    """The same candidates for every op."""
    return lambda op, lanes: values
