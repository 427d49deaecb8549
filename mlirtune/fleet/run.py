"""Fleet tuning runs: one class's search on its nodes, or one search per CPU class at once.

The driver (this process) proposes the candidates, keeps the database and races the
finalists; the actors on the nodes compile and time. With `tune_per_class` every class gets
its own search, problem and records (keyed on that class's fingerprint), run side by side
in threads of the driver, each with its own database connection.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import ModuleType

from mlirtune.fleet.cluster import FleetNode, connected, fleet_nodes
from mlirtune.fleet.evaluator import FleetEvaluator, classes_of
from mlirtune.interfaces.errors import MlirtuneError, UsageError
from mlirtune.interfaces.workload import Workload
from mlirtune.toolchain import digest
from mlirtune.tune.db import TuningDB
from mlirtune.tune.problem import TuningProblem, generate
from mlirtune.tune.results import TuneReport
from mlirtune.tune.tuner import TuneObserver, TuneOptions, tune


def tune_per_class(
    workload: Workload,
    pipeline: str | None,
    options: TuneOptions,
    db_path: str | Path | None,
    *,
    classes: list[str] | None = None,
    isa: str | None = None,
    threads: int = 1,
    observer_for: Callable[[str, int], TuneObserver] | None = None,
) -> dict[str, TuneReport]:
    """One search per CPU class of the cluster at `options.ray` (only `classes`, when
    given), all at once, each on its class's nodes; the report per class. A class's
    target is recorded in the database for `specs export --per-class`.
    `observer_for(class, space size)` gives each search its progress observer."""
    if options.ray is None:
        raise UsageError("tuning per CPU class runs on a Ray cluster: give --ray", stage="fleet")
    with connected(options.ray) as ray:
        groups = classes_of(fleet_nodes(ray, isa, threads))
        missing = sorted(set(classes or ()) - set(groups))
        if missing:
            raise UsageError(
                f"--ray {options.ray}: no node of CPU class {', '.join(missing)}; the cluster "
                f"has {', '.join(sorted(groups))}",
                stage="fleet",
            )
        chosen = {name: groups[name] for name in classes or sorted(groups)}
        problems = {
            name: generate(workload, nodes[0].target, pipeline, settings=options.evaluator)
            for name, nodes in chosen.items()
        }
        with TuningDB(db_path) as db:
            for name, problem in problems.items():
                description = chosen[name][0].target.describe()
                db.record_cpu_class(name, digest(problem.key.target), description)
        return _run_all(ray, problems, chosen, options, db_path, isa, observer_for)


def _run_all(
    ray: ModuleType,
    problems: dict[str, TuningProblem],
    chosen: dict[str, list[FleetNode]],
    options: TuneOptions,
    db_path: str | Path | None,
    isa: str | None,
    observer_for: Callable[[str, int], TuneObserver] | None,
) -> dict[str, TuneReport]:
    """The classes' searches in threads; the first failure is raised once all have ended."""
    reports: dict[str, TuneReport] = {}
    errors: dict[str, BaseException] = {}
    local = replace(options, ray=None)
    run_id = uuid.uuid4().hex[:12]  # one benchmark lock per machine for all the searches

    def search(name: str) -> None:
        problem = problems[name]
        observer = observer_for(name, problem.space.count()) if observer_for else None
        try:
            with TuningDB(db_path) as db:
                evaluator = FleetEvaluator(
                    ray,
                    problem.workload,
                    chosen[name],
                    problem.pipeline,
                    options.evaluator,
                    isa,
                    run_id=run_id,
                )
                reports[name] = tune(problem, local, db, observer, evaluator=evaluator)
        except BaseException as error:  # re-raised below, in the driver's thread
            errors[name] = error

    # Daemons: an interrupted driver exits (its results are saved) without waiting for them.
    threads = [threading.Thread(target=search, args=(n,), name=n, daemon=True) for n in problems]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for name, error in errors.items():
        if isinstance(error, MlirtuneError):
            error.args = (f"CPU class {name}: {error.args[0]}",)
        raise error
    return reports
