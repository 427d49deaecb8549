"""`mlirtune tune --engine iree`: search the lowering config of a workload's costliest
IREE dispatch, and write the winner as a tuning spec `iree-compile` applies."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from mlirtune.cli.common import iree_engine_of, label, plural
from mlirtune.cli.tune_report import ProgressBar, print_plain, print_report, print_space
from mlirtune.interfaces.errors import UsageError

if TYPE_CHECKING:
    from mlirtune.interfaces.target import Target
    from mlirtune.interfaces.workload import Workload
    from mlirtune.targets import HostCPU
    from mlirtune.tune.results import TuneReport
    from mlirtune.tune.tuner import TuneOptions


def check_iree_flags(args: argparse.Namespace) -> None:
    """The flags that tune the project's own schedules only."""
    given = [
        flag
        for flag, on in (
            ("--ray", args.ray is not None),
            ("--per-class", args.per_class is not None),
            ("--starter-spec", args.starter_spec),
            ("--search-threads", args.search_threads),
            ("--export-batch", args.export_batch),
            ("--import-batch", args.import_batch),
            ("--pipeline", args.pipeline),
        )
        if on
    ]
    if given:
        raise UsageError(f"--engine iree tunes on this host alone: drop {', '.join(given)}")


def tune_iree(
    args: argparse.Namespace, workload: Workload, target: Target, options: TuneOptions
) -> int:
    """Tune each distinct contraction or convolution dispatch IREE forms of `workload`
    (--budget candidates each), report each, and with --update-spec write the winners as
    one IREE tuning spec (merged into it where it exists)."""
    from mlirtune.iree.problem import distinct_tunable, iree_problem

    check_iree_flags(args)
    engine = iree_engine_of(args, problem_target(target))
    roots = distinct_tunable(engine.dispatches(workload))
    if not roots:
        engine.tuned_root(workload)  # raises, naming the dispatches
    problems = [(root, iree_problem(workload, target, root, options.evaluator)) for root in roots]
    if args.show_space:
        for root, problem in problems:
            print(f"dispatch {root.dispatch} ({root.describe()})")
            print_space(problem.space)
        return 0
    winners, reports = [], []
    for root, problem in problems:
        report = _tune_dispatch(args, workload, root, problem, options)
        if report is None:
            return 130
        reports.append(report)
        if report.winner:
            winners.append((root, report.winner))
    if args.update_spec:
        _write_spec(engine, winners, Path(args.update_spec))
    if args.json:
        print(json.dumps([report.to_json() for report in reports]))
    else:
        for report in reports:
            print_report(report, target)
    return 0


def _tune_dispatch(
    args: argparse.Namespace, workload: Workload, root, problem, options: TuneOptions
) -> TuneReport | None:
    """One dispatch's search and race; None when interrupted (what was measured is
    saved)."""
    from mlirtune.iree.problem import iree_evaluator
    from mlirtune.tune.db import TuningDB
    from mlirtune.tune.tuner import tune

    console = Console(stderr=True)
    with TuningDB(args.db) as db:
        if not args.json:
            print_plain(
                console,
                f"tuning {label(workload.describe())} with IREE",
                f"  dispatch {root.dispatch} ({root.describe()}), "
                f"space of {plural(problem.space.count(), 'config')}",
                f"  database {db.path}",
            )
        progress = ProgressBar(console, options.budget or problem.space.count())
        try:
            with progress.bar:
                evaluator = iree_evaluator(problem, root, options.evaluator)
                return tune(problem, options, db, progress, evaluator=evaluator)
        except KeyboardInterrupt:
            saved = progress.done - progress.resumed
            print(
                f"mlirtune: interrupted; {plural(saved, 'new result')} saved in {db.path}. "
                "Run the same command again to resume.",
                file=sys.stderr,
            )
            return None


def _write_spec(engine, winners: list, path: Path) -> None:
    """The winners as an IREE tuning spec at `path`, keeping its other dispatches'."""
    console = Console(stderr=True)
    if not winners:
        print_plain(console, f"no winner over IREE's own configs: {path} left as it was")
        return
    engine.write_spec(winners, path, merged=path if path.exists() else None)
    print_plain(
        console,
        f"wrote the IREE tuning spec of {plural(len(winners), 'dispatch', 'dispatches')} to {path}",
    )


def problem_target(target: Target) -> HostCPU:
    """The host target IREE compiles for."""
    from mlirtune.targets import HostCPU

    if not isinstance(target, HostCPU):
        raise UsageError("--engine iree runs on the host CPU: drop --target")
    return target
