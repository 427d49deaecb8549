"""Benchmark value types: how to measure (BenchOptions) and what came out (BenchResult)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the workload module imports MLIR; a GPU runner without it uses this one
    from mlirtune.interfaces.workload import Complexity


@dataclass(frozen=True)
class BenchOptions:
    """How long and how precisely to measure."""

    warmup_s: float = 0.03
    target_sample_s: float = 0.002
    min_samples: int = 10  # fewer (at least 3) where calls slower than a sample fill max_time_s
    max_samples: int = 1000
    max_time_s: float = 1.0
    rel_ci: float = 0.01  # stop when the 95% CI half-width is within 1% of the median
    chunk: int = 10  # samples per native call
    # Stop as soon as the median is surely slower than this many seconds per call (the
    # whole CI above it): a tuning candidate that cannot be among the fastest needs a rank,
    # not a precise time.
    cutoff_s: float | None = None


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
