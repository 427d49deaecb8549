"""Side-by-side timing of mlirtune and numpy (one BLAS thread) for one workload, in one run.

Rounds alternate (ours, numpy, ours, numpy, ...) so that machine drift hits both sides alike;
each side's time is the median of its per-round medians.
"""

from __future__ import annotations

import statistics
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
    moved: int = 0

    @property
    def ratio(self) -> float:
        return self.numpy_s / self.ours_s

    @property
    def ours_gbs(self) -> float:
        return self.moved / self.ours_s / 1e9

    def row(self) -> str:
        return (
            f"{self.label:34s} {self.flops / self.ours_s / 1e9:9.1f} "
            f"{self.flops / self.numpy_s / 1e9:9.1f} {self.ratio:7.2f}x"
        )


HEADER = f"{'workload':34s} {'ours':>9s} {'numpy':>9s} {'ratio':>8s}   (GFLOP/s)"


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
    ours, theirs, used = [], [], {}
    for _ in range(rounds):
        result = engine.benchmark(workload, parameters, options=options)
        ours.append(result.median_s)
        used = result.parameters
        theirs.append(measure_numpy(workload, options).median_s)
    complexity = workload.get_complexity()
    return Comparison(
        label,
        statistics.median(ours),
        statistics.median(theirs),
        complexity.flops,
        used,
        complexity.bytes_read + complexity.bytes_written,
    )
