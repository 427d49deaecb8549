"""Default schedule for element-wise and row-wise payloads: tile the rows, vectorize."""

from __future__ import annotations

from collections.abc import Sequence

from mlir import ir

from mlirtune.schedules.builder import ScheduleBuilder

ELEMENTWISE_PARAMETERS = {"ROWS": 8, "COLS": 64}


def elementwise_schedule(
    *, anchor_op: str, shape: Sequence[int], parameters: dict[str, int], name: str = "elementwise"
) -> ir.Module:
    """Tile the last op (`anchor_op`) over its two innermost parallel dims, fuse producers,
    then vectorize. Leading dims are tiled by 1."""
    rows, cols = parameters["ROWS"], parameters["COLS"]
    sizes = [1] * max(0, len(shape) - 2) + [min(rows, d) for d in shape[-2:-1]]
    sizes += [min(cols, shape[-1])]
    sizes = sizes[-len(shape) :]
    with ScheduleBuilder(name) as s:
        anchor = s.match(s.root, [anchor_op], step="match_anchor")
        s.fuse(anchor, sizes, step="tile_and_fuse")
        function = s.match(s.root, ["func.func"], step="match_function")
        function = s.vectorize_function(function)
        s.lower_vectors(function)
    return s.module
