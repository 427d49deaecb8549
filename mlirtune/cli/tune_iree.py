"""`mlirtune tune --engine iree`: search the lowering config of each distinct contraction and
convolution dispatch IREE forms of a workload, and write the winners as one tuning spec
`iree-compile` applies; `mlirtune specs export --engine iree` writes that spec again from the
tuning database."""

from __future__ import annotations

import argparse
import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from mlirtune.cli.common import integer, iree_engine_of, label, plural
from mlirtune.cli.tune_report import (
    print_plain,
    print_report,
    print_space,
    searched_with_progress,
)
from mlirtune.interfaces.errors import UsageError

if TYPE_CHECKING:
    from mlirtune.interfaces.target import Target
    from mlirtune.interfaces.workload import Workload
    from mlirtune.iree.engine import IreeEngine
    from mlirtune.iree.tiles import IreeRoot
    from mlirtune.targets import HostCPU
    from mlirtune.tune.db import TuningDB
    from mlirtune.tune.problem import TuningProblem
    from mlirtune.tune.results import TuneReport
    from mlirtune.tune.tuner import TuneObserver, TuneOptions


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
    from mlirtune.iree.problem import distinct_tunable, iree_problem, tune_dispatches

    check_iree_flags(args)
    host = problem_target(target)
    engine = iree_engine_of(args, host)
    roots = distinct_tunable(engine.dispatches(workload))
    if not roots:
        engine.tuned_root(workload)  # raises, naming the dispatches
    if args.show_space:
        for root in roots:
            print(f"dispatch {root.dispatch} ({root.describe()})")
            print_space(iree_problem(workload, host, root, options.evaluator).space)
        return 0
    tuned = tune_dispatches(
        workload,
        host,
        roots,
        options,
        args.db,
        functools.partial(_with_progress, args.json, workload, options.budget),
    )
    if tuned is None:
        return 130
    winners = [(root, report.winner) for root, report in tuned if report.winner]
    reports = [report for _, report in tuned]
    if args.update_spec:
        _write_spec(engine, winners, Path(args.update_spec))
    if args.json:
        print(json.dumps([report.to_json() for report in reports]))
    else:
        for report in reports:
            print_report(report, target)
    return 0


def _with_progress(
    quiet: bool,
    workload: Workload,
    budget: int | None,
    root: IreeRoot,
    problem: TuningProblem,
    db: TuningDB,
    search: Callable[[TuneObserver | None], TuneReport],
) -> TuneReport | None:
    """One dispatch's search under a header and a progress bar (tune_dispatches' `search`);
    None when interrupted."""
    console = Console(stderr=True)
    if not quiet:
        print_plain(
            console,
            f"tuning {label(workload.describe())} with IREE",
            f"  dispatch {root.dispatch} ({root.describe()}), budget {budget or 'unlimited'}",
            f"  database {db.path}",
        )
    return searched_with_progress(console, budget or problem.space.count(), db.path, search)


def _write_spec(
    engine: IreeEngine, winners: list[tuple[IreeRoot, dict[str, int]]], path: Path
) -> None:
    """The winners as an IREE tuning spec at `path`, keeping its other dispatches'
    (written even with no winner: a spec that leaves IREE's configs as they are)."""
    engine.write_spec(winners, path, merged=path if path.exists() else None)
    count = plural(len(winners), "winning dispatch", "winning dispatches")
    print_plain(Console(stderr=True), f"wrote the IREE tuning spec of {count} to {path}")


def add_iree_model_arguments(export: argparse.ArgumentParser) -> None:
    """`specs export`'s model, for --engine iree."""
    model = export.add_argument_group(
        "with --engine iree: the model whose dispatches' verdicts make the IREE tuning spec"
    )
    model.add_argument("--for", dest="model", metavar="WORKLOAD", help="built-in workload")
    model.add_argument("options", nargs="*", metavar="KEY=VALUE", help="its options")
    model.add_argument("--torch", metavar="FILE.py[:FACTORY]", help="a PyTorch module")
    model.add_argument("--batch", type=integer(1), metavar="N", help="--torch's batch_size")
    model.add_argument("--payload", metavar="FILE.mlir", help="linalg on tensors")
    model.add_argument(
        "--entry",
        default="payload",
        metavar="NAME",
        help="--payload's entry function (default: %(default)s)",
    )


def refuse_iree_model_arguments(args: argparse.Namespace) -> None:
    """`specs export` without --engine iree: its model arguments do not apply."""
    if args.model or args.torch or args.payload or args.options:
        raise UsageError(
            "--for, --torch and --payload name the model of an IREE tuning spec (--engine "
            "iree); this project's libraries take every verdict, or --workload's",
            stage="specs",
        )


def export_iree_spec(args: argparse.Namespace) -> int:
    """`specs export --engine iree`: the model's IREE tuning spec from the database, one
    matcher per dispatch whose verdict on this host, with this IREE, beat IREE's config."""
    from mlirtune.cli.common import target_of, workload_of
    from mlirtune.iree.problem import distinct_tunable, recorded_verdicts
    from mlirtune.tune.db import TuningDB

    if args.per_class or args.workload:
        flag = "--per-class" if args.per_class else "--workload"
        raise UsageError(f"{flag} exports this project's libraries: drop it with --engine iree")
    if not (args.model or args.torch or args.payload):
        raise UsageError(
            "--engine iree exports one model's spec: name it with --for WORKLOAD, --torch "
            "FILE.py or --payload FILE.mlir",
            stage="specs",
        )
    path = Path(args.output)
    if path.suffix != ".mlir":
        raise UsageError(f"{path}: an IREE tuning spec is a .mlir file", stage="specs")
    host = problem_target(target_of(args))
    model = argparse.Namespace(
        **{**vars(args), "workload": args.model, "inputs": None, "expect": None}
    )
    workload = workload_of(model)
    engine = iree_engine_of(args, host)
    roots = distinct_tunable(engine.dispatches(workload))
    with TuningDB(args.db, readonly=True) as db:
        found = recorded_verdicts(db, workload, host, roots)
    if all(verdict is None for _, verdict in found):
        raise UsageError(
            f"tuning database {args.db} holds no IREE verdicts for {label(workload.describe())} "
            "on this host with this IREE; run `mlirtune tune --engine iree` on it first",
            stage="specs",
        )
    for root, verdict in found:
        if verdict is None:
            kept = "not tuned: IREE's config"
        elif verdict.won:
            kept = f"tuned {verdict.params}, {verdict.speedup:.2f}x IREE's config"
        else:
            kept = "IREE's config won its race"
        print(f"dispatch {root.dispatch} ({root.describe()}): {kept}")
    winners = [(root, verdict.params) for root, verdict in found if verdict and verdict.won]
    engine.write_spec(winners, path)
    print(
        f"wrote the IREE tuning spec of {plural(len(winners), 'dispatch', 'dispatches')} to {path}"
    )
    return 0


def problem_target(target: Target) -> HostCPU:
    """The host target IREE compiles for."""
    from mlirtune.targets import HostCPU

    if not isinstance(target, HostCPU):
        raise UsageError("--engine iree runs on the host CPU: drop --target")
    return target
