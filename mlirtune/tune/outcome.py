"""What evaluating one candidate config produced: a status, and the samples when it ran."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

# Every status a candidate can end in. Only "ok" candidates have samples.
STATUSES = ("ok", "compile_error", "wrong_result", "timeout", "crash")


@dataclass(frozen=True)
class Outcome:
    """The result of one candidate: `status` is one of STATUSES; `detail` says why it failed
    (the error, or the signal that killed the worker); `samples` are seconds per call."""

    status: str
    detail: str = ""
    samples: tuple[float, ...] = ()
    flops: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}; expected one of {STATUSES}")
        if self.status == "ok" and not self.samples:
            raise ValueError("an ok outcome needs samples")

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def median_s(self) -> float | None:
        return float(np.median(self.samples)) if self.samples else None

    @property
    def gflops(self) -> float | None:
        """Throughput at the median, or None for a failed candidate."""
        median = self.median_s
        return self.flops / median / 1e9 if median and self.flops else None
