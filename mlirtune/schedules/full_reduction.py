"""The `full_reduction` family: row reductions of [M, N] inputs whose [M] results one last
reduction folds into a scalar (a loss, workloads/loss.py).

The last op (a reduction over rows, 0-d result) is tiled by ROWS rows: one row loop carries
the scalar, and every row reduction feeding it is fused into the loop, so a row tile is read
once. Inside a row tile, the row reductions are column-tiled into [ROWS, COLS] partial
results as in `rowwise`, and the last op's tile becomes one horizontal reduction of ROWS
values. A partial row tile is peeled off.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import transform
from mlir.dialects.transform import structured

from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.schedule import Config
from mlirtune.schedules.builder import ScheduleBuilder
from mlirtune.schedules.rowwise import ROW_REDUCTION, RowTiles, Rowwise, input_in_l2
from mlirtune.schedules.vector_tiles import VectorTileKnobs
from mlirtune.targets.host_cpu import HostCPU


@dataclass(frozen=True)
class FullReductionKnobs(VectorTileKnobs):
    """`rows` rows per row tile, `cols` columns per vector tile inside it; `threads` the
    row tiles are spread over (each summing its share into a partial result)."""

    threads: int


class FullReduction(RowTiles[FullReductionKnobs]):
    """Row tiles of row reductions, summed into one scalar across tiles; the knobs, model
    and selector are `rowwise`'s (the partial row results stay live beside the loaded tile),
    but for PREFETCH: the row loop carries the scalar, and no step prefetches it."""

    name = "full_reduction"
    description = "row reductions folded into a scalar: a row loop carrying it, column-tiled"
    knobs = tuple(knob for knob in Rowwise.knobs if knob.name != "PREFETCH")
    values_type = FullReductionKnobs

    def select_on(self, op: OpInfo, cpu: HostCPU) -> Config:
        rows, cols = self.row_tile(op, cpu)
        return {"ROWS": rows, "COLS": cols}

    def memory_overlaps_compute(self, op: OpInfo, cpu: HostCPU, knobs: FullReductionKnobs) -> bool:
        return input_in_l2(op, cpu)

    def build(self, op: OpInfo, parameters: Config) -> ir.Module:
        shape = [op.dims["ROWS"], op.dims["COLS"]]
        return full_reduction_schedule(shape=shape, knobs=self.knob_values(op, parameters))


FULL_REDUCTION = FullReduction()


def full_reduction_schedule(
    *, shape: Sequence[int], knobs: FullReductionKnobs, name: str = "full_reduction"
) -> ir.Module:
    """Schedule a payload of row reductions ([M, N] -> [M], iterators parallel x reduction)
    whose last op reduces their [M] results to the 0-d output."""
    m, n = shape
    rows, cols = min(knobs.rows, m), min(knobs.cols, n)
    threads = knobs.threads
    # With THREADS > 1 and whole row tiles per thread, each thread sums its share of the rows
    # into a partial result of its own (an scf.forall), and those are added up after it.
    parallel = threads > 1 and m % (threads * rows) == 0
    with ScheduleBuilder(name) as s:
        last = s.last_op()
        function = s.match(s.root, ["func.func"], step="match_function")
        if parallel:
            last = _split_over_threads(s, last, function, threads)
            m //= threads
        _, (row_loop,) = s.fuse_with_loops(last, [rows], step="tile_rows_and_fuse")
        with s.at("dedup_fused_producers"):
            transform.apply_cse(function)
        if m % rows:
            s.peel(row_loop, step="peel_rows")
        s.shrink_temporaries(function)
        reductions = s.match_generic(function, ROW_REDUCTION, step="match_reductions")
        _, _, reduction_loops = s.tile_reduction(reductions, [0, cols], step="tile_reductions")
        if n % cols:
            s.peel(reduction_loops, step="peel_columns")
        s.canonicalize(function)
        s.vectorize_linalg(function, reductions_to_contract=False)
        s.hoist_invariant_subsets(function)
        s.lower_row_reductions(function)
    return s.module


def _split_over_threads(
    s: ScheduleBuilder, last: ir.Value, function: ir.Value, threads: int
) -> ir.Value:
    """Split the last reduction into `threads` partial ones, an scf.forall, and fuse the ops
    producing its rows (row reductions, per-row element-wise ops) into it; returns the
    per-thread reduction."""
    any_op = transform.AnyOpType.get()
    with s.at("split_over_threads"):
        split = structured.TileReductionUsingForallOp(
            [any_op], any_op, any_op, any_op, last, num_threads=[threads], tile_sizes=[0]
        )
    reductions = s.match_generic(function, ROW_REDUCTION, step="match_row_reductions")
    per_row = s.match_generic(function, ("parallel",), step="match_per_row_ops")
    with s.at("fuse_rows_into_threads"):
        producers = transform.MergeHandlesOp([reductions, per_row]).result
        structured.FuseIntoContainingOp(producers, split.forall_op)
    return split.split_op
