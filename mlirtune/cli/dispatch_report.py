"""`bench --dispatches`: where a split payload's time goes, one line per distinct dispatch."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from mlirtune.interfaces.errors import UsageError

if TYPE_CHECKING:
    from mlirtune.interfaces.engine import Engine
    from mlirtune.interfaces.workload import Workload
    from mlirtune.workloads.dispatch_times import DispatchTime


def measure_dispatches(workload: Workload, engine: Engine, console: Console) -> list[DispatchTime]:
    """Capture what each dispatch of `workload` reads, then time each distinct one on
    `engine` (dispatch_times.py), with progress on `console`."""
    from mlirtune.engine.mlir_jit import MlirJitEngine
    from mlirtune.workloads.dispatch_times import dispatch_times
    from mlirtune.workloads.dispatches import dispatch_workloads

    if not isinstance(engine, MlirJitEngine):
        raise UsageError("--dispatches times dispatches on the host CPU", stage="target")
    with console.status("running the payload dispatch by dispatch to capture their inputs"):
        parts = dispatch_workloads(workload)
    columns = (TextColumn("timing dispatches"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, TimeElapsedColumn(), console=console, transient=True) as bar:
        task = bar.add_task("", total=None)
        return dispatch_times(
            parts,
            engine,
            progress=lambda done, total: bar.update(task, completed=done, total=total),
        )


def print_dispatch_times(times: list[DispatchTime], indent: str) -> None:
    """The distinct dispatches, slowest total first, with their share of the sum."""
    total = sum(t.total_s for t in times)
    calls = sum(t.calls for t in times)
    print(
        f"{indent}where the time went: {len(times)} distinct of {calls} dispatches, each "
        f"timed alone on the values it reads; sum {total * 1e3:.4f} ms"
    )
    print(f"{indent}  {'share':>6s} {'calls':>5s} {'each ms':>9s}  {'dispatch':28s} roots")
    for t in times:
        share = 100 * t.total_s / total if total else 0.0
        how = "" if t.scheduled else " (untuned)"
        print(
            f"{indent}  {share:5.1f}% {t.calls:5d} {t.median_s * 1e3:9.4f}  "
            f"{t.dispatch.function:28s} {t.roots_text}{how}"
        )
