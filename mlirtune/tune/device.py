"""Tuning for a GPU: candidates compiled here, timed on the device.

The search proposes a batch of configs (the baseline first, then starters and the
strategy's asks), worker processes compile them into GPU programs in one folder, and the
device side (mlirtune.runtime.gpu_batch) times them, a faulting or hung candidate costing
only itself, and races the finalists against the baseline. That runs on this machine's
GPU (`tune_on_device`), or on a GPU machine without MLIR: `export_batch` writes the
folder, `python -m mlirtune.cli.gpu_batch DIR` runs it there, and `import_batch` reads the
results back into the tuning database. Records are keyed on the GPU that measured them
(its name, compute capability and driver), not only on the chip compiled for.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from mlirtune.engine.ptx import program_data
from mlirtune.interfaces.device_batch import (
    DATA,
    RACE,
    BatchCandidate,
    DeviceBatch,
    read_results,
)
from mlirtune.interfaces.errors import UsageError
from mlirtune.runtime.cuda import device_count
from mlirtune.runtime.gpu_batch import device_command, run_batch
from mlirtune.tune.db import TuningDB
from mlirtune.tune.evaluator import IsolatedEvaluator
from mlirtune.tune.key import TuningKey
from mlirtune.tune.outcome import Outcome
from mlirtune.tune.problem import Config, TuningProblem
from mlirtune.tune.results import Candidate, TuneReport
from mlirtune.tune.strategies import strategy_class
from mlirtune.tune.tuner import (
    TuneObserver,
    TuneOptions,
    judge_race,
    next_proposal,
    starting_configs,
    verdict_of,
)

# Seconds one candidate may run on the device (verification and timing) before it counts
# as hung: a 4096^3 GEMM verifies and times in well under a second.
CANDIDATE_TIMEOUT_S = 60.0
# Seconds one candidate may take to compile: the benchmark's 4096^3 kernels take 0.3 s
# each; some odd tiles (a block one column wide) ran past 120 s, stalling the batch.
COMPILE_TIMEOUT_S = 30.0


def export_batch(
    problem: TuningProblem, options: TuneOptions, directory: Path, observer: TuneObserver
) -> DeviceBatch:
    """Compile the baseline and up to `options.budget` proposals into `directory`, with the
    inputs and expected outputs they are verified on. Proposals that fail to compile are
    left out (and said)."""
    options.check()
    if options.budget is None:
        raise UsageError("a device batch needs --budget N (its size)", stage="tune")
    directory.mkdir(parents=True, exist_ok=True)
    configs = _proposals(problem, options)
    observer.phase("compile")
    jobs = [
        (problem.slot_values(c), str(directory / f"compiled-{i}.json"))
        for i, c in enumerate(configs)
    ]
    settings = dataclasses.replace(
        options.evaluator,
        runs=False,
        compile_timeout_s=min(options.evaluator.compile_timeout_s, COMPILE_TIMEOUT_S),
    )
    with IsolatedEvaluator(problem.workload, problem.target, problem.pipeline, settings) as ev:
        failures = ev.compile_all(jobs)
    if failures[0] is not None:
        raise UsageError(
            f"the baseline config {problem.baseline} did not compile: {failures[0].detail}",
            stage="tune",
        )
    candidates: list[BatchCandidate] = []
    for (slot_values, path), config, failure in zip(jobs, configs, failures, strict=True):
        if failure is not None:
            observer.result(config, failure, False)
            continue
        name = f"candidate-{len(candidates)}.json"
        Path(path).rename(directory / name)
        candidates.append(BatchCandidate(len(candidates), slot_values, name))
    np.savez(directory / DATA, **program_data(problem.workload))
    batch = DeviceBatch(
        problem.workload.describe(),
        problem.flops,
        tuple(candidates),
        options.finalists,
        options.race_rounds,
        CANDIDATE_TIMEOUT_S,
    )
    batch.save(directory)
    return batch


def _proposals(problem: TuningProblem, options: TuneOptions) -> list[Config]:
    """The baseline, then the starters and the strategy's asks, distinct, up to the
    budget. The device measures them all at once, so the strategy is told nothing between
    asks (TPE's first proposals are its seeded random start)."""
    strategy = strategy_class(options.strategy)(problem.space, options.seed)
    starters, _ = starting_configs(problem, options, strategy)
    configs = [problem.baseline]
    while (
        len(configs) <= options.budget and (config := next_proposal(starters, strategy)) is not None
    ):
        if config not in configs:
            configs.append(config)
    return configs


def import_batch(
    problem: TuningProblem, directory: Path, db: TuningDB, observer: TuneObserver
) -> TuneReport:
    """Record a measured batch in the database under the measuring GPU's key, and judge
    the race."""
    started = time.monotonic()
    batch = DeviceBatch.load(directory)
    if batch.workload != problem.workload.describe():
        raise UsageError(
            f"{directory}: the batch is for {batch.workload}, not {problem.workload.describe()}",
            stage="tune",
        )
    device, results = read_results(directory)
    missing = [c.index for c in batch.candidates if c.index not in results]
    if device is None or missing or not (directory / RACE).exists():
        raise UsageError(
            f"{directory}: {len(missing)} of {len(batch.candidates)} candidates (or the race) "
            f"have no result yet; run `python -m mlirtune.cli.gpu_batch {directory}` where "
            "the GPU is, then import again",
            stage="tune",
        )
    key = device_key(problem.key, device)
    flops = problem.flops
    configs = {c.index: problem.config_of(c.parameters) for c in batch.candidates}
    evaluated, baseline = [], None
    for candidate in batch.candidates:
        outcome = _outcome(results[candidate.index], flops)
        role = "baseline" if candidate.index == 0 else "candidate"
        db.record(key, candidate.parameters, outcome, role=role)
        if candidate.index == 0:
            baseline = outcome
        else:
            evaluated.append(Candidate(configs[candidate.index], outcome))
            observer.result(configs[candidate.index], outcome, False)
    if not baseline.ok:
        raise UsageError(
            f"the baseline config {problem.baseline} failed on the device "
            f"({baseline.status}): {baseline.detail}",
            stage="tune",
        )
    race, winner, warnings = _read_race(problem, directory, db, key, configs)
    verdict = verdict_of(problem, race, winner, baseline)
    db.record_verdict(key, verdict)
    seconds = {
        "device": sum(r.get("wall_s", 0.0) for r in results.values()),
        "import": time.monotonic() - started,
    }
    return TuneReport(
        problem=dataclasses.replace(problem, key=key),
        strategy="device batch",
        evaluated=evaluated,
        resumed=0,
        baseline_first=baseline,  # measured once, on the device
        baseline_last=baseline,
        race=race,
        winner=winner,
        verdict=verdict,
        warnings=warnings,
        seconds=seconds,
    )


def _read_race(
    problem: TuningProblem,
    directory: Path,
    db: TuningDB,
    key: TuningKey,
    configs: dict[int, Config],
) -> tuple[dict[tuple, list[float]], Config | None, list[str]]:
    """The race's samples by config, its winner (the tuner's rule) and a warning where the
    device ran no race."""
    race = json.loads((directory / RACE).read_text())
    if not race.get("samples"):
        return {}, None, [f"no race on the device: {race.get('failed') or race.get('detail')}"]
    contenders = [configs[i] for i in race["indices"]]
    result, winner = judge_race(problem, db, key, contenders, race["samples"])
    return result, winner, []


def _outcome(result: dict[str, Any], flops: float) -> Outcome:
    samples = tuple(float(s) for s in result.get("samples", ()))
    extra = {"wall_s": result["wall_s"]} if "wall_s" in result else {}
    return Outcome(result["status"], result.get("detail", ""), samples, flops, extra)


def device_key(key: TuningKey, device: dict[str, Any]) -> TuningKey:
    """`key` with the measuring GPU (name, chip, driver) in its target."""
    return dataclasses.replace(key, target={**key.target, "device": device})


def tune_on_device(
    problem: TuningProblem, options: TuneOptions, db: TuningDB, observer: TuneObserver
) -> TuneReport:
    """Export, run and import one batch on this machine's GPU `problem.target.index`."""
    index = getattr(problem.target, "index", 0)
    if device_count() <= index:
        raise UsageError(
            f"no CUDA device {index} on this machine to time candidates on; compile them "
            "here with --export-batch DIR, run `python -m mlirtune.cli.gpu_batch DIR` on "
            "the GPU machine, then --import-batch DIR",
            stage="tune",
        )
    with tempfile.TemporaryDirectory(prefix="mlirtune-device-") as scratch:
        directory = Path(scratch)
        export_batch(problem, options, directory, observer)
        observer.phase("device")
        run_batch(directory, device_command(index))
        return import_batch(problem, directory, db, observer)
