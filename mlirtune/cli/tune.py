"""`mlirtune tune`: search a workload's schedule parameters and report baseline vs best."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import warnings
from collections import Counter
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
from mlir import ir
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from mlirtune.bench.stats import median_ci
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
from mlirtune.interfaces.errors import UsageError
from mlirtune.ir.context import new_context
from mlirtune.tune.outcome import Outcome
from mlirtune.tune.strategies import STRATEGIES, strategy_class

if TYPE_CHECKING:  # imported on use: `mlirtune --help` stays fast
    from mlirtune.interfaces.target import Target
    from mlirtune.tune.starters import Starter
    from mlirtune.tune.tuner import TuneReport

EPILOG = """\
examples:
  mlirtune tune matmul M=256 N=256 K=256 --budget 50
  mlirtune tune matmul M=1024 N=1024 K=1024 --budget 300 --strategy model --json
  mlirtune tune mlp M=256 N=1024 K=1024 --time-limit 600 --strategy tpe --seed 1
  mlirtune tune conv2d --budget 40 --db /tmp/tuning.db
  mlirtune tune matmul M=384 N=384 K=384 --budget 60 --starter-spec --update-spec mine.mlir
  mlirtune tune matmul M=1024 N=1024 K=1024 --threads 0 --search-threads --budget 30

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
""" + "\n".join(f"  {name:11s} {cls.description}" for name, cls in STRATEGIES.items())


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
    add_db_argument(cmd)
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
        "replacing the entry for this workload and pipeline and keeping the others",
    )
    cmd.add_argument(
        "--show-space",
        action="store_true",
        help="print the space (constraints, and its knobs as transform.tune.knob IR); no tuning",
    )
    cmd.set_defaults(handler=cmd_tune)


def _strategy(name: str) -> str:
    """An argparse `type=` for --strategy, with the tuner's own message for a wrong name."""
    try:
        strategy_class(name)
    except UsageError as error:
        raise argparse.ArgumentTypeError(error.args[0]) from None
    return name


def cmd_tune(args: argparse.Namespace) -> int:
    from mlirtune.curation.export import write_verdict
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
    )
    if not args.show_space:
        options.check()
    workload = workload_of(args)
    target = target_of(args)
    if args.torch:  # a model: each of its distinct dispatches, then the whole
        from mlirtune.cli.tune_dispatches import tune_dispatches

        return tune_dispatches(args, workload, lambda w: _tune_one(args, w, target, options))
    report = _tune_one(args, workload, target, options)
    if report is None:
        return 0 if args.show_space else 130
    if args.update_spec:
        entry = write_verdict(args.update_spec, report)
        if not args.json:
            _print_plain(Console(stderr=True), f"updated entry {entry} in {args.update_spec}")
    if args.json:
        print(json.dumps(report.to_json()))
    else:
        _print_report(report, target)
    return 0


def _tune_one(args: argparse.Namespace, workload, target: Target, options) -> TuneReport | None:
    """Search `workload`'s space as `args` say; None for --show-space (printed) or when
    interrupted (what was measured is saved)."""
    from mlirtune.curation.export import library_at
    from mlirtune.tune.db import TuningDB
    from mlirtune.tune.problem import generate
    from mlirtune.tune.tuner import tune

    problem = generate(
        workload,
        target,
        args.pipeline,
        settings=options.evaluator,
        memory_check=not args.show_space,
        search_threads=args.search_threads,
    )
    if args.show_space:
        _print_space(problem.space)
        return None
    starters = _starters(args.starter_spec, problem)
    options = replace(options, starters=tuple(s.config for s in starters))
    if args.update_spec:  # fail now, not after the search, if the library is unusable
        with new_context(), ir.Location.unknown():
            library_at(args.update_spec, target)
    console = Console(stderr=True)
    with TuningDB(args.db) as db:
        if not args.json:
            _print_plain(
                console,
                f"tuning {label(workload.describe())}",
                f"  pipeline {problem.key.pipeline} (schedule {problem.family.name}), "
                f"space of {plural(problem.space.count(), 'config')}",
                f"  database {db.path}",
            )
        foreign = [s for s in starters if s.tuned_on and problem.space.contains(s.config)]
        if foreign:  # said even with --json (on stderr): it changes what is measured first
            names = ", ".join(f"{s.label} ({s.tuned_on})" for s in foreign)
            count = plural(len(foreign), "config")
            _print_plain(console, f"  starting from {count} tuned on other CPU classes: {names}")
        progress = _ProgressBar(console, options.budget or problem.space.count())
        try:
            with progress.bar:
                return tune(problem, options, db, progress)
        except KeyboardInterrupt:
            saved = progress.done - progress.resumed
            print(
                f"mlirtune: interrupted; {plural(saved, 'new result')} saved in {db.path}. "
                "Run the same command again to resume.",
                file=sys.stderr,
            )
            return None


DEFAULT_SPECS = "<default>"


def _print_plain(console: Console, *lines: str) -> None:
    """Lines as they are: no markup, no highlighting, and no wrapping at the 80 columns rich
    assumes when the output is not a terminal (a long path stays whole, for copying)."""
    for line in lines:
        console.print(line, markup=False, highlight=False, soft_wrap=True)


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


class _ProgressBar:
    """Candidates done, failures by status and the best GFLOP/s so far."""

    def __init__(self, console: Console, total: int) -> None:
        self.bar = Progress(
            TextColumn("{task.description:8s}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[status]}"),
            console=console,
            transient=False,
        )
        self.task = self.bar.add_task("search", total=total, status="")
        self.done = self.resumed = 0
        self.failures: Counter[str] = Counter()
        self.best: float | None = None

    def phase(self, text: str) -> None:
        self.bar.update(self.task, description=text)

    def result(self, config: dict, outcome: Outcome, resumed: bool) -> None:
        self.done += 1
        self.resumed += resumed
        if outcome.ok:
            self.best = max(self.best or 0.0, outcome.gflops or 0.0)
        else:
            self.failures[outcome.status] += 1
        parts = [f"best {self.best:.1f} GFLOP/s" if self.best else "no valid config yet"]
        parts += [f"{status} {count}" for status, count in sorted(self.failures.items())]
        if self.resumed:
            parts.append(f"{self.resumed} from database")
        self.bar.update(self.task, completed=self.done, status=", ".join(parts))


def _print_space(space) -> None:
    from mlir import ir

    from mlirtune.ir.context import new_context

    print(f"// {plural(space.count(), 'config')} of schedule {space.schedule}; constraints:")
    for name, description in space.describe():
        print(f"//   {name}: {description}")
    with new_context(), ir.Location.unknown():
        print(space.to_transform_module())


def _print_report(report: TuneReport, target: Target) -> None:
    from mlirtune.peak import measured_peak_gflops, memory_bound_gbs
    from mlirtune.targets.host_cpu import HostCPU

    problem = report.problem
    # Against the host's measured FMA peak and, for a memory-bound workload, its measured
    # streaming bandwidth (each measured once per CPU, then cached).
    dtype = problem.op.element_type
    complexity = problem.workload.get_complexity()
    on_host = isinstance(target, HostCPU)
    # The peak is one core's; a kernel on N threads has N of them.
    peak = measured_peak_gflops(target, dtype) * target.threads if on_host else 0.0
    bandwidth = memory_bound_gbs(target, complexity, dtype) if on_host else None
    moved = complexity.bytes_read + complexity.bytes_written
    threads = f" on {target.threads} threads" if on_host and target.threads > 1 else ""
    print(f"{label(problem.workload.describe())}{threads}: baseline vs best")  # not a title
    table = Table()
    columns = ["config", "median ms", "95% CI ms", "GFLOP/s", "% peak", "speedup"]
    if bandwidth:
        columns[5:5] = ["GB/s", "% bandwidth"]
    for column in columns:
        table.add_column(column, justify="left" if column == "config" else "right", no_wrap=True)
    baseline_median = float(np.median(report.baseline_samples))
    rows = [("baseline", problem.baseline, report.baseline_samples)]
    # The winner (which need not be the fastest median raced: see race_finalists), else
    # the fastest config other than the baseline.
    shown = report.winner or report.fastest_candidate
    if shown is not None:
        name = "best" if report.winner else "fastest"
        rows.append((name, shown, report.samples_of(shown)))
    for name, config, samples in rows:
        samples = np.asarray(samples)
        median = float(np.median(samples))
        low, high = median_ci(samples)
        gflops = report.gflops(config)
        cells = [
            name,
            f"{median * 1e3:.4f}",
            f"[{low * 1e3:.4f}, {high * 1e3:.4f}]",
            f"{gflops:.1f}",
            f"{100 * gflops / peak:.0f}%" if peak else "-",
            f"{baseline_median / median:.3f}x",
        ]
        if bandwidth:
            gbs = moved / median / 1e9
            cells[5:5] = [f"{gbs:.1f}", f"{100 * gbs / bandwidth:.0f}%"]
        table.add_row(*cells)
    # Wide enough for the table when the output is not a terminal (rich assumes 80 columns).
    Console(width=shutil.get_terminal_size((120, 24)).columns).print(table)
    if bandwidth:
        print(
            f"memory-bound: {moved / complexity.flops:.3g} bytes/FLOP, above the host's "
            f"{bandwidth / peak:.3g}; % bandwidth is of the measured {bandwidth:.1f} GB/s read"
        )
    for name, config, _ in rows:  # under the table, which then fits in 80 columns
        print(f"{name + ':':9s} {' '.join(f'{k}={v}' for k, v in config.items())}")
    failed = ", ".join(f"{s} {n}" for s, n in report.failed_by_status.items()) or "none"
    print(
        f"evaluated {len(report.evaluated)} of {plural(problem.space.count(), 'config')} "
        f"({report.resumed} from the database); failures: {failed}"
    )
    if not report.winner:
        print("the baseline stands: no candidate beat it in every round of the race")
    for warning in report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
