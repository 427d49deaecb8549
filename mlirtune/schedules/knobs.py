"""Knobs: the tunable parameters a schedule declares beside its defaults.

A knob names a schedule parameter and says how its candidate values follow from the root op
and the vector width (elements per vector register of the target). Candidates are only
plausible values; the tuner's constraint generators decide which combinations are valid.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mlirtune.ir.roots import OpInfo

# Rows of an outer-product register tile: the small counts a register file holds, with the
# 3-, 6- and 12-row tiles that fill it when a row spans two or four vectors.
REGISTER_ROWS = (1, 2, 3, 4, 6, 8, 12, 16)

Derivation = Callable[[OpInfo, int], Sequence[int]]


@dataclass(frozen=True)
class Knob:
    """A tunable schedule parameter: `derive(op, lanes)` lists its candidate values."""

    name: str
    description: str
    derive: Derivation

    def values(self, op: OpInfo, lanes: int) -> tuple[int, ...]:
        """Candidate values for `op` with `lanes` elements per vector, ascending, unique."""
        return tuple(sorted({int(v) for v in self.derive(op, lanes) if v > 0}))


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
    """REGISTER_ROWS up to the loop `dim`, and the whole loop when it is that short."""

    def derive(op: OpInfo, lanes: int) -> list[int]:
        size = op.dims[dim]
        return [r for r in REGISTER_ROWS if r <= size] + (
            [size] if size <= REGISTER_ROWS[-1] else []
        )

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
