"""Numerical comparison against a reference, with dtype-aware tolerances."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from mlirtune.interfaces.verification import VerificationResult

if TYPE_CHECKING:
    from mlirtune.interfaces.dtype import DType
    from mlirtune.interfaces.workload import ArgSpec

# Elements compared at a time: the float64 temporaries of a chunk stay near 200 MiB however
# large the output (a 16384 x 16384 product would otherwise need 12 GiB to be checked).
CHUNK_ELEMENTS = 1 << 22


@dataclass
class _Errors:
    """The errors of one output, gathered chunk by chunk."""

    excess: float = -np.inf  # the largest |out - ref| - tolerance
    flat_index: int = 0  # where it is
    max_abs: float = 0.0
    max_rel: float | None = None  # None: no reference value is far from 0
    reference_nans: int = 0  # reference elements that are NaN: nothing checks against them

    @np.errstate(invalid="ignore")  # inf - inf and inf / inf are handled below
    def add(self, got: np.ndarray, want: np.ndarray, start: int, atol: float, rtol: float):
        """Fold in one chunk (float64 arrays starting at flat index `start`), with four
        temporaries of its size at most (the masks are a byte an element)."""
        error = got - want
        np.abs(error, out=error)
        error[got == want] = 0.0  # an infinity where the reference has the same one
        error[np.isnan(error)] = np.inf  # NaN means "never written"
        magnitude = np.abs(want)
        excess = magnitude * rtol
        excess += atol
        np.subtract(error, excess, out=excess)
        unknown = np.isnan(excess)  # a NaN reference value: a failure, never a pass
        if unknown.any():
            self.reference_nans += int(np.isnan(want).sum())
            excess[unknown] = np.inf
        worst = int(np.argmax(excess))
        if excess[worst] > self.excess:
            self.excess, self.flat_index = float(excess[worst]), start + worst
        del excess
        self.max_abs = max(self.max_abs, float(error.max()))
        # Relative error means something only where the reference is not ~0.
        meaningful = magnitude > atol
        if meaningful.any():
            relative = np.divide(error, magnitude, out=magnitude, where=meaningful)
            rel = float(np.max(relative, where=meaningful, initial=0.0))
            self.max_rel = rel if self.max_rel is None else max(self.max_rel, rel)


def absolute_tolerance(dtype: DType, accumulation_length: int) -> float:
    """The atol of `compare`: the dtype's per-term error, grown with the square root of
    the terms summed into each output."""
    return dtype.atol_per_term * max(1, accumulation_length) ** 0.5 * 10


def compare(
    outputs: list[tuple[ArgSpec, np.ndarray]],
    references: list[np.ndarray],
    accumulation_length: int,
) -> VerificationResult:
    """Check each output against its reference, with its dtype's tolerances."""
    return check_outputs(
        [
            (
                spec.name,
                actual,
                absolute_tolerance(spec.dtype, accumulation_length),
                spec.dtype.rtol,
            )
            for spec, actual in outputs
        ],
        references,
    )


def check_outputs(
    outputs: list[tuple[str, np.ndarray, float, float]], references: list[np.ndarray]
) -> VerificationResult:
    """Check each (name, output, atol, rtol) against its reference: |out - ref| <= atol +
    rtol * |ref|, in chunks of CHUNK_ELEMENTS."""
    worst = VerificationResult(ok=True)
    worst_excess = -np.inf
    failures = []
    for (name, actual, atol, rtol), expected in zip(outputs, references, strict=True):
        got_all, want_all = np.asarray(actual), np.asarray(expected)
        if got_all.shape != want_all.shape:
            return VerificationResult(
                ok=False, detail=f"{name}: shape {got_all.shape} != reference {want_all.shape}"
            )
        if got_all.size == 0:
            continue
        errors = _Errors()
        got_flat, want_flat = got_all.reshape(-1), want_all.reshape(-1)
        for start in range(0, got_flat.size, CHUNK_ELEMENTS):
            stop = start + CHUNK_ELEMENTS
            errors.add(
                got_flat[start:stop].astype(np.float64),
                want_flat[start:stop].astype(np.float64, copy=False),
                start,
                atol,
                rtol,
            )
        if errors.reference_nans:
            failures.append(f"{name} (its reference holds {errors.reference_nans} NaN)")
        elif errors.excess > 0:
            failures.append(name)
        if errors.excess > worst_excess:
            worst_excess = errors.excess
            index = np.unravel_index(errors.flat_index, got_all.shape)
            worst = VerificationResult(
                ok=True,
                max_abs_error=errors.max_abs,
                max_rel_error=errors.max_rel,
                worst_output=name,
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
