"""VerificationResult: the outcome of checking a kernel's outputs against a reference."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class VerificationResult:
    """Outcome of one check. `skipped` means no reference was available."""

    ok: bool
    skipped: bool = False
    max_abs_error: float = 0.0
    max_rel_error: float | None = 0.0  # None: no reference value is far enough from 0
    worst_output: str = ""
    worst_index: tuple[int, ...] = ()
    detail: str = ""

    def summary(self) -> str:
        if self.skipped:
            return f"verification skipped: {self.detail}"
        state = "passed" if self.ok else "FAILED"
        where = f" at {self.worst_output}{list(self.worst_index)}" if self.worst_output else ""
        relative = (
            f"{self.max_rel_error:.3e}"
            if self.max_rel_error is not None
            else "n/a (every reference value is within the absolute tolerance of 0)"
        )
        text = (
            f"verification {state}: max abs error {self.max_abs_error:.3e}, "
            f"max rel error {relative}{where}"
        )
        return f"{text}; {self.detail}" if self.detail else text
