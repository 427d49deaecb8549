"""Side-by-side timing of mlirtune and numpy (one BLAS thread) for one workload, in one run.

Rounds alternate (ours, numpy, ours, numpy, ...) so that machine drift hits both sides alike,
and the sides' order rotates every round (`rotating_rounds`); each side's time is the median of
its per-round medians. Each row also gives the range of the rounds' own ratios: how far the
machine's drift moved the ratio within the run.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

from mlirtune.bench.baseline import measure_numpy
from mlirtune.interfaces.bench import BenchOptions


@dataclass(frozen=True)
class Comparison:
    """Median seconds per call for both sides, and what they mean in GFLOP/s (and, for
    our side, in GB/s of the bytes one call reads and writes)."""

    label: str
    ours_s: float
    numpy_s: float
    flops: int
    parameters: dict
    round_ratios: tuple[float, ...]  # numpy's time over ours in each round
    moved: int = 0

    @property
    def ratio(self) -> float:
        return self.numpy_s / self.ours_s

    @property
    def ours_gflops(self) -> float:
        return self.flops / self.ours_s / 1e9

    @property
    def ours_gbs(self) -> float:
        return self.moved / self.ours_s / 1e9

    def row(self) -> str:
        return (
            f"{self.label:34s} {self.ours_gflops:9.1f} "
            f"{self.flops / self.numpy_s / 1e9:9.1f} {self.ratio:7.2f}x "
            f"({min(self.round_ratios):.2f}-{max(self.round_ratios):.2f})"
        )


HEADER = f"{'workload':34s} {'ours':>9s} {'numpy':>9s} {'ratio':>8s} (rounds)   (GFLOP/s)"


def rotating_rounds(sides: dict[str, Callable[[], float]], rounds: int) -> dict[str, list[float]]:
    """Each side's measurement (seconds per call) in each of `rounds` rounds, the sides' order
    rotating every round: what a side leaves behind (BLAS threads still spinning after a
    call, its lines in the caches) then falls on every side alike. Measured on a 2-core VM,
    the same two-thread kernel timed right after numpy's two-thread matmul ran 25% slower
    than in second place."""
    names = list(sides)
    times: dict[str, list[float]] = {name: [] for name in names}
    for round_index in range(rounds):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            times[name].append(sides[name]())
    return times


def compare(
    engine,
    workload,
    label: str,
    rounds: int = 3,
    max_time_s: float = 1.0,
    parameters: dict | None = None,
) -> Comparison:
    """Verify once, then alternate kernel and numpy measurements for `rounds` rounds;
    `parameters` are explicit slot values (default: the pipeline's own choice)."""
    options = BenchOptions(max_time_s=max_time_s)
    used: dict = {}

    def ours() -> float:
        result = engine.benchmark(workload, parameters, options=options)
        used.update(result.parameters)
        return result.median_s

    times = rotating_rounds(
        {"ours": ours, "numpy": lambda: measure_numpy(workload, options).median_s}, rounds
    )
    complexity = workload.get_complexity()
    return Comparison(
        label,
        statistics.median(times["ours"]),
        statistics.median(times["numpy"]),
        complexity.flops,
        used,
        tuple(theirs / ours for ours, theirs in zip(times["ours"], times["numpy"], strict=True)),
        complexity.bytes_read + complexity.bytes_written,
    )
