"""A tool run in a child process under the compile limits (MLIRTUNE_COMPILE_MEMORY and
MLIRTUNE_COMPILE_TIMEOUT): torch-mlir's conversion, `iree-compile`, IREE's spec tool. A run
that passes the time limit is stopped and is one error; the caller reads any other failure
from the finished process."""

from __future__ import annotations

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
    the time limit stops it."""
    limits = compile_limits()
    cap = None if limits.ceiling_bytes is None else CHILD_BASE_BYTES + limits.ceiling_bytes
    try:
        done = subprocess.run(
            arguments,
            capture_output=True,
            text=True,
            timeout=limits.timeout_s,
            preexec_fn=lambda: cap_child(cap),
        )
    except subprocess.TimeoutExpired:
        raise UsageError(
            f"{what} ran past the compile time limit of {limits.timeout_s:g} s "
            f"({limits.timeout_origin}) and was stopped",
            stage=stage,
        ) from None
    return ChildRun(done, cap, limits.ceiling_origin)
