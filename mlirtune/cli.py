"""Command-line interface: mlirtune list | run | bench | opt."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from mlirtune.errors import MlirtuneError, UsageError

EPILOG = """\
examples:
  mlirtune list
  mlirtune run matmul M=128 N=256 K=64 --param MR=4
  mlirtune bench matmul M=512 N=512 K=512 dtype=f32 --baseline numpy
  mlirtune bench mlp M=256 N=1024 K=1024 --json
  mlirtune opt matmul M=64 N=64 K=64 --pipeline x86_64/matmul
  mlirtune opt matmul --target nvidia-gpu
  mlirtune pipelines
  mlirtune run --payload kernel.mlir --entry f --inputs a.npy,b.npy --expect c.npy

Workload options are KEY=VALUE (see `mlirtune list`); schedule parameters are
--param KEY=VALUE. Exit codes: 0 success, 1 verification failed, 2 bad input or
compilation error, 3 internal error.
"""


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `mlirtune` script; returns the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except MlirtuneError as error:
        print(f"mlirtune: error: {error}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print("mlirtune: interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # a bug in mlirtune, not bad input
        if os.environ.get("MLIRTUNE_DEBUG"):
            raise
        print(
            f"mlirtune: internal error: {type(error).__name__}: {error} "
            "(set MLIRTUNE_DEBUG=1 for a traceback)",
            file=sys.stderr,
        )
        return 3


# --- commands ----------------------------------------------------------------------------


def _cmd_list(args: argparse.Namespace) -> int:
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


def _cmd_run(args: argparse.Namespace) -> int:
    workload = _workload(args)
    result = _engine(args).execute(workload, _params(args.param))
    verification = result.verification
    print(verification.summary())
    return 0 if verification.ok else 1


def _cmd_bench(args: argparse.Namespace) -> int:
    from mlirtune.bench.baseline import measure_numpy
    from mlirtune.bench.harness import BenchOptions

    workload = _workload(args)
    options = BenchOptions(max_time_s=args.max_time)
    if not args.json:
        print(f"benchmarking {_label(workload.describe())} ...", file=sys.stderr)
    result = _engine(args).benchmark(workload, _params(args.param), options=options)
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


def _cmd_opt(args: argparse.Namespace) -> int:
    workload = _workload(args)

    def show(stage: str, module) -> None:
        print(f"// ----- after {stage} -----")
        print(module)

    _target(args).lower(
        workload,
        _params(args.param),
        pipeline=_pipeline(args),
        observer=show,
        print_after_all=args.print_after_all,
    )
    return 0


def _cmd_pipelines(args: argparse.Namespace) -> int:
    from mlirtune.pipeline import list_descriptors

    for name, description, _ in list_descriptors():
        print(f"{name:28s} {description}")
    target = _target(args)
    print(f"\nsearch order on {target.name}: {', '.join(target.descriptor_search_path())}")
    return 0


# --- helpers -----------------------------------------------------------------------------


def _target(args: argparse.Namespace):
    from mlirtune.targets import TARGETS

    return TARGETS[args.target]()


def _pipeline(args: argparse.Namespace):
    if getattr(args, "schedule", None):
        if args.pipeline:
            raise UsageError("give either --pipeline or --schedule, not both")
        from mlirtune.pipeline import with_schedule_file

        return with_schedule_file(args.schedule, _target(args))
    return args.pipeline


def _engine(args: argparse.Namespace):
    return _target(args).engine(_pipeline(args))


def _workload(args: argparse.Namespace):
    if args.payload:
        from mlirtune.workloads.from_file import FromFile

        if args.workload:
            raise UsageError("give either a workload name or --payload, not both")
        return FromFile(
            args.payload,
            entry=args.entry,
            inputs=_split(args.inputs),
            expect=_split(args.expect),
        )
    if not args.workload:
        raise UsageError("name a workload (see `mlirtune list`) or give --payload FILE")
    from mlirtune.workloads import workload_class

    cls = workload_class(args.workload)
    return cls.from_strings(_pairs(args.options, "workload option"))


def _pairs(items: list[str], what: str) -> dict[str, str]:
    pairs = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise UsageError(f"{what} {item!r} is not KEY=VALUE")
        pairs[key] = value
    return pairs


def _params(items: list[str]) -> dict[str, int]:
    params = {}
    for key, value in _pairs(items, "--param").items():
        try:
            params[key] = int(value)
        except ValueError:
            raise UsageError(f"--param {key}={value!r} is not an integer") from None
    return params


def _split(text: str | None) -> list[str]:
    return [part for part in (text or "").split(",") if part]


def _label(description: dict[str, Any]) -> str:
    name = description.get("name", "?")
    rest = " ".join(f"{k}={v}" for k, v in description.items() if k != "name")
    return f"{name} {rest}".strip()


def _print_bench(result, baseline, report) -> None:
    sources = report.get("parameter_sources", {})
    params = " ".join(f"{k}={v}({sources.get(k, '?')})" for k, v in result.parameters.items())
    print(f"{_label(result.workload)}")
    print(f"  pipeline: {report.get('pipeline', '?')}")
    print(f"  schedule parameters: {params or '(none)'}")
    rows = [("mlirtune", result)] + ([("numpy (1 thread)", baseline)] if baseline else [])
    for name, r in rows:
        s = r.stats
        print(
            f"  {name:17s} median {s.median * 1e3:9.4f} ms  "
            f"95% CI [{s.ci_low * 1e3:.4f}, {s.ci_high * 1e3:.4f}]  min {s.min * 1e3:.4f} ms  "
            f"CV {s.cv * 100:4.1f}%  {r.gflops:8.2f} GFLOP/s  {r.gbytes_per_s:7.2f} GB/s  "
            f"n={s.count}"
        )
    print(f"  verified: {'yes' if result.verified else 'no (skipped)'}")
    if baseline:
        print(f"  speedup vs numpy: {report['speedup_vs_baseline']:.3f}x")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mlirtune",
        description="Lower, run, verify and benchmark MLIR tensor kernels.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add_target(cmd: argparse.ArgumentParser) -> None:
        from mlirtune.targets import TARGETS

        cmd.add_argument(
            "--target",
            choices=sorted(TARGETS),
            default="host",
            help="compilation target (default: host, with detected CPU features)",
        )

    listing = commands.add_parser("list", help="list workloads and their options")
    listing.set_defaults(handler=_cmd_list)
    pipelines = commands.add_parser("pipelines", help="list the pipeline descriptors")
    pipelines.set_defaults(handler=_cmd_pipelines)
    add_target(pipelines)

    def workload_command(name: str, help_text: str, handler) -> argparse.ArgumentParser:
        cmd = commands.add_parser(
            name,
            help=help_text,
            description=help_text,
            epilog=EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        cmd.add_argument("workload", nargs="?", help="built-in workload name (see list)")
        cmd.add_argument("options", nargs="*", metavar="KEY=VALUE", help="workload options")
        cmd.add_argument(
            "--param",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="schedule parameter (repeatable), e.g. --param MR=4",
        )
        cmd.add_argument("--payload", metavar="FILE.mlir", help="run a payload from a file")
        cmd.add_argument("--entry", default="payload", help="entry function of --payload")
        cmd.add_argument("--inputs", metavar="A.npy,...", help="input arrays for --payload")
        cmd.add_argument("--expect", metavar="OUT.npy,...", help="expected outputs for --payload")
        cmd.add_argument("--schedule", metavar="FILE.mlir", help="transform schedule for --payload")
        cmd.add_argument(
            "--pipeline",
            metavar="NAME|FILE.yaml",
            help="pipeline descriptor (default: looked up by workload and root-op kind)",
        )
        add_target(cmd)
        cmd.set_defaults(handler=handler)
        return cmd

    workload_command("run", "execute once and verify against the reference", _cmd_run)
    bench = workload_command("bench", "verify, then time in a native loop", _cmd_bench)
    bench.add_argument("--baseline", choices=["numpy"], help="also time numpy (one thread)")
    bench.add_argument("--json", action="store_true", help="print one JSON object")
    bench.add_argument(
        "--max-time", type=float, default=1.0, metavar="S", help="time cap per measurement"
    )
    opt = workload_command("opt", "print the payload after scheduling and after lowering", _cmd_opt)
    opt.add_argument("--print-after-all", action="store_true", help="print IR after every pass")
    return parser


if __name__ == "__main__":
    sys.exit(main())
