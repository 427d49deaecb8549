"""The generic family's knobs, typed."""

from __future__ import annotations

from dataclasses import dataclass

from mlirtune.interfaces.schedule import KnobValues


@dataclass(frozen=True)
class GenericKnobs(KnobValues):
    """A register tile of `vector` outputs along the vector loop by `unroll` and `unroll2`
    along the reuse loops; `threads` the tiles are spread over."""

    vector: int
    unroll: int
    unroll2: int
    threads: int
