"""Commands on one kernel: list, pipelines, run, bench, opt."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mlirtune.cli.common import (
    engine_of,
    label,
    plural,
    schedule_params,
    target_of,
    workload_of,
)
from mlirtune.interfaces.errors import MlirtuneError, UsageError

if TYPE_CHECKING:  # imported on use: `mlirtune --help` stays fast
    from mlirtune.interfaces.bench import BenchResult
    from mlirtune.interfaces.engine import Engine
    from mlirtune.interfaces.workload import Workload


def cmd_list(args: argparse.Namespace) -> int:
    """Each workload's options, and the schedule parameters a run on the target would use
    with where each comes from (the plan `run`/`bench` follow, so the two agree)."""
    from mlirtune.workloads import WORKLOADS

    engine = engine_of(args)
    if args.workload or args.payload:
        workloads = [workload_of(args)]
    else:
        workloads = [cls() for _, cls in sorted(WORKLOADS.items())]
    plans = [_plan_json(engine, workload, args) for workload in workloads]
    if args.json:
        print(json.dumps(plans if len(plans) > 1 else plans[0]))
        return 0
    for workload, plan in zip(workloads, plans, strict=True):
        print(f"{workload.name:14s} {workload.description}")
        for p in workload.parameters:
            choices = f" {{{','.join(map(str, p.choices))}}}" if p.choices else ""
            value = workload.options[p.name]
            print(f"    {f'{p.name}={value}':16s} {p.help}{choices}")
        if "error" in plan:
            print(f"    schedule parameters on {args.target}: none ({plan['error']})")
            continue
        print(f"    pipeline: {plan['pipeline']}  config: {plan['config_source']}")
        print(f"    schedule parameters (--param): {_parameters_text(plan) or '(none)'}")
    if not (args.workload or args.payload):
        print("from_file      any .mlir payload: mlirtune run --payload FILE --entry NAME")
    return 0


def _plan_json(engine: Engine, workload: Workload, args: argparse.Namespace) -> dict[str, Any]:
    """What `bench --json` reports about the config, from the engine's plan."""
    try:
        lowering = engine.plan(workload)
    except MlirtuneError as error:
        if args.workload or args.payload:
            raise
        return {"workload": workload.describe(), "error": str(error)}
    return {
        "workload": workload.describe(),
        "pipeline": str(lowering.descriptor.path),
        "parameters": dict(lowering.values),
        "parameter_sources": dict(lowering.sources),
        "config_source": lowering.config_source,
    }


def _parameters_text(report: dict[str, Any]) -> str:
    """`KEY=VALUE(source)` for every schedule parameter, as `list` and `bench` print them."""
    sources = report.get("parameter_sources", {})
    values = report.get("parameters", {})
    return " ".join(f"{k}={v}({sources.get(k, '?')})" for k, v in values.items())


def _print_dispatches(dispatches: list[dict[str, Any]], indent: str) -> None:
    """One line per dispatch of a split payload: its pipeline and config source, or that
    it ran untuned, and its notes."""
    if not dispatches:
        return
    untuned = sum(not d["scheduled"] for d in dispatches)
    print(f"{indent}dispatches: {len(dispatches)}, {untuned} lowered untuned")
    for d in dispatches:
        how = f"{d['pipeline']}, {d['config_source']}" if d["scheduled"] else "untuned"
        print(f"{indent}  {d['function']:28s} {how}")
        for note in d["notes"]:
            print(f"{indent}    note: {note}")


def _checked_params(args: argparse.Namespace, engine: Engine, workload: Workload) -> dict[str, int]:
    """The --param values, with a warning where they break constraints of the schedule
    family: they still run, but outside the space the tuner searches."""
    params = schedule_params(args.param)
    if args.engine == "iree":  # IREE's knobs are checked against its space when compiled
        return params
    lowering = engine.plan(workload, params) if params else None
    broken = engine.broken_constraints(lowering) if lowering else []
    if broken:
        print(
            f"warning: the --param values break {', '.join(broken)} of this schedule family: "
            "outside the space `mlirtune tune` searches (`--show-space` describes them)",
            file=sys.stderr,
        )
    return params


def cmd_run(args: argparse.Namespace) -> int:
    workload = workload_of(args)
    engine = engine_of(args)
    result = engine.execute(workload, _checked_params(args, engine, workload))
    for note in result.extra.get("notes", []):
        print(f"note: {note}")
    _print_dispatches(result.extra.get("dispatches", []), indent="")
    for line in result.extra.get("iree_dispatches", []):
        print(line)
    verification = result.verification
    print(verification.summary())
    return 0 if verification.ok else 1


def cmd_bench(args: argparse.Namespace) -> int:
    from mlirtune.bench.baseline import measure_numpy, measure_torch
    from mlirtune.interfaces.bench import BenchOptions

    workload = workload_of(args)
    options = BenchOptions(max_time_s=args.max_time)
    if not args.json:
        print(f"benchmarking {label(workload.describe())} ...", file=sys.stderr)
    engine = engine_of(args)
    params = _checked_params(args, engine, workload)
    result = engine.benchmark(workload, params, options=options)
    report: dict[str, Any] = {**result.to_json(), "threads": args.threads}
    baseline = None
    if args.baseline:
        measure = measure_torch if args.baseline == "torch" else measure_numpy
        baseline = measure(workload, options, threads=args.threads)
        report["baseline"] = {
            "name": args.baseline,
            "median_s": baseline.median_s,
            "min_s": baseline.stats.min,
            "gflops": baseline.gflops,
        }
        report["speedup_vs_baseline"] = baseline.median_s / result.median_s
    times = None
    if args.dispatches:
        from rich.console import Console

        from mlirtune.cli import dispatch_report

        times = dispatch_report.measure_dispatches(workload, engine, Console(stderr=True))
        report["dispatch_times"] = [t.to_json() for t in times]
    if args.json:
        print(json.dumps(report))
        return 0
    _print_bench(result, baseline, report)
    if times:
        dispatch_report.print_dispatch_times(times, indent="  ")
    return 0


def cmd_opt(args: argparse.Namespace) -> int:
    workload = workload_of(args)
    if args.program:
        return _save_program(args, workload)

    def show(stage: str, result: object) -> None:
        print(f"// ----- after {stage} -----")
        print(result)

    engine = engine_of(args)
    engine.lower_payload(
        workload,
        _checked_params(args, engine, workload),
        observer=show,
        print_after_all=args.print_after_all,
    )
    return 0


def _save_program(args: argparse.Namespace, workload: Workload) -> int:
    """--program: the GPU program and, beside it, its inputs and expected outputs."""
    from mlirtune.engine.ptx import PtxEngine, program_data
    from mlirtune.runtime.gpu_run import data_path, save_data

    engine = engine_of(args)
    if not isinstance(engine, PtxEngine):
        raise UsageError("--program saves GPU programs: add --target nvidia-gpu", stage="target")
    path = Path(args.program)
    engine.compile(workload, _checked_params(args, engine, workload)).save(path)
    save_data(path, program_data(workload))
    print(f"saved {path} and {data_path(path)}; on a GPU machine (no MLIR needed):")
    print(f"  python -m mlirtune.cli.gpu_run {path}")
    return 0


def cmd_pipelines(args: argparse.Namespace) -> int:
    from mlirtune.pipeline import list_descriptors

    for name, description, _ in list_descriptors():
        print(f"{name:28s} {description}")
    target = target_of(args)
    print(f"\nsearch order on {target.name}: {', '.join(target.descriptor_search_path())}")
    return 0


def _print_bench(result: BenchResult, baseline: BenchResult | None, report: dict[str, Any]) -> None:
    params = _parameters_text(report)
    print(f"{label(result.workload)}")
    print(f"  pipeline: {report.get('pipeline', '?')}")
    print(f"  config: {report.get('config_source', '?')}")
    for note in report.get("notes", []):
        print(f"  note: {note}")
    _print_dispatches(report.get("dispatches", []), indent="  ")
    print(f"  schedule parameters: {params or '(none)'}")
    threads = report["threads"]
    print(f"  threads: {threads}")
    other = report["baseline"]["name"] if baseline else ""
    baseline_label = f"{other} ({plural(threads, 'thread')})"
    ours = "iree" if report.get("engine") == "iree" else "mlirtune"
    rows = [(ours, result)] + ([(baseline_label, baseline)] if baseline else [])
    for name, r in rows:
        s = r.stats
        print(
            f"  {name:17s} median {s.median * 1e3:9.4f} ms  "
            f"95% CI [{s.ci_low * 1e3:.4f}, {s.ci_high * 1e3:.4f}]  min {s.min * 1e3:.4f} ms  "
            f"CV {s.cv * 100:4.1f}%  {_gflops_text(r.gflops)}  {r.gbytes_per_s:7.2f} GB/s  "
            f"n={s.count}"
        )
    print(f"  verified: {'yes' if result.verified else 'no (skipped)'}")
    if baseline:
        print(f"  speedup vs {other}: {report['speedup_vs_baseline']:.3f}x")


def _gflops_text(gflops: float | None) -> str:
    """GFLOP/s, or n/a when the FLOP count is unknown (payloads from files)."""
    return f"{gflops:8.2f} GFLOP/s" if gflops is not None else "     n/a GFLOP/s"
