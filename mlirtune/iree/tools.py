"""IREE's command-line tools, run contained: `iree-compile` and the spec tool's child.

Each runs in a child process under the compile limits (MLIRTUNE_COMPILE_MEMORY and
MLIRTUNE_COMPILE_TIMEOUT), so a compile that runs away costs one error, not the machine.
A failure is one line: IREE's first diagnostic.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

from mlirtune.contain.child import run_capped
from mlirtune.interfaces.errors import UsageError

EXTRA = "pip install 'mlirtune[iree]'"
TARGET_FLAGS = (
    "--iree-hal-target-device=local",
    "--iree-hal-local-target-device-backends=llvm-cpu",
    "--iree-llvmcpu-target-cpu=host",
)


def require_iree() -> None:
    """Raise a UsageError naming the extra where IREE's compiler or runtime is missing."""
    missing = [
        name
        for name in ("iree.compiler", "iree.runtime")
        if importlib.util.find_spec(name.split(".")[0]) is None
        or importlib.util.find_spec(name) is None
    ]
    if missing or tool_path("iree-compile") is None:
        raise UsageError(
            f"IREE is not installed ({', '.join(missing) or 'no iree-compile'}): {EXTRA}",
            stage="iree",
        )


def tool(name: str) -> str:
    """The path of IREE's tool `name`; a UsageError naming the extra where it is missing."""
    require_iree()
    path = tool_path(name)
    if path is None:
        raise UsageError(f"IREE's {name} is not installed: {EXTRA}", stage="iree")
    return path


def tool_path(name: str) -> str | None:
    """IREE's tool `name`: the compiler package's own executable where it ships one (the
    console script of that name is a Python wrapper that loads the whole compiler library
    only to start it, and a time limit that stops the wrapper left the compile running),
    else the tool beside this interpreter (its virtual environment), else on PATH."""
    try:
        compiler = importlib.util.find_spec("iree.compiler")
    except ModuleNotFoundError:
        compiler = None
    for folder in (compiler and compiler.submodule_search_locations) or []:
        binary = Path(folder) / "_mlir_libs" / name
        if binary.is_file() and os.access(binary, os.X_OK):
            return str(binary)
    beside = Path(sys.executable).with_name(name)
    return str(beside) if beside.exists() else shutil.which(name)


def run_tool(arguments: list[str], what: str) -> subprocess.CompletedProcess:
    """Run `arguments` (an IREE tool or a Python child) contained; a failure raises a
    UsageError(stage="iree") that names `what` and IREE's first diagnostic."""
    done = run_capped(arguments, what, "iree").done
    if done.returncode != 0:
        raise UsageError(f"{what} failed: {first_diagnostic(done)}", stage="iree")
    return done


def first_diagnostic(done: subprocess.CompletedProcess) -> str:
    """The first `error:` line of a failed tool's output, else its last line, else how it
    ended (a signal: likely its memory cap)."""
    lines = [line.strip() for line in (done.stderr + done.stdout).splitlines() if line.strip()]
    errors = [line for line in lines if "error:" in line]
    if errors:
        return errors[0]
    if lines:
        return lines[-1]
    if done.returncode < 0:
        return f"killed by signal {-done.returncode} (out of memory under its cap?)"
    return f"exit status {done.returncode}"


def iree_compile(source: Path, output: Path, *flags: str) -> None:
    """`iree-compile` for this host's CPU (llvm-cpu, local devices), with `flags`."""
    run_tool(
        [tool("iree-compile"), str(source), *TARGET_FLAGS, *flags, "-o", str(output)],
        "iree-compile",
    )


def spec_tool(*arguments: str) -> str:
    """Run `mlirtune/iree/spec_tool.py` with `arguments` in a child process (IREE's
    bindings load there); its standard output."""
    require_iree()
    script = Path(__file__).with_name("spec_tool.py")
    return run_tool([sys.executable, "-I", str(script), *arguments], "the IREE spec tool").stdout
