"""A tool run in a child process under the compile limits (MLIRTUNE_COMPILE_MEMORY and
MLIRTUNE_COMPILE_TIMEOUT): torch-mlir's conversion, `iree-compile`, IREE's spec tool. A run
that passes the time limit is stopped and is one error; the caller reads any other failure
from the finished process."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from dataclasses import dataclass

from mlirtune.contain.limits import cap_child, compile_limits
from mlirtune.interfaces.errors import UsageError

# The child's own interpreter and libraries, besides what its compile may grow by (the
# limits' ceiling).
CHILD_BASE_BYTES = 2 << 30


@dataclass(frozen=True)
class ChildRun:
    """A finished child, and the address-space cap it ran under (None: none) with where
    that figure came from."""

    done: subprocess.CompletedProcess
    cap: int | None
    cap_origin: str


def run_capped(arguments: list[str], what: str, stage: str) -> ChildRun:
    """Run `arguments` capped, their output captured; UsageError(stage) naming `what` when
    the time limit stops it. The child leads a process group of its own, and the whole group
    is stopped where the limit passes or the caller is interrupted: a tool that starts
    another (a wrapper script, a linker) leaves nothing running behind it."""
    limits = compile_limits()
    cap = None if limits.ceiling_bytes is None else CHILD_BASE_BYTES + limits.ceiling_bytes
    with subprocess.Popen(
        arguments,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: cap_child(cap),
        start_new_session=True,
    ) as child:
        try:
            stdout, stderr = child.communicate(timeout=limits.timeout_s)
        except subprocess.TimeoutExpired:
            _stop_group(child)
            raise UsageError(
                f"{what} ran past the compile time limit of {limits.timeout_s:g} s "
                f"({limits.timeout_origin}) and was stopped",
                stage=stage,
            ) from None
        except BaseException:  # an interrupt: the child goes with the caller
            _stop_group(child)
            raise
    done = subprocess.CompletedProcess(arguments, child.returncode, stdout, stderr)
    return ChildRun(done, cap, limits.ceiling_origin)


def _stop_group(child: subprocess.Popen) -> None:
    """Kill `child`'s process group and reap the child."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGKILL)
    child.communicate()
