"""`mlirtune tune`: search a workload's schedule parameters and report baseline vs best."""

from __future__ import annotations

import argparse
import json
import warnings
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mlir import ir
from rich.console import Console

from mlirtune.cli.common import (
    SEED_MAX,
    add_command,
    add_db_argument,
    add_workload_arguments,
    integer,
    label,
    plural,
    seconds,
    target_of,
    workload_of,
)
from mlirtune.cli.tune_fleet import (
    FLEET_EPILOG,
    add_fleet_arguments,
    check_fleet_flags,
    fleet_session,
    tune_classes,
)
from mlirtune.cli.tune_report import (
    print_plain,
    print_report,
    print_space,
    searched_with_progress,
)
from mlirtune.interfaces.errors import UsageError
from mlirtune.ir.context import new_context
from mlirtune.tune.strategies import STRATEGIES, strategy_class

if TYPE_CHECKING:  # imported on use: `mlirtune --help` stays fast
    from mlirtune.interfaces.target import Target
    from mlirtune.interfaces.workload import Workload
    from mlirtune.tune.results import TuneReport
    from mlirtune.tune.starters import Starter

EPILOG = (
    """\
examples:
  mlirtune tune matmul M=256 N=256 K=256 --budget 50
  mlirtune tune matmul M=1024 N=1024 K=1024 --budget 300 --strategy model --json
  mlirtune tune mlp M=256 N=1024 K=1024 --time-limit 600 --strategy tpe --seed 1
  mlirtune tune conv2d --budget 40 --db /tmp/tuning.db
  mlirtune tune matmul M=384 N=384 K=384 --budget 60 --starter-spec --update-spec mine.mlir
  mlirtune tune matmul M=1024 N=1024 K=1024 --threads 0 --search-threads --budget 30
  mlirtune tune matmul M=512 N=512 K=512 --engine iree --budget 40 --update-spec iree.mlir

How it works: the pipeline's schedule declares its knobs; constraints for the op kind and
this CPU (register file, L1/L2 sizes, divisibility) give the search space. The baseline
(the parameter selector's choice) is timed first and last; every candidate is compiled,
verified and timed in an isolated worker (a crash, hang or wrong result is recorded, never
fatal; its timing stops early once its samples show it surely 1.2x slower than the fastest
so far); the fastest few are raced against the baseline in interleaved rounds, and a winner
is declared only if it beats the baseline in every round.

Every result is saved at once in the tuning database (--db, default: see `mlirtune db
--help`). Interrupt with Ctrl-C and run the same command again to resume: stored configs
are not measured again. --update-spec writes the verdict into a spec library, which
compiles apply with --spec (see `mlirtune specs --help`).

strategies:
"""
    + "\n".join(f"  {name:11s} {cls.description}" for name, cls in STRATEGIES.items())
    + "\n\n"
    + FLEET_EPILOG
)


def add_tune_parser(commands: Any) -> None:
    """Register `tune` on the `mlirtune` command parser."""
    text = "search the schedule parameters of a workload for the fastest verified config"
    description = (
        "Search the schedule parameters of a workload for the fastest verified config, then "
        "race the fastest candidates against the target's own choice (the baseline); prints "
        "baseline vs best and saves every result in the tuning database."
    )
    cmd = add_command(commands, "tune", text, EPILOG, description)
    add_workload_arguments(cmd)
    _add_search_arguments(cmd)
    add_db_argument(cmd)
    _add_run_arguments(cmd)
    add_fleet_arguments(cmd)
    cmd.set_defaults(handler=cmd_tune)


def _add_search_arguments(cmd: argparse.ArgumentParser) -> None:
    """How long the search runs, and how it chooses candidates."""
    cmd.add_argument(
        "--budget",
        type=integer(1),
        metavar="N",
        help="evaluate at most N candidates, N >= 1 (default: none; give --budget and/or "
        "--time-limit, the first one reached ends the search; with neither, tune exits with "
        "an error, unless --show-space)",
    )
    cmd.add_argument(
        "--time-limit",
        type=seconds,
        metavar="S",
        help="ask for no new candidate after S seconds of search, S > 0 (default: none); the "
        "candidates in flight, the final baseline and the race still run",
    )
    cmd.add_argument(
        "--strategy",
        type=_strategy,
        choices=list(STRATEGIES),
        default="tpe",
        help="search strategy (default: %(default)s; see strategies below)",
    )
    cmd.add_argument(
        "--seed",
        type=integer(0, SEED_MAX),
        default=0,
        metavar="N",
        help=f"seed of the strategy, 0 to {SEED_MAX} (default: %(default)s)",
    )


def _add_run_arguments(cmd: argparse.ArgumentParser) -> None:
    """The race, the worker processes, where the search starts and what it writes."""
    cmd.add_argument(
        "--finalists",
        type=integer(1),
        default=3,
        metavar="N",
        help="fastest candidates raced against the baseline, N >= 1 (default: %(default)s)",
    )
    cmd.add_argument(
        "--workers",
        type=integer(1),
        metavar="N",
        help="worker processes, N >= 1 (default: one per usable core, at least 2; with 1 the "
        "final race runs in one process instead of two)",
    )
    cmd.add_argument(
        "--search-threads",
        action="store_true",
        help="search the thread count too: 1 to --threads N, in powers of two and N (needs "
        "--threads N with N >= 2); the spec entry then records the count that won",
    )
    cmd.add_argument("--json", action="store_true", help="print one JSON object")
    cmd.add_argument(
        "--starter-spec",
        nargs="?",
        const=DEFAULT_SPECS,
        metavar="LIB",
        help="evaluate first the config a spec library's matching entry gives (without LIB: "
        "the libraries compiles apply: configured ones and the target's defaults)",
    )
    cmd.add_argument(
        "--update-spec",
        metavar="LIB",
        help="write the result into spec library LIB (.mlir/.mlirbc, created if missing), "
        "replacing the entry for this workload and pipeline and keeping the others; with "
        "--engine iree: write the winner as an IREE tuning spec (iree-compile "
        "--iree-codegen-tuning-spec-path=LIB)",
    )
    cmd.add_argument(
        "--export-batch",
        metavar="DIR",
        type=Path,
        help="with --target nvidia-gpu: compile the baseline and --budget candidates into DIR "
        "and stop; time them where the GPU is with `python -m mlirtune.cli.gpu_batch DIR`",
    )
    cmd.add_argument(
        "--import-batch",
        metavar="DIR",
        type=Path,
        help="with --target nvidia-gpu: record a batch measured on a GPU (same workload "
        "options as its export) in the database, keyed on that GPU, and report it",
    )
    cmd.add_argument(
        "--show-space",
        action="store_true",
        help="print the space (constraints, and its knobs as transform.tune.knob IR); no tuning",
    )


def _strategy(name: str) -> str:
    """An argparse `type=` for --strategy, with the tuner's own message for a wrong name."""
    try:
        strategy_class(name)
    except UsageError as error:
        raise argparse.ArgumentTypeError(error.args[0]) from None
    return name


def cmd_tune(args: argparse.Namespace) -> int:
    from mlirtune.tune.evaluator import EvaluatorSettings
    from mlirtune.tune.tuner import TuneOptions

    options = TuneOptions(
        budget=args.budget,
        time_limit_s=args.time_limit,
        strategy=args.strategy,
        seed=args.seed,
        finalists=args.finalists,
        # A multi-thread candidate is timed with the cores to itself: one worker process,
        # so no compile runs beside it.
        evaluator=EvaluatorSettings(workers=1 if args.threads > 1 else args.workers),
        ray=args.ray,
    )
    if not args.show_space:
        options.check()
    workload = workload_of(args)
    target = target_of(args)
    if args.engine == "iree":
        from mlirtune.cli.tune_iree import tune_iree

        return tune_iree(args, workload, target, options)
    _check_device_flags(args, target)
    check_fleet_flags(args, target)
    with fleet_session(args):
        if args.per_class is not None and not args.show_space:
            return tune_classes(args, workload, options)
        return _tune_workload(args, workload, target, options)


def _tune_workload(args: argparse.Namespace, workload, target: Target, options) -> int:
    """Tune one workload, or each dispatch of a model, and report."""
    from mlirtune.curation.export import write_verdict

    if args.torch:  # a model: each of its distinct dispatches, then the whole
        from mlirtune.cli.tune_dispatches import tune_dispatches

        def tune_dispatch(
            dispatch: Workload, budget: int | None, share: float
        ) -> TuneReport | None:
            limit = options.time_limit_s * share if options.time_limit_s else None
            shared = replace(options, budget=budget, time_limit_s=limit)
            return _tune_one(args, dispatch, target, shared)

        return tune_dispatches(args, workload, tune_dispatch)
    report = _tune_one(args, workload, target, options)
    if report is None:
        return 0 if args.show_space or args.export_batch else 130
    if args.update_spec:
        entry = write_verdict(args.update_spec, report)
        if not args.json:
            print_plain(Console(stderr=True), f"updated entry {entry} in {args.update_spec}")
    if args.json:
        print(json.dumps(report.to_json()))
    else:
        print_report(report, target)
    return 0


def _tune_one(args: argparse.Namespace, workload, target: Target, options) -> TuneReport | None:
    """Search `workload`'s space as `args` say; None for --show-space (printed) or when
    interrupted (what was measured is saved)."""
    from mlirtune.curation.export import library_at
    from mlirtune.tune.db import TuningDB
    from mlirtune.tune.problem import generate

    problem = generate(
        workload,
        target,
        args.pipeline,
        settings=options.evaluator,
        memory_check=not args.show_space,
        search_threads=args.search_threads,
    )
    if args.show_space:
        print_space(problem.space)
        return None
    starters = _starters(args.starter_spec, problem)
    options = replace(options, starters=tuple(s.config for s in starters))
    if args.update_spec:  # fail now, not after the search, if the library is unusable
        with new_context(), ir.Location.unknown():
            library_at(args.update_spec, target)
    console = Console(stderr=True)
    with TuningDB(args.db) as db:
        if not args.json:
            print_plain(
                console,
                f"tuning {label(workload.describe())}",
                f"  pipeline {problem.key.pipeline} (schedule {problem.space.schedule}), "
                f"space of {plural(problem.space.count(), 'config')}",
                f"  database {db.path}",
            )
        foreign = [s for s in starters if s.tuned_on and problem.space.contains(s.config)]
        if foreign:  # said even with --json (on stderr): it changes what is measured first
            names = ", ".join(f"{s.label} ({s.tuned_on})" for s in foreign)
            count = plural(len(foreign), "config")
            print_plain(console, f"  starting from {count} tuned on other CPU classes: {names}")
        return searched_with_progress(
            console,
            options.budget or problem.space.count(),
            db.path,
            lambda progress: _search(args, problem, options, db, progress),
        )


def _check_device_flags(args: argparse.Namespace, target: Target) -> None:
    """Device batches are for GPU targets, spec libraries and models for host ones."""
    from mlirtune.targets import NvidiaGPU

    on_gpu = isinstance(target, NvidiaGPU)
    if (args.export_batch or args.import_batch) and not on_gpu:
        raise UsageError("--export-batch and --import-batch apply to --target nvidia-gpu")
    if args.export_batch and args.import_batch:
        raise UsageError("give --export-batch or --import-batch, not both")
    if on_gpu and (args.update_spec or args.starter_spec or args.torch):
        raise UsageError(
            "--target nvidia-gpu tunes one matmul: spec libraries (--update-spec, "
            "--starter-spec) apply to host targets, and --torch models run on the host"
        )


def _search(args: argparse.Namespace, problem, options, db, progress) -> TuneReport | None:
    """The tuner for the target: on the host, or through device batches on a GPU (compiled
    here, timed on this machine's GPU or on another one: --export-batch, --import-batch)."""
    from mlirtune.targets import NvidiaGPU
    from mlirtune.tune import device
    from mlirtune.tune.tuner import tune

    if not isinstance(problem.target, NvidiaGPU):
        return tune(problem, options, db, progress)
    if args.import_batch:
        return device.import_batch(problem, args.import_batch, db, progress)
    if args.export_batch:
        batch = device.export_batch(problem, options, args.export_batch, progress)
        progress.bar.stop()
        print_plain(
            Console(stderr=True),
            f"wrote {plural(len(batch.candidates), 'program')} (the baseline first) to "
            f"{args.export_batch}; where the GPU is: python -m mlirtune.cli.gpu_batch "
            f"{args.export_batch}; then here: the same command with --import-batch",
        )
        return None
    return device.tune_on_device(problem, options, db, progress)


DEFAULT_SPECS = "<default>"


def _starters(spec: str | None, problem) -> list[Starter]:
    """What to evaluate first: the config the matching entry of `spec` gives this problem
    (--starter-spec; DEFAULT_SPECS: the libraries compiles apply), then the matching entries
    tuned on other CPU classes, of `spec` and (within this space) of the libraries loaded."""
    from mlirtune.interfaces.target import UNKNOWN_CLASS
    from mlirtune.specs.specset import SpecSet
    from mlirtune.tune.starters import applied_starter, foreign_starters

    loaded = SpecSet.for_target(problem.target)
    starters: list[Starter] = []
    if spec:
        chosen = loaded
        if spec != DEFAULT_SPECS:
            chosen = SpecSet.for_target(problem.target, [spec], configured=False, defaults=False)
        applied = applied_starter(problem, chosen)
        starters = ([applied] if applied else []) + foreign_starters(problem, chosen)
        if not starters:
            where = "the configured or default libraries" if spec == DEFAULT_SPECS else spec
            warnings.warn(f"no entry of {where} matches; searching without a starter", stacklevel=2)
    automatic = problem.target.hardware_class() != UNKNOWN_CLASS  # else no class to compare
    for starter in foreign_starters(problem, loaded) if automatic else []:
        known = any(starter.config == s.config for s in starters)
        if not known and problem.space.contains(starter.config):  # not asked for: no warning
            starters.append(starter)
    return starters
