"""Robust statistics for timing samples (numpy only)."""

from __future__ import annotations

import functools
from fractions import Fraction

import numpy as np

# Resamples of a bootstrap (mlirtune.suite.compare: intervals of ratios of medians).
BOOTSTRAP_RESAMPLES = 1000


def median_ci(samples: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free confidence interval of the median: the order statistics at ranks
    j and n + 1 - j, where j is the largest rank whose binomial tail P(Bin(n, 1/2) < j)
    stays within (1 - confidence) / 2. Its coverage holds for any continuous distribution
    of the samples, it is the same on every call, and it costs one sort: a bootstrap of the
    median cost about 1 ms per call at 10 to 50 samples, which the benchmark harness paid
    between samples. With 5 samples or fewer it is their whole range, which then covers the
    median less often than asked."""
    ordered = np.sort(np.asarray(samples, dtype=np.float64))
    low = _lower_rank(len(ordered), confidence)
    return float(ordered[low]), float(ordered[len(ordered) - 1 - low])


@functools.cache
def _lower_rank(n: int, confidence: float) -> int:
    """The 0-based index of the interval's lower order statistic among n samples: the
    largest k with P(Bin(n, 1/2) <= k) <= (1 - confidence) / 2, else 0. Exact, in integers
    over 2^n and a fraction (a float times 2^n overflows past 1023 samples, which a race of
    sub-microsecond calls pools)."""
    allowed = Fraction(1 - confidence) / 2 * 2**n
    below, term, rank = 0, 1, 0  # term: C(n, k), updated in integers
    for k in range(n // 2):
        below += term
        if below > allowed:
            break
        rank = k
        term = term * (n - k) // (k + 1)
    return rank
