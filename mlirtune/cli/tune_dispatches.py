"""`mlirtune tune --torch FILE.py:FACTORY`: tune a model dispatch by dispatch.

The model's payload is split as a compile splits it; each distinct dispatch that a schedule
family takes (same root kinds, shapes and types: a repeated layer is tuned once) is tuned
on the values it reads in the model, and its winner written into the spec library. The
whole model is then benchmarked with that library applied, against PyTorch eager.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from rich.console import Console

from mlirtune.cli.common import engine_of, plural
from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.workload import Workload
from mlirtune.tune.tuner import TuneReport


def tune_dispatches(
    args: argparse.Namespace,
    model: Workload,
    tune_one: Callable[[Workload], TuneReport | None],
) -> int:
    from mlirtune.bench.baseline import measure_torch
    from mlirtune.dispatch.workload import dispatch_workloads, root_signature
    from mlirtune.engine.mlir_jit import MlirJitEngine
    from mlirtune.interfaces.bench import BenchOptions
    from mlirtune.specs.export import write_verdict
    from mlirtune.specs.specset import SpecSet

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
    options = BenchOptions(max_time_s=1.0)
    result = tuned.benchmark(model, options=options)
    eager = measure_torch(model, options, threads=args.threads)
    print(f"{model.describe()['module']} with {args.update_spec} applied:")
    print(f"  mlirtune      median {result.median_s * 1e3:9.4f} ms")
    print(f"  torch eager   median {eager.median_s * 1e3:9.4f} ms")
    print(f"  speedup vs torch eager: {eager.median_s / result.median_s:.3f}x")
    sys.stdout.flush()
    return 0
