"""Adaptive sampling around a native timer: warm up by time, batch calls into 1-5 ms samples,
stop once the bootstrap CI of the median is tight or the time cap is hit."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np

from mlirtune.bench.stats import median_ci
from mlirtune.interfaces.bench import BenchOptions

# timer(iterations, samples) -> int64 ns per sample, each covering `iterations` calls.
NativeTimer = Callable[[int, int], np.ndarray]


def run_benchmark(timer: NativeTimer, options: BenchOptions) -> np.ndarray:
    """Per-call times in seconds, one entry per sample."""
    per_call = _warm_up(timer, options.warmup_s)
    iterations = max(1, math.ceil(options.target_sample_s / max(per_call, 1e-9)))
    samples: list[float] = []
    start = time.perf_counter()
    while len(samples) < options.max_samples:
        count = min(options.chunk, options.max_samples - len(samples))
        samples.extend((timer(iterations, count) / iterations * 1e-9).tolist())
        if len(samples) < options.min_samples:
            continue
        if time.perf_counter() - start >= options.max_time_s:
            break
        low, high = median_ci(np.asarray(samples))
        if (high - low) / 2 <= options.rel_ci * float(np.median(samples)):
            break
    return np.asarray(samples)


def _warm_up(timer: NativeTimer, warmup_s: float) -> float:
    """Run single calls, doubling the batch, until `warmup_s` has passed; returns s/call."""
    iterations, spent, per_call = 1, 0.0, 0.0
    while True:
        elapsed = float(timer(iterations, 1)[0]) * 1e-9
        per_call = elapsed / iterations
        spent += elapsed
        if spent >= warmup_s:
            return per_call
        iterations = min(iterations * 2, max(1, math.ceil(warmup_s / max(per_call, 1e-9))))
