"""What `mlirtune tune` prints: the progress bar while it searches, the space with
--show-space, and the report of baseline against best."""

from __future__ import annotations

import shutil
import sys
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from mlirtune.bench.stats import median_ci
from mlirtune.cli.common import label, plural
from mlirtune.tune.outcome import Outcome

if TYPE_CHECKING:
    from mlirtune.interfaces.target import Target
    from mlirtune.tune.results import TuneReport

R = TypeVar("R")


def print_plain(console: Console, *lines: str) -> None:
    """Lines as they are: no markup, no highlighting, and no wrapping at the 80 columns rich
    assumes when the output is not a terminal (a long path stays whole, for copying)."""
    for line in lines:
        console.print(line, markup=False, highlight=False, soft_wrap=True)


def progress_display(console: Console) -> Progress:
    """The display tuning progress bars are drawn in (see `ProgressBar`)."""
    return Progress(
        TextColumn("{task.description:8s}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[status]}"),
        TextColumn("{task.fields[flight]}"),
        console=console,
        transient=False,
    )


class ProgressBar:
    """Candidates done, failures by status and the best GFLOP/s so far, and on a fleet the
    candidates in flight per node. Searches run side by side (one per CPU class) share one
    display: give each its `name` and the first one's `bar`."""

    def __init__(
        self, console: Console, total: int, *, name: str = "", bar: Progress | None = None
    ) -> None:
        self.bar = bar or progress_display(console)
        self.name = name
        self.task = self.bar.add_task(self._described("search"), total=total, status="", flight="")
        self.done = self.resumed = 0
        self.failures: Counter[str] = Counter()
        self.best: float | None = None

    def _described(self, phase: str) -> str:
        return f"{self.name} {phase}" if self.name else phase

    def phase(self, text: str) -> None:
        self.bar.update(self.task, description=self._described(text), flight="")

    def in_flight(self, counts: dict[str, int]) -> None:
        """Candidates being evaluated per fleet node (see mlirtune.fleet)."""
        flight = ", ".join(f"{node} {count}" for node, count in sorted(counts.items()))
        self.bar.update(self.task, flight=f"in flight: {flight}" if flight else "")

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


def searched_with_progress(
    console: Console, total: int, db_path: object, search: Callable[[ProgressBar], R]
) -> R | None:
    """`search(progress)` under a progress bar of `total` candidates; None when Ctrl-C
    interrupts it (what was measured is in the database at `db_path`, and said so)."""
    progress = ProgressBar(console, total)
    try:
        with progress.bar:
            return search(progress)
    except KeyboardInterrupt:
        saved = progress.done - progress.resumed
        print(
            f"mlirtune: interrupted; {plural(saved, 'new result')} saved in {db_path}. "
            "Run the same command again to resume.",
            file=sys.stderr,
        )
        return None


def print_space(space) -> None:
    from mlir import ir

    from mlirtune.ir.context import new_context

    print(f"// {plural(space.count(), 'config')} of schedule {space.schedule}; constraints:")
    for name, description in space.describe():
        print(f"//   {name}: {description}")
    with new_context(), ir.Location.unknown():
        print(space.to_transform_module())


def print_report(report: TuneReport, target: Target) -> None:
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
