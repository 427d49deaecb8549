"""Default schedule for element-wise and row-wise payloads: tile the rows, vectorize."""

from __future__ import annotations

from collections.abc import Sequence

from mlir import ir

from mlirtune.schedules.builder import ScheduleBuilder
from mlirtune.schedules.knobs import Knob, powers_of_two, vector_columns

ELEMENTWISE_PARAMETERS = {"ROWS": 8, "COLS": 64}
ELEMENTWISE_KNOBS = (
    Knob("ROWS", "rows per tile", powers_of_two("ROWS", 32)),
    Knob("COLS", "columns per tile", vector_columns("COLS", (1, 2, 4, 8))),
)


def elementwise_schedule(
    *, anchor_op: str, shape: Sequence[int], parameters: dict[str, int], name: str = "elementwise"
) -> ir.Module:
    """Tile the last op (`anchor_op`) over its two innermost parallel dims, fuse producers,
    then vectorize. Leading dims are tiled by 1. Partial tiles are peeled off, so the main
    tiles have static shapes and vectorize even when the sizes do not divide the shape."""
    rows, cols = parameters["ROWS"], parameters["COLS"]
    sizes = [1] * max(0, len(shape) - 2) + [min(rows, d) for d in shape[-2:-1]]
    sizes += [min(cols, shape[-1])]
    sizes = sizes[-len(shape) :]
    with ScheduleBuilder(name) as s:
        anchor = s.match(s.root, [anchor_op], step="match_anchor")
        _, loops = s.fuse_with_loops(anchor, sizes, step="tile_and_fuse")
        for dim, size, loop_handle in reversed(list(zip(shape, sizes, loops, strict=True))):
            if dim % size:
                s.peel(loop_handle, step="peel_partial_tiles")
        function = s.match(s.root, ["func.func"], step="match_function")
        s.canonicalize(function)  # folds the peeled tiles' sizes into static shapes
        function = s.vectorize_function(function)
        s.lower_vectors(function)
    return s.module
