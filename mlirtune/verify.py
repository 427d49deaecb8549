"""Numerical comparison against a reference, with dtype-aware tolerances."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from mlirtune.interfaces.verification import VerificationResult

if TYPE_CHECKING:
    from mlirtune.interfaces.workload import ArgSpec


def compare(
    outputs: list[tuple[ArgSpec, np.ndarray]],
    references: list[np.ndarray],
    accumulation_length: int,
) -> VerificationResult:
    """Check each output against its reference: |out - ref| <= atol + rtol * |ref|."""
    worst = VerificationResult(ok=True)
    worst_excess = -np.inf
    failures = []
    for (spec, actual), expected in zip(outputs, references, strict=True):
        got = np.asarray(actual, dtype=np.float64)
        want = np.asarray(expected, dtype=np.float64)
        if got.shape != want.shape:
            return VerificationResult(
                ok=False, detail=f"{spec.name}: shape {got.shape} != reference {want.shape}"
            )
        atol = spec.dtype.atol_per_term * max(1, accumulation_length) ** 0.5 * 10
        abs_err = np.abs(got - want)
        abs_err = np.where(np.isnan(abs_err), np.inf, abs_err)  # NaN means "never written"
        excess = abs_err - (atol + spec.dtype.rtol * np.abs(want))
        index = np.unravel_index(int(np.argmax(excess)), excess.shape) if excess.size else ()
        # Relative error means something only where the reference is not ~0.
        meaningful = np.abs(want) > atol
        rel_err = abs_err[meaningful] / np.abs(want[meaningful])
        if excess.size and excess[index] > 0:
            failures.append(spec.name)
        if excess.size and excess[index] > worst_excess:
            worst_excess = excess[index]
            worst = VerificationResult(
                ok=True,
                max_abs_error=float(abs_err.max()),
                max_rel_error=float(rel_err.max()) if rel_err.size else None,
                worst_output=spec.name,
                worst_index=tuple(int(i) for i in index),
            )
    if failures:
        return VerificationResult(
            ok=False,
            max_abs_error=worst.max_abs_error,
            max_rel_error=worst.max_rel_error,
            worst_output=worst.worst_output,
            worst_index=worst.worst_index,
            detail=f"outputs out of tolerance: {', '.join(failures)}",
        )
    return worst
