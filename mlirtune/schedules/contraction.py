"""Default schedule for matmul-like contractions (matmul, batch_matmul, fused MLP layers).

Two tiling levels: a cache tile (MC x NC x KC) that fuses the fill and element-wise consumers,
then a register tile (MR x NR) with a K loop of step 1 that vectorizes to broadcast + FMA.
Accumulators stay in registers because loop-invariant subsets are hoisted out of the K loop.
"""

from __future__ import annotations

from collections.abc import Sequence

from mlir import ir

from mlirtune.schedules.builder import ScheduleBuilder

CONTRACTION_PARAMETERS = {"MC": 64, "NC": 128, "KC": 256, "MR": 8, "NR": 32}


def contraction_schedule(
    *,
    anchor_op: str,
    contraction_op: str,
    dims: Sequence[int],
    parameters: dict[str, int],
    batch_dims: int = 0,
    name: str = "contraction",
) -> ir.Module:
    """Schedule for a payload whose last op is `anchor_op` and whose contraction is
    `contraction_op`; `dims` are the contraction's loop sizes (batch..., M, N, K)."""
    *_, m, n, k = dims
    p = parameters
    mc, nc, kc = min(p["MC"], m), min(p["NC"], n), min(p["KC"], k)
    mr, nr = min(p["MR"], mc), min(p["NR"], nc)
    ones = [1] * batch_dims
    with ScheduleBuilder(name) as s:
        anchor = s.match(s.root, [anchor_op], step="match_anchor")
        tile = s.fuse(anchor, [*ones, mc, nc], step="cache_tile_mn")
        del tile  # the handle is consumed by the matches below
        contraction = s.match(s.root, [contraction_op], step="match_contraction")
        contraction, _ = s.tile(contraction, [*[0] * batch_dims, 0, 0, kc], step="cache_tile_k")
        contraction, _ = s.tile(contraction, [*ones, mr, nr, 0], step="register_tile")
        contraction, _ = s.tile(contraction, [*[0] * batch_dims, 0, 0, 1], step="k_step")
        others = s.match(s.root, ["linalg.fill", "linalg.generic"], step="match_elementwise")
        s.tile(others, [*ones, mr, nr], step="register_tile_elementwise")
        function = s.match(s.root, ["func.func"], step="match_function")
        function = s.vectorize_function(function)
        if batch_dims:
            # Unit batch dims in the accumulators would make lower_vectors loop forever.
            s.drop_leading_unit_dims(function)
        s.hoist_invariant_subsets(function)
        s.lower_vectors(function)
    return s.module
