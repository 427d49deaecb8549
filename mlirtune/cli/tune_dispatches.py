"""`mlirtune tune --torch FILE.py:FACTORY`: tune a model dispatch by dispatch.

The model's payload is split as a compile splits it, and each distinct dispatch timed on the
values it reads in the model. Each distinct dispatch that a schedule family takes (same
root kinds, shapes and types: a repeated layer is tuned once) is tuned on those values, with
its share of the budget by its share of their time, and its winner written into the spec
library. The whole model is then benchmarked with that library applied, against PyTorch
eager.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable, Hashable
from typing import TypeVar

from rich.console import Console

from mlirtune.cli.common import engine_of, plural
from mlirtune.interfaces.engine import Engine
from mlirtune.interfaces.errors import BaselineFailed, UsageError
from mlirtune.interfaces.workload import Workload
from mlirtune.tune.results import TuneReport
from mlirtune.workloads.dispatch_times import DispatchTime

Key = TypeVar("Key", bound=Hashable)

# Rounds of the closing comparison: ours, eager and torch.compile in turn.
ROUNDS = 3
# A dispatch whose share of --budget is fewer candidates than this keeps the selector's.
MIN_CANDIDATES = 2


def tune_dispatches(
    args: argparse.Namespace,
    model: Workload,
    tune_one: Callable[[Workload, int | None, float], TuneReport | None],
) -> int:
    """Tune each distinct dispatch of `model` that a schedule family takes with
    `tune_one(dispatch, budget, share)`, slowest first, its budget (of --budget) and `share`
    (of --time-limit) its share of the time those dispatches take; write the winners;
    then time the model with them beside eager."""
    from mlirtune.bench.baseline import measure_torch
    from mlirtune.cli.dispatch_report import measure_dispatches
    from mlirtune.curation.export import write_verdict
    from mlirtune.engine.mlir_jit import MlirJitEngine
    from mlirtune.interfaces.bench import BenchOptions
    from mlirtune.specs.specset import SpecSet

    if not args.update_spec or args.show_space or args.json:
        raise UsageError(
            "tune --torch tunes each dispatch of the model and writes the winners into a spec "
            "library: give --update-spec LIB.mlir (and neither --show-space nor --json)",
            stage="tune",
        )
    console = Console(stderr=True)
    engine = engine_of(args)
    profile = measure_dispatches(model, engine, console)
    distinct, shares = _tunable_shares(profile, engine)
    budgets = allot(args.budget, shares) if args.budget else dict.fromkeys(shares)
    calls = sum(t.calls for t in profile)
    console.print(
        f"{model.describe()['module']}: {plural(calls, 'dispatch', 'dispatches')}, "
        f"{len(distinct)} distinct with a schedule family: tuning each by its share of "
        "their time",
        markup=False,
    )
    written, skipped = 0, []
    for key in sorted(distinct, key=shares.__getitem__, reverse=True):
        part, budget, share = distinct[key], budgets[key], shares[key]
        if budget is not None and budget < MIN_CANDIDATES:
            skipped.append(share)
            continue
        try:
            report = tune_one(part, budget, share)
        except BaselineFailed as failure:
            # The model's compile drops such a dispatch to the next path that works; the
            # other dispatches are still worth their budget.
            console.print(f"  {part.function} ({share:.1%}): left untuned: {failure}", markup=False)
            continue
        if report is None:
            return 130
        entry = write_verdict(args.update_spec, report)
        written += 1
        verdict = report.verdict
        outcome = f"{verdict.speedup:.3f}x over the selector" if verdict.won else "selector kept"
        console.print(f"  {part.function} ({share:.1%}): {outcome}, entry {entry}", markup=False)
    if skipped:
        console.print(
            f"  {plural(len(skipped), 'distinct dispatch', 'distinct dispatches')} "
            f"({sum(skipped):.1%} of the time): too few candidates of --budget (under "
            f"{MIN_CANDIDATES} each) to tune, selector kept",
            markup=False,
        )
    if not written:
        console.print(f"nothing tuned: give a --budget of at least {MIN_CANDIDATES}", markup=False)
        return 0
    tuned = MlirJitEngine(
        target=engine.target, specs=SpecSet.for_target(engine.target, [args.update_spec])
    )
    options = BenchOptions(max_time_s=0.5)
    compiled_error = None
    times: dict[str, list[float]] = {"mlirtune": [], "torch eager": [], "torch.compile": []}
    for _ in range(ROUNDS):  # interleaved, so that load on the host hits every side alike
        times["mlirtune"].append(tuned.benchmark(model, options=options).median_s)
        times["torch eager"].append(measure_torch(model, options, args.threads).median_s)
        if compiled_error is None:
            try:
                compiled = measure_torch(model, options, args.threads, compiled=True)
                times["torch.compile"].append(compiled.median_s)
            except UsageError as error:
                compiled_error = error.args[0]
    medians = {side: statistics.median(t) for side, t in times.items() if t}
    print(f"{model.describe()['module']} with {args.update_spec} applied ({ROUNDS} rounds):")
    for side, median in medians.items():
        print(f"  {side:15s} median {median * 1e3:9.4f} ms")
    if compiled_error:
        print(f"  torch.compile   n/a: {compiled_error}")
    for side in ("torch eager", "torch.compile"):
        if side in medians:
            print(f"  speedup vs {side}: {medians[side] / medians['mlirtune']:.3f}x")
    sys.stdout.flush()
    return 0


def _tunable_shares(
    profile: list[DispatchTime], engine: Engine
) -> tuple[dict[tuple, Workload], dict[tuple, float]]:
    """The distinct dispatches of `profile` a schedule family takes, one per root signature
    (a repeated layer once), and each one's share of their summed time."""
    from mlirtune.workloads.dispatches import root_signature

    seconds: dict[tuple, float] = {}
    distinct: dict[tuple, Workload] = {}
    for time in profile:
        if engine.plan(time.dispatch).descriptor.has_schedule_stage:
            key = root_signature(time.dispatch)
            seconds[key] = seconds.get(key, 0.0) + time.total_s
            distinct.setdefault(key, time.dispatch)
    whole = sum(seconds.values())
    return distinct, {key: s / whole if whole else 1 / len(seconds) for key, s in seconds.items()}


def allot(budget: int, shares: dict[Key, float]) -> dict[Key, int]:
    """`budget` candidates shared out by `shares` (summing to 1): each its whole part, and
    the candidates left over to the largest remainders. Then each dispatch left under
    MIN_CANDIDATES (it would not be tuned), slowest first, takes what it lacks from the one
    with the most, where that one keeps MIN_CANDIDATES: a budget of 4 tunes two dispatches
    whatever their shares."""
    exact = {key: budget * share for key, share in shares.items()}
    counts = {key: int(value) for key, value in exact.items()}
    left = budget - sum(counts.values())
    for key in sorted(exact, key=lambda k: exact[k] - counts[k], reverse=True)[:left]:
        counts[key] += 1
    for key in sorted(counts, key=shares.__getitem__, reverse=True):
        lacking = MIN_CANDIDATES - counts[key]
        richest = max(counts, key=counts.__getitem__)
        if lacking > 0 and counts[richest] - lacking >= MIN_CANDIDATES:
            counts[richest] -= lacking
            counts[key] += lacking
    return counts
