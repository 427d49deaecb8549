"""The gpu_contraction step both of its vector paths share: keeping each accumulator in
registers across the K loops (a thread's tile with FMAs, a warp's 16 x 8 tiles with tensor
cores)."""

from __future__ import annotations

from collections.abc import Callable

from mlir import ir
from mlir.dialects import transform as tr
from mlir.dialects.transform import memref as tmemref
from mlir.dialects.transform import structured
from mlir.dialects.transform import vector as tvector

from mlirtune.schedules.builder import ScheduleBuilder


def hoist_accumulators(
    s: ScheduleBuilder, module: ir.Value, *populate: Callable[[], object]
) -> ir.Value:
    """Fold the vectorized function's transfers (with the extra pattern sets `populate`)
    and the subviews into them, then hoist each accumulator's read and write of C out of
    the K loops. Transfers on the function's buffers, not on subviews, at CSE'd indices:
    only the read and write of a buffer at the same place hoist as a pair. Returns the
    function, matched again."""
    function = s.match(module, ["func.func"], "match_vector_function")
    s.apply_patterns(
        function,
        "fold_transfers",
        tvector.apply_patterns_vector_reduction_to_contract,
        tvector.apply_patterns_vector_transfer_permutation_patterns,
        *populate,
    )
    s.apply_patterns(function, "fold_subviews", tmemref.apply_patterns_memref_fold_memref_alias_ops)
    with s.at("cse_indices"):
        tr.ApplyCommonSubexpressionEliminationOp(function)
    with s.at("hoist_accumulators"):
        structured.HoistRedundantVectorTransfersOp(tr.AnyOpType.get(), function)
    return s.match(module, ["func.func"], "match_hoisted_function")
