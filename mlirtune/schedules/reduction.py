"""Default schedule for row-wise payloads with row reductions (softmax and the like).

A row tile (ROWS rows, every column) of the last op fuses all its producers, so each row tile
is read from memory once. Inside it, every op is tiled over COLS columns: element-wise ops
plainly, reductions into a [ROWS, COLS] partial result that is merged once per row tile, so the
inner loops are pure vector code. Partial tiles are peeled off to keep main tiles static.
"""

from __future__ import annotations

from collections.abc import Sequence

from mlir import ir
from mlir.dialects import transform
from mlir.dialects.transform import vector as tvector

from mlirtune.schedules.builder import ScheduleBuilder

ROWWISE_PARAMETERS = {"ROWS": 4, "COLS": 64}

PARALLEL = ("parallel", "parallel")
ROW_REDUCTION = ("parallel", "reduction")


def rowwise_schedule(
    *, shape: Sequence[int], parameters: dict[str, int], name: str = "rowwise"
) -> ir.Module:
    """Schedule a 2-D payload whose ops are row-parallel (linalg.generic with iterators
    parallel x parallel or parallel x reduction) and whose last op writes the output."""
    m, n = shape
    rows, cols = min(parameters["ROWS"], m), min(parameters["COLS"], n)
    with ScheduleBuilder(name) as s:
        store = s.match(s.root, ["bufferization.materialize_in_destination"], step="match_store")
        last = s.producer(store, 0, step="match_last_op")
        _, (row_loop,) = s.fuse_with_loops(last, [rows, 0], step="tile_rows_and_fuse")
        function = s.match(s.root, ["func.func"], step="match_function")
        with s.at("dedup_fused_producers"):
            # A producer with two consumers (exp feeds the sum and the divide) is fused once
            # per use; the copies are identical, so CSE keeps one.
            transform.apply_cse(function)
        elementwise = s.match_generic(row_loop, PARALLEL, step="match_elementwise")
        reductions = s.match_generic(row_loop, ROW_REDUCTION, step="match_reductions")
        _, col_loops = s.tile(elementwise, [0, cols], step="tile_columns")
        _, _, reduction_loops = s.tile_reduction(reductions, [0, cols], step="tile_reductions")
        if n % cols:
            for loop_handle in (*col_loops, reduction_loops):
                s.peel(loop_handle, step="peel_columns")
        if m % rows:
            s.peel(row_loop, step="peel_rows")
        s.canonicalize(function)
        function = s.vectorize_function(function)
        s.hoist_invariant_subsets(function)
        # Single-row tiles give vector<1xN> values, whose lowering crashes MLIR's vector
        # canonicalizer; drop the unit dims (and fold broadcasts) first.
        s.drop_leading_unit_dims(function)
        s.lower_vectors(function, reductions=tvector.VectorMultiReductionLowering.InnerReduction)
    return s.module
