"""What a tuning run found: each candidate with its outcome, ranked, and the report the
CLI prints and `--json` writes."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mlirtune.tune.db import Verdict
from mlirtune.tune.outcome import Outcome
from mlirtune.tune.problem import Config, TuningProblem
from mlirtune.tune.strategies import config_key


@dataclass
class Candidate:
    """A config and its outcome, as ranked."""

    config: Config
    outcome: Outcome


@dataclass
class TuneReport:
    """Everything a tuning run found, for the table and `--json`."""

    problem: TuningProblem
    strategy: str
    evaluated: list[Candidate]
    resumed: int
    baseline_first: Outcome
    baseline_last: Outcome
    race: dict[tuple, list[float]]
    winner: Config | None
    verdict: Verdict
    warnings: list[str]
    seconds: dict[str, float] = field(default_factory=dict)  # wall time of each stage

    @property
    def failed_by_status(self) -> dict[str, int]:
        return dict(Counter(c.outcome.status for c in self.evaluated if not c.outcome.ok))

    @property
    def baseline_samples(self) -> list[float]:
        return self.samples_of(self.problem.baseline)

    def samples_of(self, config: Config) -> list[float]:
        """The config's race samples, else its samples from the search (the baseline's from
        its first measurement)."""
        if config_key(config) in self.race:
            return self.race[config_key(config)]
        if config == self.problem.baseline:
            return list(self.baseline_first.samples)
        return list(next(c.outcome.samples for c in self.evaluated if c.config == config))

    @property
    def fastest_candidate(self) -> Config | None:
        """The fastest config other than the baseline, whether or not it was declared the
        winner (by its race samples when it was raced)."""
        others = [c.config for c in rank(self.evaluated) if c.config != self.problem.baseline]
        if not others:
            return None
        return min(
            others[: max(1, len(self.race) - 1)], key=lambda c: np.median(self.samples_of(c))
        )

    @property
    def best(self) -> Config:
        """The declared winner, or the baseline when none beat it beyond the noise."""
        return self.winner or self.problem.baseline

    @property
    def speedup(self) -> float:
        return float(np.median(self.baseline_samples) / np.median(self.samples_of(self.best)))

    def gflops(self, config: Config) -> float:
        return self.problem.flops / np.median(self.samples_of(config)) / 1e9

    def to_json(self) -> dict[str, Any]:
        problem = self.problem
        return {
            "workload": problem.workload.describe(),
            "pipeline": problem.key.pipeline,
            "strategy": self.strategy,
            "space_size": problem.space.count(),
            "evaluated": len(self.evaluated),
            "resumed": self.resumed,
            "failed_by_status": self.failed_by_status,
            "baseline_params": problem.baseline,
            "baseline_gflops": self.gflops(problem.baseline),
            "best_params": self.best,
            "best_gflops": self.gflops(self.best),
            "winner": "candidate" if self.winner else "baseline",
            "speedup_vs_baseline": self.speedup,
            "baseline_drift": relative_change(self.baseline_first, self.baseline_last),
            "warnings": self.warnings,
            "seconds": self.seconds,
        }


def rank(candidates: list[Candidate]) -> list[Candidate]:
    """The candidates that ran correctly, fastest (lowest median) first."""
    return sorted((c for c in candidates if c.outcome.ok), key=lambda c: c.outcome.median_s)


def relative_change(first: Outcome, last: Outcome) -> float:
    """How much the baseline's median moved from its first measurement to its last."""
    return float(last.median_s / first.median_s - 1.0)
