"""Command-line interface: mlirtune list | pipelines | run | bench | opt | tune | db | specs |
suite | report."""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Callable

from mlirtune.cli.common import (
    Parser,
    add_command,
    add_spec_arguments,
    add_target_argument,
    add_verbose_argument,
    add_workload_arguments,
    seconds,
)
from mlirtune.interfaces.errors import MlirtuneError

Handler = Callable[[argparse.Namespace], int]

EPILOG = """\
examples:
  mlirtune list
  mlirtune run matmul M=128 N=256 K=64 --param MR=4
  mlirtune bench matmul M=512 N=512 K=512 --baseline numpy
  mlirtune tune matmul M=256 N=256 K=256 --budget 50
  mlirtune db list
  mlirtune suite run smoke -o results.json

`mlirtune COMMAND --help` explains a command, its defaults and examples.
Exit codes: 0 success, 1 verification failed, 2 bad input, compilation error or crashed
kernel, 3 internal error, 130 interrupted. Errors are one line; -v/--verbose (or
MLIRTUNE_DEBUG=1) shows them whole, with what MLIR and LLVM printed.
Memory: a workload whose arrays pass $MLIRTUNE_MEMORY_BUDGET (default: half the memory
available, and no more than `ulimit -v` leaves) is refused before anything is allocated.
Compiles are contained: each runs in the command's child process, which may grow by
$MLIRTUNE_COMPILE_MEMORY (default: half the memory available) for at most
$MLIRTUNE_COMPILE_TIMEOUT seconds (default: 300; 0: no limit); a compile past either, or
one that aborts in MLIR or LLVM, ends as one error naming its stage. Sizes take bytes
(16G) or a fraction (0.8). $MLIRTUNE_ISA (as --isa) restricts the host's kernels to avx2.
"""
WORKLOAD_NOTE = """
A workload is a built-in name with KEY=VALUE options (`mlirtune list` shows them and their
defaults) or --payload FILE.mlir --entry NAME. Schedule parameters are --param KEY=VALUE.
"""
LIST = (
    "List the built-in workloads: each one's options (KEY=VALUE, with defaults and choices), "
    "the pipeline a run on the target would use, and its schedule parameters (--param "
    "KEY=VALUE) with where each value comes from: explicit, spec (a tuning-spec library "
    "entry), selector (the target's analytic choice), descriptor (set by the pipeline "
    "file) or default (the schedule's own default). Name a workload to see it at other "
    "sizes; the values are the ones `run` and `bench` use."
)
LIST_EPILOG = """\
examples:
  mlirtune list
  mlirtune list matmul M=512 N=512 K=512
  mlirtune list matmul M=512 N=512 K=512 --no-specs --json
  mlirtune run matmul M=128 N=256 K=64 dtype=f64     # options as `list` shows them
"""
PIPELINES = (
    "List the packaged pipeline descriptors (and those in $MLIRTUNE_PIPELINE_PATH) with "
    "their descriptions, then the target's search order for default descriptors."
)
PIPELINES_EPILOG = """\
examples:
  mlirtune pipelines
  mlirtune pipelines --target nvidia-gpu
  mlirtune opt matmul M=64 N=64 K=64 --pipeline generic/default
"""
RUN = (
    "Lower a workload, execute it once and verify its outputs against the reference. "
    "Exit status 0 only if it verifies, 1 (with the error statistics) if it does not."
)
RUN_EPILOG = (
    """\
examples:
  mlirtune run matmul M=128 N=256 K=64
  mlirtune run matmul M=128 N=256 K=64 --param MR=4 --param NR=32
  mlirtune run conv2d H=30 W=30 C=16 F=32 stride=2 --no-specs
  mlirtune run --payload kernel.mlir --entry f --inputs a.npy,b.npy --expect c.npy
"""
    + WORKLOAD_NOTE
)
BENCH = (
    "Verify a workload, then time it in a native loop until the 95% CI of the median is "
    "within 1% or --max-time is spent; prints median, CI, min, GFLOP/s and the schedule "
    "parameters with where each came from."
)
BENCH_EPILOG = (
    """\
examples:
  mlirtune bench matmul M=512 N=512 K=512 --baseline numpy
  mlirtune bench mlp M=256 N=1024 K=1024 --json
  mlirtune bench softmax M=512 N=512 --max-time 0.2
  mlirtune bench softmax M=512 N=1024 --baseline torch
  mlirtune bench matmul M=512 N=512 K=512 --spec my-specs.mlir
  mlirtune bench --torch examples/models/vit_tiny.py --baseline torch --dispatches
"""
    + WORKLOAD_NOTE
)
OPT = (
    "Print the payload IR after the schedule and after lowering (PTX for nvidia-gpu); "
    "nothing is run. With --program, save a GPU program to run on another machine."
)
OPT_EPILOG = (
    """\
examples:
  mlirtune opt matmul M=64 N=64 K=64
  mlirtune opt matmul M=64 N=64 K=64 --pipeline x86_64/matmul --print-after-all
  mlirtune opt elementwise M=64 N=64 ops=add,mul,relu
  mlirtune opt matmul --target nvidia-gpu
  mlirtune opt matmul M=1024 N=1024 K=1024 --target nvidia-gpu --program mm.json
"""
    + WORKLOAD_NOTE
)


def command() -> int:
    """Entry point of the `mlirtune` script: `main` in a contained child process, so that
    no compile or kernel can end the command without one line saying why
    (mlirtune.contain)."""
    from mlirtune.contain.supervisor import supervise

    return supervise(main, sys.argv[1:])


def main(argv: list[str] | None = None) -> int:
    """The command-line interface in this process; returns the exit code (`--help` raises
    SystemExit(0), as argparse does)."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # bad arguments: the one-line error is printed; --help exits
        if exit_.code in (0, None):
            raise
        return int(exit_.code)
    warnings.showwarning = _show_warning
    verbose = bool(getattr(args, "verbose", False) or os.environ.get("MLIRTUNE_DEBUG"))
    from mlirtune.contain.stages import set_verbose

    set_verbose(verbose)
    try:
        return args.handler(args)
    except MlirtuneError as error:
        print(f"mlirtune: error: {_one_line(str(error), verbose)}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print("mlirtune: interrupted", file=sys.stderr)
        return 130
    except MemoryError:  # outside a compile (which names its stage): an allocation failed
        print(
            "mlirtune: error: out of memory: an allocation failed outside the memory budget's "
            "estimate; lower MLIRTUNE_MEMORY_BUDGET or choose smaller sizes",
            file=sys.stderr,
        )
        return 2
    except BrokenPipeError:  # e.g. `mlirtune db show ... | head`: the reader has gone
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as error:  # a bug in mlirtune, not bad input
        if os.environ.get("MLIRTUNE_DEBUG"):
            raise
        print(
            f"mlirtune: internal error: {type(error).__name__}: "
            f"{_one_line(str(error), verbose)} (set MLIRTUNE_DEBUG=1 for a traceback)",
            file=sys.stderr,
        )
        return 3


def _one_line(message: str, verbose: bool) -> str:
    """An error's first line; the rest (an MLIR diagnostic's notes, a YAML file's context)
    only with --verbose, else counted."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    if verbose or len(lines) < 2:
        return message.strip()
    # A first line that ends in ':' announces its detail (a diagnostic): keep the first.
    shown = 2 if lines[0].endswith(":") else 1
    first, more = " ".join(lines[:shown]), len(lines) - shown
    if not more:
        return first
    return f"{first} ({more} more line{'s' * (more > 1)} with --verbose)"


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"mlirtune: warning: {message}", file=sys.stderr)


def _parser() -> argparse.ArgumentParser:
    from mlirtune.cli import kernel
    from mlirtune.cli.db import add_db_parser
    from mlirtune.cli.specs import add_specs_parser
    from mlirtune.cli.suite import add_suite_parser
    from mlirtune.cli.tune import add_tune_parser

    parser = Parser(
        prog="mlirtune",
        description="Lower, run, verify, benchmark and tune MLIR tensor kernels.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"mlirtune {_version()}")
    add_verbose_argument(parser)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    listing = add_command(commands, "list", "list workloads and their options", LIST_EPILOG, LIST)
    listing.set_defaults(handler=kernel.cmd_list)
    add_workload_arguments(listing)
    add_spec_arguments(listing)
    listing.add_argument("--json", action="store_true", help="print the plans as JSON")
    text = "list the pipeline descriptors"
    pipelines = add_command(commands, "pipelines", text, PIPELINES_EPILOG, PIPELINES)
    pipelines.set_defaults(handler=kernel.cmd_pipelines)
    add_target_argument(pipelines)

    def workload_command(
        name: str, help_text: str, description: str, epilog: str, handler: Handler
    ) -> argparse.ArgumentParser:
        cmd = add_command(commands, name, help_text, epilog, description)
        add_workload_arguments(cmd)
        cmd.add_argument(
            "--param",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="schedule parameter (repeatable), e.g. --param MR=4 (default: a spec "
            "library's entry, else the family's selector, else the knob's default)",
        )
        cmd.add_argument("--schedule", metavar="FILE.mlir", help="transform schedule for --payload")
        add_spec_arguments(cmd)
        cmd.set_defaults(handler=handler)
        return cmd

    text = "execute once and verify against the reference"
    workload_command("run", text, RUN, RUN_EPILOG, kernel.cmd_run)
    text = "verify, then time in a native loop"
    bench = workload_command("bench", text, BENCH, BENCH_EPILOG, kernel.cmd_bench)
    bench.add_argument(
        "--baseline",
        choices=["numpy", "torch"],
        help="also time numpy, or PyTorch eager (the bench extra), on as many threads",
    )
    bench.add_argument("--json", action="store_true", help="print one JSON object")
    bench.add_argument(
        "--dispatches",
        action="store_true",
        help="also time each distinct dispatch of a split payload (a model) on the values "
        "it reads there, and print where the time went, slowest first",
    )
    bench.add_argument(
        "--max-time",
        type=seconds,
        default=1.0,
        metavar="S",
        help="time cap per measurement in seconds, > 0 (default: %(default)s)",
    )
    text = "print the payload after scheduling and after lowering"
    opt = workload_command("opt", text, OPT, OPT_EPILOG, kernel.cmd_opt)
    opt.add_argument("--print-after-all", action="store_true", help="print IR after every pass")
    opt.add_argument(
        "--program",
        metavar="FILE.json",
        help="with --target nvidia-gpu: save the compiled program (PTX, launches, arguments) "
        "and its inputs and expected outputs (FILE.npz) instead of printing IR, to run with "
        "`python -m mlirtune.cli.gpu_run FILE.json` where the GPU is",
    )
    add_tune_parser(commands)
    add_db_parser(commands)
    add_specs_parser(commands)
    add_suite_parser(commands)
    return parser


def _version() -> str:
    from importlib import metadata

    return metadata.version("mlirtune")
