"""`mlirtune specs adapt`: carry the shipped spec libraries over to this host's CPU class.

Compiles apply only the entries tuned on this host's CPU class (see specset.py). `adapt`
takes each workload that the shipped libraries for this ISA hold an entry for, of any
class, and measures on this host the config each class chose for it against the parameter
selector's (the untuned compile). Every candidate is compiled, verified and timed by the
tuner's isolated evaluator, in worker processes, so a failure costs that candidate only;
the survivors are then raced against the selector in interleaved rounds
(`tuner.race_finalists`: the fastest of those that beat the selector in every round wins).
The verdict is written, as an entry tuned on this host, into the user's library, which is
saved after each workload; the measurements go to the tuning database like a tuning run's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlir import ir

from mlirtune.curation.export import add_verdict, library_at, rebuild_workload
from mlirtune.interfaces.errors import MlirtuneError, UsageError
from mlirtune.interfaces.target import Target
from mlirtune.ir.context import new_context
from mlirtune.specs.library import SpecLibrary
from mlirtune.specs.sources import fetch, spec_config_dir
from mlirtune.specs.specset import default_library_paths
from mlirtune.tune.db import TuningDB, Verdict
from mlirtune.tune.evaluator import EvaluatorSettings, IsolatedEvaluator
from mlirtune.tune.key import TuningKey
from mlirtune.tune.problem import Config, TuningProblem, generate
from mlirtune.tune.results import Candidate, rank
from mlirtune.tune.starters import tuned_config
from mlirtune.tune.tuner import TuneOptions, race_finalists, verdict_of
from mlirtune.tune.worker import RACE_BENCH

SELECTOR = "selector"  # the name of the parameter selector's candidate
MIN_ROUNDS = 2  # race rounds however short --max-time is (one process's rounds each)


@dataclass
class AdaptJob:
    """One workload of the shipped libraries, with the config each CPU class tuned for it."""

    entry: str  # the entry's name (the same in every class's library)
    workload: dict[str, Any]  # the stored workload options ({"name": ..., ...})
    pipeline: str | None
    configs: dict[str, dict[str, int]] = field(default_factory=dict)  # class -> slot values

    def classes(self, here: str) -> list[str]:
        """The CPU classes with a config for this workload: `here` first, then by name."""
        return sorted(self.configs, key=lambda name: (name != here, name))

    @property
    def label(self) -> str:
        """The workload as the command line writes it: `matmul K=256 M=256 N=256`."""
        dims = " ".join(f"{k}={v}" for k, v in self.workload.items() if k[:1].isupper())
        dtype = self.workload.get("dtype")
        return " ".join(p for p in (self.workload["name"], dims, dtype and f"dtype={dtype}") if p)


@dataclass
class Contender:
    """A config raced for a job and who proposed it: the selector and/or CPU classes."""

    sources: list[str]
    config: Config  # knob values
    status: str = "ok"  # else why it was dropped: "invalid" or the evaluator's status
    detail: str = ""

    @property
    def name(self) -> str:
        return "+".join(self.sources)


@dataclass
class AdaptResult:
    """What racing one job gave: the contenders, the verdict and the entry written."""

    job: AdaptJob
    contenders: list[Contender] = field(default_factory=list)
    key: TuningKey | None = None  # this host's key of the workload, once planned
    winner: Contender | None = None
    verdict: Verdict | None = None
    entry: str | None = None  # the entry written into the library
    error: str | None = None  # why nothing was written
    note: str | None = None  # something to know about the verdict


@dataclass(frozen=True)
class AdaptOptions:
    """How long each candidate is timed, and how candidates are evaluated."""

    max_time_s: float = 0.2  # 5 rounds: the tuner's final race
    evaluator: EvaluatorSettings = field(default_factory=EvaluatorSettings)

    @property
    def rounds(self) -> int:
        """Race rounds: the time per candidate, in rounds of one race measurement each.
        A candidate must win every round, so more time asks for a more consistent lead."""
        return max(MIN_ROUNDS, round(self.max_time_s / RACE_BENCH.max_time_s))


def default_output(target: Target) -> Path:
    """`$XDG_CONFIG_HOME/mlirtune/specs/adapted-<class>.mlir`: a library every compile on
    this host loads (see sources.configured_specs)."""
    return spec_config_dir() / f"adapted-{target.hardware_class()}.mlir"


def shipped_jobs(target: Target, workloads: Sequence[str] = ()) -> list[AdaptJob]:
    """One job per workload and pipeline that an entry of the libraries shipped for
    `target`'s ISA was tuned on (any CPU class), in library order; `workloads` keeps only
    those workload names. Entries without a recorded workload or config are left out."""
    paths = default_library_paths(target)
    if not paths:
        raise UsageError(
            f"no spec library is shipped for this target ({target!r}); nothing to adapt",
            stage="specs",
        )
    jobs: dict[tuple[str, str | None], AdaptJob] = {}
    shipped: set[str] = set()
    with new_context(), ir.Location.unknown():
        for path in paths:
            library = SpecLibrary.parse(fetch(str(path)))
            for entry in library.entries:
                options = entry.metadata.get("workload")
                if not isinstance(options, dict) or entry.config is None:
                    continue
                shipped.add(options["name"])
                if workloads and options["name"] not in workloads:
                    continue
                tuned_on = entry.metadata.get("target", {}).get("class")
                tuned_on = tuned_on or library.metadata.get("target_class") or library.name
                key = (json.dumps(options, sort_keys=True), entry.pipeline)
                job = jobs.setdefault(key, AdaptJob(entry.name, options, entry.pipeline))
                job.configs.setdefault(tuned_on, dict(entry.config))
    if not jobs:
        raise UsageError(
            f"no shipped entry was tuned on workload(s) {', '.join(workloads)}; the shipped "
            f"libraries hold {', '.join(sorted(shipped)) or 'none'}",
            stage="specs",
        )
    return list(jobs.values())


def adapt(
    jobs: Sequence[AdaptJob],
    target: Target,
    output: str | Path,
    db: TuningDB,
    options: AdaptOptions,
    *,
    on_start: Callable[[AdaptJob], None] | None = None,
    on_result: Callable[[AdaptResult], None] | None = None,
) -> list[AdaptResult]:
    """Race each job on `target` and write its verdict into the library at `output`
    (created if missing, its other entries kept), saved atomically after each job so that
    an interrupted run keeps the jobs it finished."""
    with new_context(), ir.Location.unknown():
        library_at(output, target)  # fail now, not after the first race, if it is unusable
    results = []
    for job in jobs:
        if on_start is not None:
            on_start(job)
        result = adapt_job(job, target, db, options)
        if result.verdict is not None:
            result.entry = _write(output, result, target)
        results.append(result)
        if on_result is not None:
            on_result(result)
    return results


def adapt_job(job: AdaptJob, target: Target, db: TuningDB, options: AdaptOptions) -> AdaptResult:
    """Measure one job's candidates on `target`; an error is reported, never raised."""
    result = AdaptResult(job)
    try:
        workload = rebuild_workload(job.workload)
        problem = generate(workload, target, job.pipeline, settings=options.evaluator)
        result.key = problem.key
        result.contenders = contenders(problem, job)
        _race(problem, result, db, options)
    except MlirtuneError as error:
        result.error = str(error)
    return result


def contenders(problem: TuningProblem, job: AdaptJob) -> list[Contender]:
    """The selector's config, then each class's (this host's class first): classes whose
    configs coincide share one contender, and a config outside this target's search space
    is marked invalid (the tuner would never propose it here)."""
    found = [Contender([SELECTOR], problem.baseline)]
    for tuned_on in job.classes(problem.target.hardware_class()):
        config = tuned_config(problem, job.configs[tuned_on])
        same = next((c for c in found if c.config == config), None)
        if same is not None:
            same.sources.append(tuned_on)
            continue
        contender = Contender([tuned_on], config)
        broken = problem.space.violations(config)
        if broken:
            contender.status, contender.detail = "invalid", f"breaks {', '.join(broken)} here"
        found.append(contender)
    return found


def _race(problem: TuningProblem, result: AdaptResult, db: TuningDB, options: AdaptOptions):
    """Evaluate the valid contenders (compile, verify, time), then race those that ran
    against the selector; sets the result's verdict and winner."""
    runnable = [c for c in result.contenders if c.status == "ok"]
    selector = result.contenders[0]
    settings = options.evaluator
    with IsolatedEvaluator(problem.workload, problem.target, problem.pipeline, settings) as ev:
        outcomes = ev.evaluate_all(problem.slot_values(c.config) for c in runnable)
        candidates = []
        for contender, outcome in zip(runnable, outcomes, strict=True):
            role = "baseline" if contender is selector else "candidate"
            db.record(problem.key, problem.slot_values(contender.config), outcome, role=role)
            if not outcome.ok:
                contender.status, contender.detail = outcome.status, outcome.detail
            candidates.append(Candidate(contender.config, outcome))
        if selector.status != "ok":
            result.error = f"the selector's config failed here ({selector.status}): "
            result.error += selector.detail
            return
        others = [c for c in runnable if c is not selector and c.status == "ok"]
        race_options = TuneOptions(
            budget=1, finalists=max(1, len(others)), race_rounds=options.rounds, evaluator=settings
        )
        race, winner = race_finalists(problem, ev, db, rank(candidates), race_options)
    if others and not race:
        result.note = "the race failed (a worker crashed or timed out): the selector stands"
    verdict = verdict_of(problem, race, winner, outcomes[runnable.index(selector)])
    db.record_verdict(problem.key, verdict)
    result.verdict = verdict
    chosen = winner or problem.baseline
    result.winner = next(c for c in runnable if c.config == chosen)


def _write(path: str | Path, result: AdaptResult, target: Target) -> str:
    """Add the result's verdict to the library at `path` and save it; returns the entry."""
    with new_context(), ir.Location.unknown():
        library = library_at(path, target)
        extra = {"adapted_from": result.winner.name if result.winner else SELECTOR}
        name = add_verdict(library, result.key, result.verdict, target.hardware_class(), extra)
        library.save(path)
    return name
