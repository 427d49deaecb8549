"""Building benchmark results from raw samples: robust statistics and throughput."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mlirtune.bench.stats import median_ci
from mlirtune.interfaces.bench import BenchResult, Statistics
from mlirtune.interfaces.workload import Complexity


def statistics_of(seconds: np.ndarray) -> Statistics:
    """Median, min, IQR, a 95% CI of the median (`median_ci`) and the CV of per-call times."""
    q1, q3 = np.percentile(seconds, [25, 75])
    low, high = median_ci(seconds)
    mean = float(np.mean(seconds))
    return Statistics(
        median=float(np.median(seconds)),
        min=float(np.min(seconds)),
        iqr=float(q3 - q1),
        ci_low=low,
        ci_high=high,
        cv=float(np.std(seconds) / mean) if mean > 0 else 0.0,
        count=len(seconds),
    )


def bench_result(
    *,
    workload: dict[str, Any],
    parameters: dict[str, Any],
    seconds: Sequence[float] | np.ndarray,
    complexity: Complexity,
    verified: bool,
    extra: dict[str, Any] | None = None,
) -> BenchResult:
    """A BenchResult keeping every sample; refuses an empty or non-positive measurement."""
    if len(seconds) == 0 or float(np.median(seconds)) <= 0:
        raise ValueError("a benchmark needs positive samples")
    return BenchResult(
        workload=workload,
        parameters=dict(parameters),
        samples=[float(s) for s in seconds],
        stats=statistics_of(np.asarray(seconds, dtype=np.float64)),
        complexity=complexity,
        verified=verified,
        extra=dict(extra or {}),
    )
