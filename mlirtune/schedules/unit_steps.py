"""Vectorizing steps of unit loops, which the NCHW convolution paths and the generic family
share: a tile stepped one filter tap (or one reduction iteration) at a time."""

from __future__ import annotations

from mlir import ir
from mlir.dialects.transform import structured

from mlirtune.schedules.builder import ScheduleBuilder


def vectorize_unit_steps(s: ScheduleBuilder, function: ir.Value) -> None:
    """Vectorize the generic steps of `function` (a convolution's filter taps, any op's
    reduction iterations), out[...] += a * b once their unit loops are folded, into
    broadcast x row FMAs whose accumulators stay in registers across the step loops."""
    s.apply_patterns(
        function,
        "drop_unit_loops",
        structured.apply_patterns_linalg_fold_unit_extent_dims_via_slices,
    )
    s.vectorize_linalg(function, reductions_to_contract=False, minor_transfers=False)
    s.drop_leading_unit_dims(function)
    s.hoist_invariant_subsets(function)
    s.allow_fma(function)
    # Canonicalizing here as well crashes the pattern driver (see lower_vectors).
    s.lower_vectors(function, canonicalize=False)
