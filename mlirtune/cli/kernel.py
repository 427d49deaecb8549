"""Commands on one kernel: list, pipelines, run, bench, opt."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from mlirtune.cli.common import (
    engine_of,
    label,
    pipeline_of,
    schedule_params,
    spec_options,
    target_of,
    workload_of,
)


def cmd_list(args: argparse.Namespace) -> int:
    from mlirtune.workloads import WORKLOADS

    for name, cls in sorted(WORKLOADS.items()):
        print(f"{name:14s} {cls.description}")
        for p in cls.parameters:
            choices = f" {{{','.join(map(str, p.choices))}}}" if p.choices else ""
            print(f"    {f'{p.name}={p.default}':16s} {p.help}{choices}")
        defaults = cls().default_schedule_parameters()
        if defaults:
            shown = " ".join(f"{k}={v}" for k, v in defaults.items())
            print(f"    schedule parameters (--param): {shown}")
    print("from_file      any .mlir payload: mlirtune run --payload FILE --entry NAME")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    workload = workload_of(args)
    result = engine_of(args).execute(workload, schedule_params(args.param))
    for note in result.extra.get("notes", []):
        print(f"note: {note}")
    verification = result.verification
    print(verification.summary())
    return 0 if verification.ok else 1


def cmd_bench(args: argparse.Namespace) -> int:
    from mlirtune.bench.baseline import measure_numpy
    from mlirtune.bench.harness import BenchOptions

    workload = workload_of(args)
    options = BenchOptions(max_time_s=args.max_time)
    if not args.json:
        print(f"benchmarking {label(workload.describe())} ...", file=sys.stderr)
    result = engine_of(args).benchmark(workload, schedule_params(args.param), options=options)
    report: dict[str, Any] = result.to_json()
    baseline = None
    if args.baseline:
        baseline = measure_numpy(workload, options)
        report["baseline"] = {
            "name": args.baseline,
            "median_s": baseline.median_s,
            "min_s": baseline.stats.min,
            "gflops": baseline.gflops,
        }
        report["speedup_vs_baseline"] = baseline.median_s / result.median_s
    if args.json:
        print(json.dumps(report))
    else:
        _print_bench(result, baseline, report)
    return 0


def cmd_opt(args: argparse.Namespace) -> int:
    workload = workload_of(args)

    def show(stage: str, module) -> None:
        print(f"// ----- after {stage} -----")
        print(module)

    target_of(args).lower(
        workload,
        schedule_params(args.param),
        pipeline=pipeline_of(args),
        observer=show,
        print_after_all=args.print_after_all,
        **spec_options(args, target_of(args)),
    )
    return 0


def cmd_pipelines(args: argparse.Namespace) -> int:
    from mlirtune.pipeline import list_descriptors

    for name, description, _ in list_descriptors():
        print(f"{name:28s} {description}")
    target = target_of(args)
    print(f"\nsearch order on {target.name}: {', '.join(target.descriptor_search_path())}")
    return 0


def _print_bench(result, baseline, report) -> None:
    sources = report.get("parameter_sources", {})
    params = " ".join(f"{k}={v}({sources.get(k, '?')})" for k, v in result.parameters.items())
    print(f"{label(result.workload)}")
    print(f"  pipeline: {report.get('pipeline', '?')}")
    print(f"  config: {report.get('config_source', '?')}")
    for note in report.get("notes", []):
        print(f"  note: {note}")
    print(f"  schedule parameters: {params or '(none)'}")
    rows = [("mlirtune", result)] + ([("numpy (1 thread)", baseline)] if baseline else [])
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
        print(f"  speedup vs numpy: {report['speedup_vs_baseline']:.3f}x")


def _gflops_text(gflops: float | None) -> str:
    """GFLOP/s, or n/a when the FLOP count is unknown (payloads from files)."""
    return f"{gflops:8.2f} GFLOP/s" if gflops is not None else "     n/a GFLOP/s"
