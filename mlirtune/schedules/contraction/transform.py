"""Default schedule for matmul-like contractions (matmul, batch_matmul, fused MLP layers).

Two tiling levels: a cache tile (MC x NC x KC) that fuses the fill and element-wise consumers,
then a register tile (MR x NR) with a K loop of step 1 that vectorizes to broadcast + FMA.
Accumulators stay in registers because loop-invariant subsets are hoisted out of the K loop.

When a tile size does not divide its loop, the last tile of that loop is partial and has a
dynamic shape, which the vectorizer skips (it would run as scalar code). Those loops are
peeled into a main loop of full tiles and one partial tile, and canonicalization then gives
every tile a static shape, so that all of them vectorize. Shapes that every tile size divides
get no peeling, so their IR is the same as without remainder handling.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir

from mlirtune.interfaces.op import OpInfo
from mlirtune.schedules.builder import ScheduleBuilder
from mlirtune.schedules.contraction.fusion import POINTWISE
from mlirtune.schedules.contraction.knob_values import ContractionKnobs
from mlirtune.schedules.contraction.steps.widen import vectorize_widening, widened_type


@dataclass(frozen=True)
class _Remainders:
    """Which loops have a partial last tile and must be peeled (see `_remainders`)."""

    cache_m: bool
    cache_n: bool
    cache_k: bool
    register_m: bool
    register_n: bool

    @property
    def any(self) -> bool:
        return self.cache_m or self.cache_n or self.cache_k or self.register_m or self.register_n


def _remainders(dims: tuple[int, int, int], tiles: tuple[int, int, int, int, int]) -> _Remainders:
    """Loops whose trip count the step may not divide. A register loop runs over a cache
    tile, whose extent is the cache tile size, or the remainder of the dimension for the
    last cache tile; it is peeled if either extent leaves a partial register tile."""
    m, n, k = dims
    mc, nc, kc, mr, nr = tiles
    return _Remainders(
        cache_m=m % mc != 0,
        cache_n=n % nc != 0,
        cache_k=k % kc != 0,
        register_m=mc % mr != 0 or (m % mc) % mr != 0,
        register_n=nc % nr != 0 or (n % nc) % nr != 0,
    )


def _register_extents(size: int, cache: int, register: int) -> set[int]:
    """Extents the register tiles of a dimension of `size` take: full tiles and the partial
    last tile of each cache tile extent (the full cache tile and the dimension's remainder)."""
    cache_extents = {cache} | ({size % cache} - {0})
    extents = set()
    for extent in cache_extents:
        if extent >= register:
            extents.add(register)
        if extent % register:
            extents.add(extent % register)
    return extents


def contraction_schedule(op: OpInfo, knobs: ContractionKnobs) -> ir.Module:
    """Schedule for the annotated matmul or batch_matmul root `op` and the element-wise ops
    that consume it (bias, ReLU), which are fused into its cache tiles."""
    batch_dims = 1 if op.kind == "batch_matmul" else 0
    m, n, k = op.dims["M"], op.dims["N"], op.dims["K"]
    mc, nc, kc = min(knobs.mc, m), min(knobs.nc, n), min(knobs.kc, k)
    mr, nr = min(knobs.mr, mc), min(knobs.nr, nc)
    remainders = _remainders((m, n, k), (mc, nc, kc, mr, nr))
    ones, zeros = [1] * batch_dims, [0] * batch_dims
    with ScheduleBuilder("contraction") as s:
        # ORDER 1 walks the output blocks row by row (M outer), 2 column by column (N outer:
        # consecutive blocks share their B panel).
        n_outer = knobs.order == 2
        interchange = [*range(batch_dims), batch_dims + 1, batch_dims] if n_outer else None
        # With THREADS > 1 and whole cache tiles, the output blocks are one scf.forall,
        # spread over the threads; partial ones are peeled, which takes scf.for loops.
        parallel = knobs.threads > 1 and not (remainders.cache_m or remainders.cache_n)
        _, cache_loops = s.fuse_with_loops(
            s.output_op(op),
            [*ones, mc, nc],
            step="cache_tile_mn",
            interchange=interchange,
            parallel=parallel,
        )
        cache_m_loop = cache_n_loop = None  # parallel: one scf.forall, no cache tile to peel
        if not parallel:
            outer, inner = cache_loops[-2], cache_loops[-1]
            cache_m_loop, cache_n_loop = (inner, outer) if n_outer else (outer, inner)
        contraction = s.match_root(s.root, op.kind, step="match_contraction")
        contraction, k_loops = s.tile(contraction, [*zeros, 0, 0, kc], step="cache_tile_k")
        contraction, register_loops = s.tile(contraction, [*ones, mr, nr, 0], step="register_tile")
        contraction, k_step_loops = s.tile(contraction, [*zeros, 0, 0, 1], step="k_step")
        ku = knobs.ku
        if ku > 1 and kc % ku == 0 and not remainders.cache_k:
            # Only when KU divides every K cache tile (the K step loop runs KC iterations),
            # so the unrolled loop has no epilogue. Before peeling, which clones it unrolled.
            s.unroll(k_step_loops[-1], ku, step="unroll_k")
        others = s.match(s.root, POINTWISE, step="match_elementwise")
        _, elementwise_loops = s.tile(others, [*ones, mr, nr], step="register_tile_elementwise")
        s.keep_rolled(elementwise_loops, step="keep_elementwise_rolled")
        function = s.match(s.root, ["func.func"], step="match_function")
        if remainders.any:
            # Innermost loops first: peeling an outer loop clones its body, already peeled.
            cache_peels = [
                (remainders.cache_n, cache_n_loop, "peel_cache_n"),
                (remainders.cache_m, cache_m_loop, "peel_cache_m"),
            ]
            if n_outer:
                cache_peels.reverse()
            peels = [
                (remainders.register_n, register_loops[-1], "peel_register_n"),
                (remainders.register_m, register_loops[-2], "peel_register_m"),
                (remainders.cache_k, k_loops[-1], "peel_cache_k"),
                (remainders.register_n, elementwise_loops[-1], "peel_elementwise_n"),
                (remainders.register_m, elementwise_loops[-2], "peel_elementwise_m"),
                *cache_peels,
            ]
            for needed, loop_handle, step in peels:
                if needed:
                    s.peel(loop_handle, step=step)
            # Fold the peeled bounds into the slices, so every tile gets a static shape.
            s.canonicalize_loops(function, step="static_tile_shapes")
        if widened_type(op, knobs.pack, knobs.unit) is not None:
            vectorize_widening(s)
        s.vectorize_linalg(function)
        if batch_dims or 1 in _register_extents(m, mc, mr):
            # Unit leading dims in the accumulators (the batch dim, or register tiles of one
            # row) would make lower_vectors loop forever or crash: drop them first.
            s.drop_leading_unit_dims(function)
        s.hoist_invariant_subsets(function)
        # Register tiles of one column: an epilogue on linalg.index (a triangle mask) has
        # [MR, 1] index vectors there, whose broadcasts the broadcast lowering and
        # canonicalization rewrite back and forth until memory runs out; the lowering
        # passes after the schedule fold them instead.
        s.lower_vectors(function, canonicalize=1 not in _register_extents(n, nc, nr))
    return s.module
