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
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from mlirtune.interfaces.errors import BaselineFailed, UsageError
from mlirtune.tune.db import TuningDB, Verdict
from mlirtune.tune.evaluator import EvaluatorSettings, IsolatedEvaluator
from mlirtune.tune.key import TuningKey
from mlirtune.tune.outcome import Outcome
from mlirtune.tune.problem import Config, TuningProblem
from mlirtune.tune.results import Candidate, TuneReport, rank, relative_change
from mlirtune.tune.strategies import Strategy, config_key, strategy_class

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
    # Evaluate on the nodes of the target's CPU class in a Ray cluster: its address, or
    # "local" to start one here (mlirtune.fleet; needs the ray extra). None: this machine.
    ray: str | None = None

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


class CandidateEvaluator(Protocol):
    """Where candidates run: this machine's worker processes (`IsolatedEvaluator`) or a Ray
    cluster's actors (`mlirtune.fleet.evaluator.FleetEvaluator`); a context manager."""

    worker_count: int

    def __enter__(self) -> CandidateEvaluator: ...

    def __exit__(self, *exc: object) -> None: ...

    def start_workers(self) -> None: ...

    def evaluate(
        self,
        next_config: Callable[[], Config | None],
        on_result: Callable[[Config, Outcome], None],
        cutoff: Callable[[Config], float | None] | None = None,
    ) -> None: ...

    def races(
        self,
        configs: list[Config],
        rounds: int,
        worker_indices: list[int],
        *,
        until_settled: bool = False,
    ) -> list[list[list[list[float]]] | Outcome]: ...


class TuneObserver(Protocol):
    """Progress callbacks (the CLI draws a progress bar from them)."""

    def phase(self, text: str) -> None: ...

    def result(self, config: Config, outcome: Outcome, resumed: bool) -> None: ...


def tune(
    problem: TuningProblem,
    options: TuneOptions,
    db: TuningDB,
    observer: TuneObserver | None = None,
    evaluator: CandidateEvaluator | None = None,
) -> TuneReport:
    """Search `problem`'s space within the budget and race the finalists, with `evaluator`
    (a fleet's, see mlirtune.fleet), else on the nodes `options.ray` names, else here."""
    options.check()
    strategy = strategy_class(options.strategy)(problem.space, options.seed)
    starters, warnings = starting_configs(problem, options, strategy)
    search = _Search(problem, options, db, strategy, observer or _Silent(), starters)
    with evaluator or _evaluator(problem, options, search.observer) as ev:
        ev.start_workers()  # every worker takes part: the baseline and a candidate at least
        search.observer.phase("search")
        ev.evaluate(search.next_config, search.on_result, search.cutoff_of)
        seconds = {"search": time.monotonic() - search.started}  # with both baselines
        baseline_first, baseline_last = search.baselines["first"], search.baselines["last"]
        drift = relative_change(baseline_first, baseline_last)
        if abs(drift) > options.drift_tolerance:
            warnings.append(
                f"the machine drifted: the baseline measured {drift:+.1%} between the start "
                "and the end of the search; rankings from the search are less reliable"
            )
        search.observer.phase("race")
        race, winner = race_finalists(problem, ev, db, rank(search.candidates), options)
        verdict = verdict_of(problem, race, winner, baseline_last)
        db.record_verdict(problem.key, verdict)
        seconds["race"] = time.monotonic() - search.started - seconds["search"]
    seconds["stop"] = time.monotonic() - search.started - seconds["search"] - seconds["race"]
    return TuneReport(
        problem, strategy.name, search.candidates, search.resumed, baseline_first,
        baseline_last, race, winner, verdict, warnings, seconds,
    )  # fmt: skip


def _evaluator(
    problem: TuningProblem, options: TuneOptions, observer: TuneObserver
) -> AbstractContextManager[CandidateEvaluator]:
    if options.ray is None:
        return IsolatedEvaluator(
            problem.workload, problem.target, problem.pipeline, options.evaluator
        )
    from mlirtune.fleet.evaluator import class_evaluator

    on_flight = getattr(observer, "in_flight", None)  # a progress display may show it
    return class_evaluator(problem, options.ray, options.evaluator, on_flight)


def starting_configs(
    problem: TuningProblem, options: TuneOptions, strategy: Strategy
) -> tuple[list[Config], list[str]]:
    """The configs tried before the strategy's: the given starters inside the space (a
    warning for each outside it), then, for a guided strategy, the baseline's neighbours:
    where a model's bound is one step off, the search finds it before the strategy spends
    the budget elsewhere (2048^3 on an Intel Xeon: in 60 candidates TPE had not reached the
    K block one step past the selector's, which measured 1.01x)."""
    starters = [c for c in options.starters if problem.space.contains(c)]
    warnings = [
        f"starter config {c} breaks {', '.join(problem.space.violations(c))}; skipped"
        for c in options.starters
        if c not in starters
    ]
    if strategy.neighbours_first:
        neighbours = problem.space.neighbours(problem.baseline)
        starters += [c for c in neighbours if c not in starters]
    return starters, warnings


class _Search:
    """The search's side of the evaluator's stream: which config is next, and what becomes
    of each result. The baseline is the stream's first job and, once the budget is spent,
    its last: it is timed first and last while the other workers compile candidates."""

    def __init__(
        self,
        problem: TuningProblem,
        options: TuneOptions,
        db: TuningDB,
        strategy: Strategy,
        observer: TuneObserver,
        starters: list[Config],
    ) -> None:
        self.problem, self.options, self.db = problem, options, db
        self.strategy, self.observer, self.starters = strategy, observer, starters
        # Two dicts of the same values: `evaluate` hands back the very dict it was given.
        self.first = problem.slot_values(problem.baseline)
        self.last = problem.slot_values(problem.baseline)
        self.candidates: list[Candidate] = []
        self.baselines: dict[str, Outcome] = {}
        self.cutoff = Cutoff(options.cutoff_factor)
        self.issued: list[dict[str, int]] = []
        self.asked = self.resumed = 0
        self.started = time.monotonic()

    def next_config(self) -> dict[str, int] | None:
        """The next slot values to evaluate: the baseline, the candidates (a result stored
        in the database is taken from there), the baseline again, then none."""
        if not self.issued:
            self.issued.append(self.first)
            return self.first
        while True:
            spent = _spent(self.options, self.asked, self.started)
            if spent or (config := next_proposal(self.starters, self.strategy)) is None:
                if len(self.issued) == 2:
                    return None
                self.issued.append(self.last)
                return self.last
            self.asked += 1
            stored = self.db.lookup(self.problem.key, self.problem.slot_values(config))
            if stored is None:
                return self.problem.slot_values(config)
            self.resumed += 1
            self.record(config, stored, from_db=True)

    def record(self, config: Config, outcome: Outcome, from_db: bool) -> None:
        self.candidates.append(Candidate(config, outcome))
        self.cutoff.saw(outcome)
        self.strategy.tell(config, outcome)
        self.observer.result(config, outcome, from_db)

    def on_result(self, slot_values: dict[str, int], outcome: Outcome) -> None:
        if slot_values is self.first or slot_values is self.last:
            which = "first" if slot_values is self.first else "last"
            self.baselines[which] = _baseline(self.problem, self.db, outcome)
            self.cutoff.saw(outcome)
            return
        self.db.record(self.problem.key, slot_values, outcome)
        self.record(self.problem.config_of(slot_values), outcome, from_db=False)

    def cutoff_of(self, slot_values: dict[str, int]) -> float | None:
        """The baseline is always measured in full: its drift check compares its two
        medians."""
        baseline = slot_values is self.first or slot_values is self.last
        return None if baseline else self.cutoff.seconds()


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


def next_proposal(starters: list[Config], strategy) -> Config | None:
    """The next starter config, else the strategy's next proposal (None: nothing left)."""
    return starters.pop(0) if starters else strategy.ask()


def _baseline(problem: TuningProblem, db: TuningDB, outcome: Outcome) -> Outcome:
    """Store a baseline measurement; a failed baseline ends the run."""
    db.record(problem.key, problem.slot_values(problem.baseline), outcome, role="baseline")
    if not outcome.ok:
        raise BaselineFailed(
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
    return judge_race(problem, db, problem.key, contenders, result)


def judge_race(
    problem: TuningProblem,
    db: TuningDB,
    key: TuningKey,
    contenders: list[Config],
    result: list[list[list[float]]],
) -> tuple[dict[tuple, list[float]], Config | None]:
    """Store each contender's race samples (per config, per round; the baseline first)
    under `key`, and pick the winner: the fastest by median of the finalists that beat the
    baseline in every round (see `race_finalists`), else None."""
    baseline, finalists = contenders[0], contenders[1:]
    flops = problem.flops
    race, round_medians = {}, {}
    for config, rounds in zip(contenders, result, strict=True):
        pooled = [s for samples in rounds for s in samples]
        race[config_key(config)] = pooled
        round_medians[config_key(config)] = np.asarray([np.median(r) for r in rounds])
        outcome = Outcome("ok", samples=tuple(pooled), flops=flops)
        db.record(key, problem.slot_values(config), outcome, role="race")
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
        gflops=problem.flops / median / 1e9,
    )


class _Silent:
    def phase(self, text: str) -> None:
        pass

    def result(self, config: Config, outcome: Outcome, resumed: bool) -> None:
        pass
