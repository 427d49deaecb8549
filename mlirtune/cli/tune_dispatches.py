"""`mlirtune tune --torch FILE.py:FACTORY`: tune a model dispatch by dispatch.

The model's payload is split as a compile splits it; each distinct dispatch that a schedule
family takes (same root kinds, shapes and types: a repeated layer is tuned once) is tuned
on the values it reads in the model, and its winner written into the spec library. The
whole model is then benchmarked with that library applied, against PyTorch eager.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable

from rich.console import Console

from mlirtune.cli.common import engine_of, plural
from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.workload import Workload
from mlirtune.tune.results import TuneReport

# Rounds of the closing comparison: ours, eager and torch.compile in turn.
ROUNDS = 3


def tune_dispatches(
    args: argparse.Namespace,
    model: Workload,
    tune_one: Callable[[Workload], TuneReport | None],
) -> int:
    from mlirtune.bench.baseline import measure_torch
    from mlirtune.curation.export import write_verdict
    from mlirtune.engine.mlir_jit import MlirJitEngine
    from mlirtune.interfaces.bench import BenchOptions
    from mlirtune.specs.specset import SpecSet
    from mlirtune.workloads.dispatches import dispatch_workloads, root_signature

    if not args.update_spec or args.show_space or args.json:
        raise UsageError(
            "tune --torch tunes each dispatch of the model and writes the winners into a spec "
            "library: give --update-spec LIB.mlir (and neither --show-space nor --json)",
            stage="tune",
        )
    console = Console(stderr=True)
    engine = engine_of(args)
    parts = dispatch_workloads(model, lambda: MlirJitEngine(pipeline="default"))
    distinct: dict[tuple, Workload] = {}
    for part in parts:
        if any(s.kind == "schedule" for s in engine.plan(part).descriptor.stages):
            distinct.setdefault(root_signature(part), part)
    console.print(
        f"{model.describe()['module']}: {plural(len(parts), 'dispatch', 'dispatches')}, "
        f"{len(distinct)} distinct with a schedule family: tuning each",
        markup=False,
    )
    for part in distinct.values():
        report = tune_one(part)
        if report is None:
            return 130
        entry = write_verdict(args.update_spec, report)
        verdict = report.verdict
        outcome = f"{verdict.speedup:.3f}x over the selector" if verdict.won else "selector kept"
        console.print(f"  {part.function}: {outcome}, entry {entry}", markup=False)
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
