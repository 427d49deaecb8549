"""Robust statistics for timing samples (numpy only)."""

from __future__ import annotations

import numpy as np

BOOTSTRAP_RESAMPLES = 1000


def median_ci(samples: np.ndarray, confidence: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile-bootstrap confidence interval of the median."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(samples), size=(BOOTSTRAP_RESAMPLES, len(samples)))
    medians = np.median(samples[picks], axis=1)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(medians, [tail, 100 - tail])
    return float(low), float(high)
