"""Helpers every command shares: workload, target, pipeline and parameter arguments."""

from __future__ import annotations

import argparse
import math
import os
import re
import textwrap
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from mlirtune.interfaces.errors import UsageError

if TYPE_CHECKING:  # imported on use below: `mlirtune --help` stays fast
    from mlirtune.interfaces.engine import Engine
    from mlirtune.interfaces.lowering import Descriptor
    from mlirtune.interfaces.target import Target
    from mlirtune.iree.engine import IreeEngine
    from mlirtune.specs.specset import SpecSet

DESCRIPTION_WIDTH = 88
SEED_MAX = 2**32 - 1  # Optuna's and numpy's seeds are unsigned 32-bit


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (the CLI's convention), exit 2."""

    def error(self, message: str) -> NoReturn:
        # "argument --budget: must be ..." -> "--budget must be ...", as TuneOptions.check says
        message = re.sub(r"^argument (\S+): must be ", r"\1 must be ", message)
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def integer(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse `type=` accepting the integers in [low, high] (no upper bound: None)."""
    if high is not None:
        allowed = f"an integer from {low} to {high}"
    else:
        sign = {0: "a non-negative number ", 1: "a positive number "}.get(low, "")
        allowed = f"{sign}(an integer >= {low})" if sign else f"an integer >= {low}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {allowed}, not {text!r}") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be {allowed}, not {value}")
        return value

    return parse


def seconds(text: str) -> float:
    """An argparse `type=` for a duration: a finite number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, not {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive and finite (seconds), not {text}")
    return value


def plural(count: int, noun: str, many: str | None = None) -> str:
    """`count` and `noun`, pluralised: 1 entry, 2 entries, 0 configs."""
    if count == 1:
        return f"1 {noun}"
    if many is None:
        consonant_y = noun.endswith("y") and noun[-2:-1] not in ("a", "e", "i", "o", "u")
        many = noun[:-1] + "ies" if consonant_y else noun + "s"
    return f"{count} {many}"


def target_of(args: argparse.Namespace) -> Target:
    """The --target, on --threads cores where the command takes it (the host only)."""
    from mlirtune.targets import HostCPU, NvidiaGPU, target_named
    from mlirtune.targets.host_cpu import restrict_isa, with_fma_in_flight

    target = target_named(args.target)
    chip = getattr(args, "chip", None)
    if chip:
        if not isinstance(target, NvidiaGPU):
            raise UsageError(f"--chip applies to --target nvidia-gpu, not {args.target}")
        target = NvidiaGPU(chip=chip)
    threads, isa = getattr(args, "threads", 1), getattr(args, "isa", None)
    if threads == 1 and not isa:
        return target
    if not isinstance(target, HostCPU):
        given = " and ".join(
            name for name, on in (("--threads", threads > 1), ("--isa", isa)) if on
        )
        raise UsageError(f"{given} applies to the host target, not {args.target}")
    features = with_fma_in_flight(restrict_isa(target.features, isa)) if isa else target.features
    return HostCPU(features, threads=threads)


def pipeline_of(args: argparse.Namespace) -> str | Descriptor | None:
    if getattr(args, "schedule", None):
        if args.pipeline:
            raise UsageError("give either --pipeline or --schedule, not both")
        from mlirtune.pipeline import with_schedule_file

        return with_schedule_file(args.schedule, target_of(args))
    return args.pipeline


def engine_of(args: argparse.Namespace) -> Engine:
    from mlirtune.api import engine_for

    target = target_of(args)
    if getattr(args, "engine", "mlir") == "iree":
        return iree_engine_of(args, target)
    specs, use_specs = specs_of(args, target)
    return engine_for(target, pipeline_of(args), specs=specs, use_specs=use_specs)


def iree_engine_of(args: argparse.Namespace, target: Target) -> IreeEngine:
    """--engine iree: IREE's llvm-cpu backend on the host, one thread; --spec is a tuning
    spec for iree-compile."""
    from pathlib import Path

    from mlirtune.iree.engine import IreeEngine
    from mlirtune.targets import HostCPU

    if not isinstance(target, HostCPU) or getattr(args, "threads", 1) > 1:
        raise UsageError("--engine iree runs on the host CPU, on one thread (local-sync)")
    if getattr(args, "no_specs", False) or len(getattr(args, "spec", None) or []) > 1:
        raise UsageError("--engine iree takes one --spec (a tuning spec file), or none")
    spec = Path(args.spec[0]) if getattr(args, "spec", None) else None
    if spec is not None and not spec.is_file():
        raise UsageError(f"--spec {spec}: no such tuning spec file")
    engine = IreeEngine(target, spec)
    tuned_on = engine.spec_tuned_on().get("class")
    if tuned_on and tuned_on != target.hardware_class():
        import warnings

        from mlirtune.specs.specset import SpecWarning

        warnings.warn(
            f"--spec {spec} was tuned on CPU class {tuned_on}, not on this host's "
            f"({target.hardware_class()}); IREE applies it whole, so its configs may not suit "
            "here: tune this host's own with `mlirtune tune --engine iree`",
            SpecWarning,
            stacklevel=2,
        )
    return engine


def specs_of(args: argparse.Namespace, target: Target) -> tuple[SpecSet | None, bool]:
    """(libraries, whether to apply any) for --spec / --no-specs; (None, True) when neither
    is given: the configured libraries and the target's shipped defaults."""
    if getattr(args, "no_specs", False):
        if getattr(args, "spec", None):
            raise UsageError("give --spec or --no-specs, not both")
        return None, False
    if getattr(args, "spec", None):
        from mlirtune.specs.specset import SpecSet

        return SpecSet.for_target(target, args.spec), True
    return None, True


def add_spec_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument(
        "--spec",
        action="append",
        default=[],
        metavar="PATH|URL",
        help="tuning-spec library (.mlir/.mlirbc, a directory of them, or an https URL "
        "with an optional #sha256=HEX pin) applied before $MLIRTUNE_SPECS, the config "
        "directory and the target's defaults; repeatable, earlier wins (with --engine iree: "
        "one tuning spec file iree-compile applies)",
    )
    cmd.add_argument(
        "--no-specs",
        action="store_true",
        help="apply no spec library: the parameter selector chooses the config",
    )


def workload_of(args: argparse.Namespace):
    given = [f"--{name}" for name in ("inputs", "expect") if getattr(args, name, None)]
    if given and not args.payload:
        raise UsageError(
            f"{' and '.join(given)} {'apply' if len(given) > 1 else 'applies'} to --payload "
            "only: a built-in workload or a PyTorch module makes its own inputs and reference"
        )
    torch_factory = getattr(args, "torch", None)
    if torch_factory:
        if args.workload or args.payload:
            raise UsageError("give one of a workload name, --payload or --torch")
        from mlirtune.torch.factory import workload_from_factory

        return workload_from_factory(torch_factory, getattr(args, "batch", None))
    if getattr(args, "batch", None) is not None:
        raise UsageError("--batch applies to --torch problem files, whose batch_size it sets")
    if args.payload:
        from mlirtune.workloads.from_file import FromFile

        if args.workload:
            raise UsageError("give either a workload name or --payload, not both")
        return FromFile(
            args.payload,
            entry=args.entry,
            inputs=split_list(args.inputs),
            expect=split_list(args.expect),
        )
    if not args.workload:
        raise UsageError("name a workload (see `mlirtune list`) or give --payload FILE")

    from mlirtune.workloads import workload_class

    cls = workload_class(args.workload)
    return cls.from_strings(pairs(args.options, "workload option"))


def pairs(items: list[str], what: str) -> dict[str, str]:
    pairs = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise UsageError(f"{what} {item!r} is not KEY=VALUE")
        pairs[key] = value
    return pairs


def schedule_params(items: list[str]) -> dict[str, int]:
    params = {}
    for key, value in pairs(items, "--param").items():
        try:
            params[key] = int(value)
        except ValueError:
            raise UsageError(f"--param {key}={value!r} is not an integer") from None
    return params


def split_list(text: str | None) -> list[str]:
    return [part for part in (text or "").split(",") if part]


def label(description: dict[str, Any]) -> str:
    name = description.get("name", "?")
    rest = " ".join(f"{k}={v}" for k, v in description.items() if k != "name")
    return f"{name} {rest}".strip()


def add_command(
    commands: Any, name: str, help_text: str, epilog: str, description: str | None = None
) -> argparse.ArgumentParser:
    """A subcommand whose --help shows `description` (default: `help_text`), filled to 88
    columns, and the examples in `epilog` verbatim."""
    paragraphs = (description or help_text).split("\n\n")
    cmd = commands.add_parser(
        name,
        help=help_text,
        description="\n\n".join(textwrap.fill(text, DESCRIPTION_WIDTH) for text in paragraphs),
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_verbose_argument(cmd)
    return cmd


def add_verbose_argument(cmd: argparse.ArgumentParser) -> None:
    """--verbose, which every command takes, before or after its name."""
    cmd.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show errors whole (MLIR's diagnostics with their notes, the context of a YAML "
        "error) and what MLIR and LLVM printed; also MLIRTUNE_DEBUG=1",
    )


def add_command_group(subparsers: Any, name: str, help_text: str, epilog: str):
    """A command with subcommands (e.g. `mlirtune db list`); returns `add(name, help_text,
    handler)`, which registers one subcommand and returns its parser (with the group's
    epilog, unless given its own `description` and `own_epilog`)."""
    group = add_command(subparsers, name, help_text, epilog)
    commands = group.add_subparsers(dest=f"{name}_command", required=True, metavar="COMMAND")

    def add(
        command: str,
        text: str,
        handler,
        description: str | None = None,
        own_epilog: str | None = None,
    ) -> argparse.ArgumentParser:
        cmd = add_command(commands, command, text, own_epilog or epilog, description)
        cmd.set_defaults(handler=handler)
        return cmd

    return add


def add_db_argument(cmd: argparse.ArgumentParser) -> None:
    from pathlib import Path

    cmd.add_argument(
        "--db",
        type=Path,
        metavar="PATH",
        help="tuning database (default: $MLIRTUNE_DB, else $XDG_CACHE_HOME/mlirtune/tuning.db, "
        "else ~/.cache/mlirtune/tuning.db)",
    )


def add_target_argument(cmd: argparse.ArgumentParser) -> None:
    from mlirtune.targets import TARGETS

    cmd.add_argument(
        "--target",
        choices=sorted(TARGETS),
        default="host",
        help="compilation target (default: %(default)s, with the detected CPU features)",
    )
    cmd.add_argument(
        "--isa",
        choices=["avx2", "sse"],
        help="restrict the host's kernels to a narrower ISA than its CPU has, e.g. avx2 on an "
        "AVX-512 machine to measure an AVX2 CPU class (also $MLIRTUNE_ISA; with numpy's side "
        "restricted too: OPENBLAS_CORETYPE=Haswell)",
    )
    cmd.add_argument(
        "--engine",
        choices=["mlir", "iree"],
        default="mlir",
        help="mlir: this project's schedules through the MLIR JIT (default); iree: IREE's "
        "llvm-cpu backend (iree-compile, local-sync runtime), its dispatches' lowering "
        "configs tuned with --param and `tune` (needs the iree extra)",
    )
    cmd.add_argument(
        "--chip",
        metavar="sm_NN",
        help="with --target nvidia-gpu: the compute capability to compile for, e.g. sm_90 "
        "for an H100 or H200 (default: sm_80)",
    )


def add_workload_arguments(cmd: argparse.ArgumentParser) -> None:
    """The workload (name + KEY=VALUE options, or --payload ...), --pipeline and --target."""
    cmd.add_argument("workload", nargs="?", help="built-in workload name (see list)")
    cmd.add_argument("options", nargs="*", metavar="KEY=VALUE", help="workload options")
    cmd.add_argument("--payload", metavar="FILE.mlir", help="run a payload from a file")
    cmd.add_argument(
        "--torch",
        metavar="FILE.py[:FACTORY]",
        help="import a PyTorch module: FACTORY() in FILE.py returns (module, example_inputs); "
        "without FACTORY, FILE.py is a problem file defining Model, get_inputs() and "
        "get_init_inputs() (KernelBench's convention); needs the torch extra",
    )
    cmd.add_argument(
        "--batch",
        type=integer(1),
        metavar="N",
        help="with a --torch problem file: its batch_size, set before its inputs are made",
    )
    cmd.add_argument(
        "--entry",
        default="payload",
        metavar="NAME",
        help="entry function of --payload (default: %(default)s)",
    )
    cmd.add_argument(
        "--inputs",
        metavar="A.npy,...",
        help="input arrays for --payload (default: seeded random values)",
    )
    cmd.add_argument(
        "--expect",
        metavar="OUT.npy,...",
        help="expected outputs for --payload (default: none, nothing is checked)",
    )
    cmd.add_argument(
        "--pipeline",
        metavar="NAME|FILE.yaml",
        help="pipeline descriptor (default: looked up by workload and root-op kind)",
    )
    add_target_argument(cmd)
    cores = os.cpu_count() or 1
    count = integer(0, cores)
    cmd.add_argument(
        "--threads",
        type=lambda text: count(text) or cores,  # 0: every core, counted here once
        default=1,
        metavar="N",
        help=f"cores a kernel's outer block loops are spread over, 0 to {cores} (0: all of "
        "them; default: %(default)s, which keeps timings comparable across hosts); numpy "
        "baselines use as many BLAS threads",
    )
