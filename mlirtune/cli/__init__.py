"""Command-line interface: mlirtune list | pipelines | run | bench | opt | tune | db | specs."""

from __future__ import annotations

import argparse
import os
import sys
import warnings

from mlirtune.cli.common import (
    add_command,
    add_spec_arguments,
    add_target_argument,
    add_workload_arguments,
)
from mlirtune.errors import MlirtuneError

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
  mlirtune tune matmul M=512 N=512 K=512 --budget 200 --strategy tpe
  mlirtune db list
  mlirtune specs export --db ~/.cache/mlirtune/tuning.db -o my-specs.mlir
  mlirtune bench matmul M=512 N=512 K=512 --spec my-specs.mlir

Workload options are KEY=VALUE (see `mlirtune list`); schedule parameters are
--param KEY=VALUE. Exit codes: 0 success, 1 verification failed, 2 bad input or
compilation error, 3 internal error.
"""


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `mlirtune` script; returns the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    warnings.showwarning = _show_warning
    try:
        return args.handler(args)
    except MlirtuneError as error:
        print(f"mlirtune: error: {error}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print("mlirtune: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `mlirtune db show ... | head`: the reader has gone
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as error:  # a bug in mlirtune, not bad input
        if os.environ.get("MLIRTUNE_DEBUG"):
            raise
        print(
            f"mlirtune: internal error: {type(error).__name__}: {error} "
            "(set MLIRTUNE_DEBUG=1 for a traceback)",
            file=sys.stderr,
        )
        return 3


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"mlirtune: warning: {message}", file=sys.stderr)


def _parser() -> argparse.ArgumentParser:
    from mlirtune.cli import kernel
    from mlirtune.cli.db import add_db_parser
    from mlirtune.cli.specs import add_specs_parser
    from mlirtune.cli.tune import add_tune_parser

    parser = argparse.ArgumentParser(
        prog="mlirtune",
        description="Lower, run, verify, benchmark and tune MLIR tensor kernels.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    listing = commands.add_parser("list", help="list workloads and their options")
    listing.set_defaults(handler=kernel.cmd_list)
    pipelines = commands.add_parser("pipelines", help="list the pipeline descriptors")
    pipelines.set_defaults(handler=kernel.cmd_pipelines)
    add_target_argument(pipelines)

    def workload_command(name: str, help_text: str, handler) -> argparse.ArgumentParser:
        cmd = add_command(commands, name, help_text, EPILOG)
        add_workload_arguments(cmd)
        cmd.add_argument(
            "--param",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="schedule parameter (repeatable), e.g. --param MR=4",
        )
        cmd.add_argument("--schedule", metavar="FILE.mlir", help="transform schedule for --payload")
        add_spec_arguments(cmd)
        cmd.set_defaults(handler=handler)
        return cmd

    workload_command("run", "execute once and verify against the reference", kernel.cmd_run)
    bench = workload_command("bench", "verify, then time in a native loop", kernel.cmd_bench)
    bench.add_argument("--baseline", choices=["numpy"], help="also time numpy (one thread)")
    bench.add_argument("--json", action="store_true", help="print one JSON object")
    bench.add_argument(
        "--max-time", type=float, default=1.0, metavar="S", help="time cap per measurement"
    )
    opt = workload_command(
        "opt", "print the payload after scheduling and after lowering", kernel.cmd_opt
    )
    opt.add_argument("--print-after-all", action="store_true", help="print IR after every pass")
    add_tune_parser(commands)
    add_db_parser(commands)
    add_specs_parser(commands)
    return parser
