"""Sampling and statistics, driven by synthetic timers (no wall-clock assertions)."""

from dataclasses import replace

import numpy as np

from mlirtune.bench import harness
from mlirtune.bench.harness import run_benchmark
from mlirtune.bench.result import statistics_of
from mlirtune.bench.stats import median_ci
from mlirtune.interfaces.bench import BenchOptions


def _fake_timer(per_call_ns: float, noise: float = 0.0, seed: int = 0):
    rng = np.random.default_rng(seed)
    calls = []

    def timer(iterations: int, samples: int) -> np.ndarray:
        calls.append((iterations, samples))
        jitter = 1 + noise * rng.standard_normal(samples)
        return (per_call_ns * iterations * jitter).astype(np.int64)

    return timer, calls


def test_batches_calls_to_reach_target_sample_length():
    timer, calls = _fake_timer(per_call_ns=1_000)  # 1 us per call
    samples = run_benchmark(timer, BenchOptions(target_sample_s=0.002))
    timed = [it for it, n in calls if n > 1]
    assert timed and all(it == 2000 for it in timed)
    np.testing.assert_allclose(samples, 1e-6)


def test_stops_early_when_ci_is_tight():
    timer, _ = _fake_timer(per_call_ns=50_000)
    samples = run_benchmark(timer, BenchOptions(min_samples=10, chunk=10))
    assert len(samples) == 10


def test_noisy_timer_keeps_sampling_until_cap():
    timer, _ = _fake_timer(per_call_ns=50_000, noise=0.5)
    samples = run_benchmark(timer, BenchOptions(max_samples=200, max_time_s=60, rel_ci=1e-6))
    assert len(samples) == 200


def test_statistics():
    values = np.array([1.0, 2.0, 3.0, 4.0, 100.0])
    stats = statistics_of(values)
    assert stats.median == 3.0 and stats.min == 1.0
    assert stats.iqr == 2.0
    assert stats.count == 5
    low, high = median_ci(values)
    assert low <= stats.median <= high


def test_the_median_ci_takes_the_binomial_order_statistics():
    values = np.arange(1.0, 11.0)[::-1]  # ten samples, unsorted
    # P(Bin(10, 1/2) <= 1) = 11/1024 is within 2.5%, P(<= 2) = 56/1024 is not: ranks 2 and 9.
    assert median_ci(values) == (2.0, 9.0)
    # Twenty: P(<= 5) = 2.07%, P(<= 6) = 5.77%: ranks 6 and 15.
    assert median_ci(np.arange(1.0, 21.0)) == (6.0, 15.0)
    # Five or fewer: no rank is that unlikely, so the whole range.
    assert median_ci(np.array([3.0, 1.0, 2.0])) == (1.0, 3.0)
    assert median_ci(np.array([4.0])) == (4.0, 4.0)


def test_the_median_ci_takes_thousands_of_samples():
    """A race of sub-microsecond calls pools thousands of samples: the ranks stay exact
    (a float times 2^n overflowed past 1023), near the normal approximation's."""
    low, high = median_ci(np.arange(5000.0))
    assert (low, high) == (2430.0, 4999.0 - 2430.0)


def test_the_median_ci_covers_the_median_as_often_as_it_says():
    rng = np.random.default_rng(7)
    for n in (6, 10, 25, 60):
        draws = rng.lognormal(0.0, 0.3, size=(4000, n))  # true median 1
        covered = np.mean([low <= 1.0 <= high for low, high in map(median_ci, draws)])
        assert 0.94 <= covered <= 0.99, (n, covered)


def test_slow_calls_take_fewer_samples_where_they_fill_the_time_cap():
    timer, calls = _fake_timer(per_call_ns=400_000_000)  # 0.4 s a call
    samples = run_benchmark(timer, BenchOptions(warmup_s=0.0, min_samples=10, max_time_s=1.0))
    assert len(samples) == 3  # 3 x 0.4 s fill the 1 s cap; never fewer than 3
    assert sum(n for it, n in calls if n > 1) == 3  # not 10 timed, 7 of them thrown away


def test_a_median_surely_above_the_cutoff_stops_at_the_minimum():
    timer, _ = _fake_timer(per_call_ns=50_000, noise=0.05)
    options = BenchOptions(max_samples=200, max_time_s=60, rel_ci=1e-6, min_samples=10)
    assert len(run_benchmark(timer, replace(options, cutoff_s=40e-6))) == 10


def test_a_median_near_the_cutoff_is_measured_in_full():
    timer, _ = _fake_timer(per_call_ns=50_000, noise=0.05)
    options = BenchOptions(max_samples=200, max_time_s=60, rel_ci=1e-6, min_samples=10)
    assert len(run_benchmark(timer, replace(options, cutoff_s=50e-6))) == 200


def test_a_verification_call_as_long_as_the_warm_up_is_the_warm_up():
    options = BenchOptions(warmup_s=0.03, min_samples=10, max_time_s=1.0)
    timer, calls = _fake_timer(per_call_ns=400_000_000)  # 0.4 s a call
    run_benchmark(timer, options, first_call_s=0.4)
    assert calls == [(1, 3)]  # three samples; no call made only to warm up
    timer, calls = _fake_timer(per_call_ns=50_000)  # a 50 us call is not the 30 ms warm-up
    run_benchmark(timer, options, first_call_s=50e-6)
    assert [n for _, n in calls[:2]] == [1, 1]  # single calls, doubling, until 30 ms


def test_sampling_stops_within_a_sample_of_the_time_cap(monkeypatch):
    """Past the minimum, each batch of samples is cut to what the cap leaves: 1.3 ms samples
    under a 30 ms cap stop at 24 (31.2 ms), where whole chunks of 10 ran to 30 (39 ms)."""
    clock = [0.0]
    monkeypatch.setattr(harness.time, "perf_counter", lambda: clock[0])

    def timer(iterations: int, samples: int) -> np.ndarray:
        noisy = 1.3e6 * (1 + 0.2 * np.random.default_rng(len(calls)).standard_normal(samples))
        calls.append(samples)
        clock[0] += samples * 1.3e-3  # the fake clock moves by the samples' nominal time
        return noisy.astype(np.int64)

    calls: list[int] = []
    options = BenchOptions(warmup_s=0.0, target_sample_s=0.001, min_samples=10, max_time_s=0.03)
    samples = run_benchmark(timer, options, first_call_s=1.3e-3)
    assert len(samples) == 24 and calls == [10, 10, 4]
