"""The tuning loop: baseline, search, baseline again, then a race of the finalists.

Each stage is callable on its own (`generate` in `problem.py`, the evaluator's `evaluate`
and `race`, `rank` here); `tune` is the composition the CLI runs. Every outcome is
committed to the database as soon as it is known, and a config already stored under the
same key is taken from there instead of being measured again, so re-running an interrupted
command resumes it. The search asks the strategy once the starters (spec-library entries)
and, for a guided strategy, the baseline's neighbours in the space (`SearchSpace.neighbours`)
have been evaluated.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from mlirtune.interfaces.errors import MlirtuneError, UsageError
from mlirtune.tune.db import TuningDB, Verdict
from mlirtune.tune.evaluator import EvaluatorSettings, IsolatedEvaluator
from mlirtune.tune.outcome import Outcome
from mlirtune.tune.problem import Config, TuningProblem
from mlirtune.tune.strategies import config_key, strategy_class

# Worker processes the final race's rounds are split over (see `race_finalists`).
RACE_PROCESSES = 2
# A candidate's timing stops early once its median is surely (the whole CI) this many times
# the fastest median so far: it needs a rank, and the finalists are raced again anyway.
# Most of a search's candidates are that slow; on a 256^3 matmul, timing them in full was
# a third of each candidate's cost.
CUTOFF_FACTOR = 1.2


@dataclass(frozen=True)
class TuneOptions:
    """Budget (candidates and/or seconds), strategy and the final race."""

    budget: int | None = None
    time_limit_s: float | None = None
    strategy: str = "tpe"
    seed: int = 0
    finalists: int = 3
    race_rounds: int = 5
    drift_tolerance: float = 0.03  # baseline first vs last, relative
    cutoff_factor: float | None = CUTOFF_FACTOR  # None: time every candidate in full
    starters: tuple[Config, ...] = ()  # evaluated first, e.g. a spec library's entry
    evaluator: EvaluatorSettings = field(default_factory=EvaluatorSettings)

    def check(self) -> None:
        if self.budget is None and self.time_limit_s is None:
            raise UsageError("give a budget (--budget N) and/or --time-limit S", stage="tune")
        if self.budget is not None and self.budget <= 0:
            raise UsageError(f"--budget must be a positive number, not {self.budget}", stage="tune")
        if self.time_limit_s is not None and self.time_limit_s <= 0:
            raise UsageError(
                f"--time-limit must be positive, not {self.time_limit_s}", stage="tune"
            )
        if self.cutoff_factor is not None and self.cutoff_factor < 1:
            raise UsageError(
                f"cutoff_factor must be at least 1 (or None), not {self.cutoff_factor}: "
                "below 1 it would cut short candidates faster than the fastest so far",
                stage="tune",
            )
        strategy_class(self.strategy)


class TuneObserver(Protocol):
    """Progress callbacks (the CLI draws a progress bar from them)."""

    def phase(self, text: str) -> None: ...

    def result(self, config: Config, outcome: Outcome, resumed: bool) -> None: ...


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
        return (
            self.problem.workload.get_complexity().flops / np.median(self.samples_of(config)) / 1e9
        )

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
            "baseline_drift": _relative_change(self.baseline_first, self.baseline_last),
            "warnings": self.warnings,
            "seconds": self.seconds,
        }


def rank(candidates: list[Candidate]) -> list[Candidate]:
    """The candidates that ran correctly, fastest (lowest median) first."""
    return sorted((c for c in candidates if c.outcome.ok), key=lambda c: c.outcome.median_s)


def tune(
    problem: TuningProblem,
    options: TuneOptions,
    db: TuningDB,
    observer: TuneObserver | None = None,
) -> TuneReport:
    """Search `problem`'s space within the budget and race the finalists."""
    options.check()
    strategy = strategy_class(options.strategy)(problem.space, options.seed)
    observer = observer or _Silent()
    key, warnings = problem.key, []
    candidates: list[Candidate] = []
    resumed = 0
    settings = options.evaluator
    first, last = problem.slot_values(problem.baseline), problem.slot_values(problem.baseline)
    baselines: dict[str, Outcome] = {}
    with IsolatedEvaluator(problem.workload, problem.target, problem.pipeline, settings) as ev:
        ev.start_workers()  # every worker takes part: the baseline and a candidate at least
        started = time.monotonic()
        asked = 0
        starters = [c for c in options.starters if problem.space.contains(c)]
        warnings += [
            f"starter config {c} breaks {', '.join(problem.space.violations(c))}; skipped"
            for c in options.starters
            if c not in starters
        ]
        # Then, for a guided strategy, the baseline's neighbours: where a model's bound is
        # one step off, the search finds it before the strategy spends the budget elsewhere
        # (2048^3 on an Intel Xeon: in 60 candidates TPE had not reached the K block one
        # step past the selector's, which measured 1.01x).
        if strategy.neighbours_first:
            neighbours = problem.space.neighbours(problem.baseline)
            starters += [c for c in neighbours if c not in starters]
        # The baseline is the stream's first job and, once the budget is spent, its last: it
        # is timed first and last while the other workers compile candidates.
        issued: list[dict[str, int]] = []

        def next_config() -> dict[str, int] | None:
            nonlocal asked, resumed
            if not issued:
                issued.append(first)
                return first
            while True:
                if _spent(options, asked, started) or (config := _ask(starters, strategy)) is None:
                    if len(issued) == 2:
                        return None
                    issued.append(last)
                    return last
                asked += 1
                stored = db.lookup(key, problem.slot_values(config))
                if stored is None:
                    return problem.slot_values(config)
                resumed += 1
                record(config, stored, from_db=True)

        cutoff = Cutoff(options.cutoff_factor)

        def record(config: Config, outcome: Outcome, from_db: bool) -> None:
            candidates.append(Candidate(config, outcome))
            cutoff.saw(outcome)
            strategy.tell(config, outcome)
            observer.result(config, outcome, from_db)

        def on_result(slot_values: dict[str, int], outcome: Outcome) -> None:
            if slot_values is first or slot_values is last:  # `evaluate` hands back our dict
                baselines["first" if slot_values is first else "last"] = _baseline(
                    problem, db, outcome
                )
                cutoff.saw(outcome)
                return
            db.record(key, slot_values, outcome)
            record(problem.config_of(slot_values), outcome, from_db=False)

        def cutoff_of(slot_values: dict[str, int]) -> float | None:
            """The baseline is always measured in full: its drift check compares its two
            medians."""
            return None if slot_values is first or slot_values is last else cutoff.seconds()

        observer.phase("search")
        ev.evaluate(next_config, on_result, cutoff_of)
        seconds = {"search": time.monotonic() - started}  # with both baselines
        baseline_first, baseline_last = baselines["first"], baselines["last"]
        drift = _relative_change(baseline_first, baseline_last)
        if abs(drift) > options.drift_tolerance:
            warnings.append(
                f"the machine drifted: the baseline measured {drift:+.1%} between the start "
                "and the end of the search; rankings from the search are less reliable"
            )
        observer.phase("race")
        race, winner = race_finalists(problem, ev, db, rank(candidates), options)
        verdict = verdict_of(problem, race, winner, baseline_last)
        db.record_verdict(key, verdict)
        seconds["race"] = time.monotonic() - started - seconds["search"]
    seconds["stop"] = time.monotonic() - started - seconds["search"] - seconds["race"]
    return TuneReport(
        problem, strategy.name, candidates, resumed, baseline_first, baseline_last, race,
        winner, verdict, warnings, seconds,
    )  # fmt: skip


@dataclass
class Cutoff:
    """The time per call past which a candidate's timing may stop (`BenchOptions.cutoff_s`):
    `factor` times the fastest median seen so far (kept as outcomes come, not recomputed
    from all of them per candidate)."""

    factor: float | None
    fastest_s: float = math.inf

    def saw(self, outcome: Outcome) -> None:
        if outcome.ok:
            self.fastest_s = min(self.fastest_s, outcome.median_s)

    def seconds(self) -> float | None:
        """None without a factor, or before the first median."""
        if self.factor is None or math.isinf(self.fastest_s):
            return None
        return self.factor * self.fastest_s


def _spent(options: TuneOptions, asked: int, started: float) -> bool:
    """Whether the budget (candidates or seconds) is used up."""
    if options.budget is not None and asked >= options.budget:
        return True
    return bool(options.time_limit_s and time.monotonic() - started > options.time_limit_s)


def _ask(starters: list[Config], strategy) -> Config | None:
    """The next starter config, else the strategy's next proposal (None: nothing left)."""
    return starters.pop(0) if starters else strategy.ask()


def _baseline(problem: TuningProblem, db: TuningDB, outcome: Outcome) -> Outcome:
    """Store a baseline measurement; a failed baseline ends the run."""
    db.record(problem.key, problem.slot_values(problem.baseline), outcome, role="baseline")
    if not outcome.ok:
        raise MlirtuneError(
            f"the baseline config {problem.baseline} failed ({outcome.status}): "
            f"{outcome.detail}; fix the pipeline's defaults before tuning",
            stage="tune",
        )
    return outcome


def race_finalists(problem, ev, db, ranked: list[Candidate], options: TuneOptions):
    """Re-measure the finalists interleaved with the baseline, the rounds split over
    RACE_PROCESSES worker processes: one process's code and data layout can make a config
    consistently slower or faster there than elsewhere (measured: up to 10% for one mlp
    config). A finalist passes if it beat the baseline in every round: a one-sided sign test
    at p = 2^-rounds, which unlike a CI over pooled samples accounts for the machine's drift
    from round to round. The winner is the fastest (by its median over all rounds) of those
    that pass; judging only the fastest finalist threw away a pass whenever a faster median
    had lost a round (4096^3 f32: +2.6% in all 6 rounds, kept out by a +3.6% median that
    lost one). Both processes race at once (one compiles while the other measures), and
    rounds stop once every finalist has lost one, which settles the verdict (no winner)
    whatever later rounds would show."""
    baseline = problem.baseline
    finalists = [c.config for c in ranked if c.config != baseline][: options.finalists]
    if not finalists:
        return {}, None
    contenders = [baseline, *finalists]
    processes = min(RACE_PROCESSES, ev.worker_count, options.race_rounds)
    per_process = -(-options.race_rounds // processes)  # ceil: at least race_rounds in all
    configs = [problem.slot_values(c) for c in contenders]
    parts = ev.races(configs, per_process, list(range(processes)), until_settled=True)
    if any(isinstance(part, Outcome) for part in parts):  # a race worker failed: no winner
        return {}, None
    result = [[r for part in parts for r in part[index]] for index in range(len(contenders))]
    flops = problem.workload.get_complexity().flops
    race, round_medians = {}, {}
    for config, rounds in zip(contenders, result, strict=True):
        pooled = [s for samples in rounds for s in samples]
        race[config_key(config)] = pooled
        round_medians[config_key(config)] = np.asarray([np.median(r) for r in rounds])
        outcome = Outcome("ok", samples=tuple(pooled), flops=flops)
        db.record(problem.key, problem.slot_values(config), outcome, role="race")
    base = round_medians[config_key(baseline)]
    passed = [c for c in finalists if (round_medians[config_key(c)] < base).all()]
    return race, min(passed, key=lambda c: np.median(race[config_key(c)]), default=None)


def verdict_of(problem: TuningProblem, race, winner: Config | None, baseline: Outcome) -> Verdict:
    """The run's choice with its race speedup (1.0 when the baseline stood unraced)."""
    chosen = winner or problem.baseline
    base = race.get(config_key(problem.baseline), baseline.samples)
    samples = race.get(config_key(chosen), base)
    median = float(np.median(samples))
    return Verdict(
        params=problem.slot_values(chosen),
        baseline=problem.slot_values(problem.baseline),
        won=winner is not None,
        speedup=float(np.median(base)) / median,
        median_s=median,
        gflops=problem.workload.get_complexity().flops / median / 1e9,
    )


def _relative_change(first: Outcome, last: Outcome) -> float:
    return float(last.median_s / first.median_s - 1.0)


class _Silent:
    def phase(self, text: str) -> None:
        pass

    def result(self, config: Config, outcome: Outcome, resumed: bool) -> None:
        pass
