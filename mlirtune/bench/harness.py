"""Adaptive sampling around a native timer: warm up by time (or by the verification's call,
where it lasted as long), batch calls into 1-5 ms samples, stop once the 95% CI of the
median is tight, lies wholly above the cutoff, or the time cap is hit."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

import numpy as np

from mlirtune.bench.stats import median_ci
from mlirtune.contain import running
from mlirtune.interfaces.bench import BenchOptions
from mlirtune.interfaces.errors import VerificationError
from mlirtune.interfaces.verification import VerificationResult

# timer(iterations, samples) -> int64 ns per sample, each covering `iterations` calls.
NativeTimer = Callable[[int, int], np.ndarray]


def run_benchmark(
    timer: NativeTimer, options: BenchOptions, first_call_s: float | None = None
) -> np.ndarray:
    """Per-call times in seconds, one entry per sample. `first_call_s`: how long a call of
    this kernel already made on the timer's buffers took (the verification's, or a race's
    earlier round); where that call alone lasted the warm-up's time, it was the warm-up, and
    no call is repeated to warm up (at 2048^3, a whole call of 0.25 s: a quarter of a tuning
    candidate's time on the benchmark core)."""
    if first_call_s is not None and first_call_s >= options.warmup_s:
        per_call = first_call_s
    else:
        per_call = _warm_up(timer, options.warmup_s)
    iterations = max(1, math.ceil(options.target_sample_s / max(per_call, 1e-9)))
    minimum = _minimum_samples(options, per_call) if iterations == 1 else options.min_samples
    sample_s = iterations * per_call
    samples: list[float] = []
    start = time.perf_counter()
    while len(samples) < options.max_samples:
        if len(samples) < minimum:
            wanted = minimum - len(samples)
        else:  # no more than the time cap leaves: a whole chunk overran it by up to `chunk`
            left_s = options.max_time_s - (time.perf_counter() - start)
            wanted = max(1, math.ceil(left_s / max(sample_s, 1e-9)))
        count = min(options.chunk, wanted, options.max_samples - len(samples))
        samples.extend((timer(iterations, count) / iterations * 1e-9).tolist())
        if len(samples) < minimum:
            continue
        if time.perf_counter() - start >= options.max_time_s:
            break
        low, high = median_ci(np.asarray(samples))
        if (high - low) / 2 <= options.rel_ci * float(np.median(samples)):
            break
        if options.cutoff_s is not None and low > options.cutoff_s:
            break
    return np.asarray(samples)


# The fewest samples a measurement takes, whatever its time cap: a median and a spread.
FEWEST_SAMPLES = 3


def verify_then_time(
    timer: NativeTimer,
    verify: Callable[[], VerificationResult] | None,
    options: BenchOptions,
    timing_slot: AbstractContextManager[object] | None = None,
) -> tuple[np.ndarray, VerificationResult | None]:
    """One call, verified (`verify`, None: unchecked) and not a sample, then the timing in
    `timing_slot`: per-call seconds and the verification. A wrong result raises
    VerificationError before anything is timed."""
    verification, first_call_s = None, None
    if verify is not None:
        verification, first_call_s = verified_call(timer, verify)
    with timing_slot or nullcontext(), running("benchmark"):
        return run_benchmark(timer, options, first_call_s), verification


def verified_call(
    timer: NativeTimer, verify: Callable[[], VerificationResult]
) -> tuple[VerificationResult, float]:
    """One call, then `verify`: the verification and the call's seconds. A wrong result
    raises VerificationError."""
    with running("run"):
        call_s = float(timer(1, 1)[0]) * 1e-9
    verification = verify()
    if not verification.ok and not verification.skipped:
        raise VerificationError(verification.summary(), stage="verify")
    return verification, call_s


def _minimum_samples(options: BenchOptions, per_call_s: float) -> int:
    """For calls slower than a sample: `min_samples`, unless fewer calls (never under
    FEWEST_SAMPLES) already fill `max_time_s`. A 1 s call measured ten times would take
    ten times the cap (a tuning candidate of a 4096^3 GEMM, 13 s instead of 4)."""
    fitting = math.ceil(options.max_time_s / max(per_call_s, 1e-9))
    return max(1, min(options.min_samples, max(FEWEST_SAMPLES, fitting)))


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
