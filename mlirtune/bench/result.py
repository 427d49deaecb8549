"""Benchmark results: every raw sample plus robust statistics and throughput."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from mlirtune.bench.stats import median_ci
from mlirtune.workload import Complexity


@dataclass(frozen=True)
class Statistics:
    """Summary of per-call times in seconds."""

    median: float
    min: float
    iqr: float
    ci_low: float
    ci_high: float
    cv: float
    count: int

    @classmethod
    def of(cls, seconds: np.ndarray) -> Statistics:
        q1, q3 = np.percentile(seconds, [25, 75])
        low, high = median_ci(seconds)
        mean = float(np.mean(seconds))
        return cls(
            median=float(np.median(seconds)),
            min=float(np.min(seconds)),
            iqr=float(q3 - q1),
            ci_low=low,
            ci_high=high,
            cv=float(np.std(seconds) / mean) if mean > 0 else 0.0,
            count=len(seconds),
        )


@dataclass(frozen=True)
class BenchResult:
    """One benchmark: raw samples (s/call), statistics and throughput at the median."""

    workload: dict[str, Any]
    parameters: dict[str, Any]
    samples: list[float]
    stats: Statistics
    complexity: Complexity
    verified: bool
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_samples(cls, *, workload, parameters, seconds, complexity, verified, extra=None):
        if len(seconds) == 0 or float(np.median(seconds)) <= 0:
            raise ValueError("a benchmark needs positive samples")
        return cls(
            workload=workload,
            parameters=dict(parameters),
            samples=[float(s) for s in seconds],
            stats=Statistics.of(np.asarray(seconds, dtype=np.float64)),
            complexity=complexity,
            verified=verified,
            extra=dict(extra or {}),
        )

    @property
    def median_s(self) -> float:
        return self.stats.median

    @property
    def gflops(self) -> float | None:
        """GFLOP/s at the median; None when the workload's FLOP count is unknown (a
        payload from a file), so nobody reads 0 GFLOP/s as a measurement."""
        if not self.complexity.flops:
            return None
        return self.complexity.flops / self.stats.median / 1e9

    @property
    def gbytes_per_s(self) -> float:
        moved = self.complexity.bytes_read + self.complexity.bytes_written
        return moved / self.stats.median / 1e9

    def to_json(self) -> dict[str, Any]:
        """The JSON shape printed by `mlirtune bench --json`."""
        return {
            "workload": self.workload,
            "parameters": self.parameters,
            "median_s": self.stats.median,
            "min_s": self.stats.min,
            "iqr_s": self.stats.iqr,
            "ci95_s": [self.stats.ci_low, self.stats.ci_high],
            "cv": self.stats.cv,
            "gflops": self.gflops,
            "gbytes_per_s": self.gbytes_per_s,
            "verified": self.verified,
            "complexity": asdict(self.complexity),
            "samples": self.samples,
            **self.extra,
        }
