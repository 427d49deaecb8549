"""`mlirtune tune --ray [ADDRESS] [--per-class [CLASS,...]]`: tuning on a Ray cluster."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from rich.console import Console

from mlirtune.cli.tune_report import ProgressBar, print_plain, print_report, progress_display
from mlirtune.interfaces.errors import UsageError

if TYPE_CHECKING:
    from mlirtune.interfaces.target import Target
    from mlirtune.interfaces.workload import Workload
    from mlirtune.tune.tuner import TuneOptions

FLEET_EPILOG = """\
on a Ray cluster (pip install 'mlirtune[ray]'; see docs/fleet.md):
  mlirtune tune matmul M=512 N=512 K=512 --budget 200 --ray
  mlirtune tune matmul M=512 N=512 K=512 --budget 200 --ray 10.0.0.1:6379 --per-class
  mlirtune specs export --db tuning.db --per-class libs/
"""


def add_fleet_arguments(cmd: argparse.ArgumentParser) -> None:
    from mlirtune.fleet.cluster import CLASS_LABEL, LOCAL

    cmd.add_argument(
        "--ray",
        nargs="?",
        const=LOCAL,
        metavar="ADDRESS",
        help="compile and time candidates on a Ray cluster's nodes, one actor per core: the "
        "head node's HOST:PORT, or no address to start a cluster on this machine; the "
        "search, the database and the race stay here; without --per-class, on the nodes "
        "whose CPU is this machine's",
    )
    cmd.add_argument(
        "--per-class",
        nargs="?",
        const="",
        metavar="CLASS,...",
        help="with --ray: one search per CPU class of the cluster (or of the classes named), "
        "all at once, each on its own nodes and keyed on its own CPU; a node's class is its "
        f"label {CLASS_LABEL}, else the class its CPU detects; then write one library per "
        "class with `mlirtune specs export --per-class DIR`",
    )


def check_fleet_flags(args: argparse.Namespace, target: Target) -> None:
    """What --ray and --per-class combine with."""
    from mlirtune.targets import HostCPU

    if args.per_class is not None and not args.ray:
        raise UsageError("--per-class tunes on a Ray cluster: give --ray [ADDRESS] too")
    if not args.ray:
        return
    if not isinstance(target, HostCPU):
        raise UsageError("--ray tunes host CPUs; --target nvidia-gpu uses device batches")
    if args.workers:
        raise UsageError(
            "--workers sets this machine's worker processes; with --ray each node holds one "
            "actor per core (per --threads N cores)"
        )
    if args.per_class is not None:
        given = [f for f, on in (("--torch", args.torch), ("--update-spec", args.update_spec),
                                 ("--starter-spec", args.starter_spec)) if on]  # fmt: skip
        if given:
            raise UsageError(
                f"--per-class tunes one workload into one record set per class; drop "
                f"{', '.join(given)} (export the libraries with `specs export --per-class`)"
            )


def fleet_session(args: argparse.Namespace) -> AbstractContextManager[object]:
    """The cluster connection for the whole command (its searches share it), if --ray."""
    if not args.ray or args.show_space:
        return contextlib.nullcontext()
    from mlirtune.fleet.cluster import connected

    return connected(args.ray)


def tune_classes(args: argparse.Namespace, workload: Workload, options: TuneOptions) -> int:
    """--per-class: every class's search at once, one progress bar each, then the reports."""
    from mlirtune.fleet.run import tune_per_class

    console = Console(stderr=True)
    display = progress_display(console)
    names = [n for n in (args.per_class or "").split(",") if n] or None

    def observer_for(name: str, space: int) -> ProgressBar:
        return ProgressBar(console, options.budget or space, name=name, bar=display)

    try:
        with display:
            reports = tune_per_class(
                workload,
                args.pipeline,
                options,
                args.db,
                classes=names,
                isa=args.isa,
                threads=args.threads,
                observer_for=observer_for,
            )
    except KeyboardInterrupt:
        print(
            f"mlirtune: interrupted; the results so far are saved in {args.db or 'the database'}."
            " Run the same command again to resume.",
            file=sys.stderr,
        )
        return 130
    if args.json:
        print(json.dumps({name: report.to_json() for name, report in reports.items()}))
        return 0
    for name, report in reports.items():
        print_plain(console, f"CPU class {name}:")
        print_report(report, report.problem.target)
    db = f" --db {args.db}" if args.db else ""
    print_plain(console, f"one library per class: mlirtune specs export{db} --per-class DIR")
    return 0
