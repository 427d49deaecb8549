"""The limits a contained compile runs under, and the address-space cap of child processes.

A compile may grow the process by the compile ceiling: half the memory available when it
begins, or MLIRTUNE_COMPILE_MEMORY (bytes or a fraction). A sound compile grows it by tens
of megabytes (a matmul: 18 MiB for a process's first lowering, 65 MiB for its first JIT
compile, 2-4 MiB later). It may take MLIRTUNE_COMPILE_TIMEOUT seconds, 300 by default:
the largest model compiles here take seconds, a runaway one takes until it is stopped.
"""

from __future__ import annotations

import math
import os
import resource
from dataclasses import dataclass

from mlirtune.interfaces.errors import UsageError

MEMORY_VARIABLE = "MLIRTUNE_COMPILE_MEMORY"
TIMEOUT_VARIABLE = "MLIRTUNE_COMPILE_TIMEOUT"
DEFAULT_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class CompileLimits:
    """How much a compile may grow the process (None: unknown, so unlimited) and for how
    long it may run (None: no limit), each with where the figure came from."""

    ceiling_bytes: int | None
    ceiling_origin: str
    timeout_s: float | None
    timeout_origin: str


def compile_limits() -> CompileLimits:
    """The limits from the environment (a malformed value is a UsageError naming it)."""
    from mlirtune.memory import DEFAULT_FRACTION, budget_of, parse_budget  # MLIR: on use

    text = os.environ.get(MEMORY_VARIABLE, "").strip()
    if text:
        ceiling = budget_of(parse_budget(text, MEMORY_VARIABLE), f"{MEMORY_VARIABLE}={text}")
    else:
        ceiling = budget_of(DEFAULT_FRACTION, "the default fraction")
    timeout, timeout_origin = compile_timeout()
    return CompileLimits(
        ceiling.bytes if ceiling else None,
        ceiling.origin if ceiling else "",
        timeout,
        timeout_origin,
    )


def compile_timeout() -> tuple[float | None, str]:
    """MLIRTUNE_COMPILE_TIMEOUT in seconds (0: none), else the default, and its origin."""
    text = os.environ.get(TIMEOUT_VARIABLE, "").strip()
    if not text:
        return DEFAULT_TIMEOUT_S, "the default"
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds < 0:
        raise UsageError(
            f"{TIMEOUT_VARIABLE}={text!r} is not a time limit: give seconds (e.g. 600), "
            "or 0 for none",
            stage="limits",
        )
    return (seconds or None), f"{TIMEOUT_VARIABLE}={text}"


def lower_address_space(limit: int) -> tuple[int, int]:
    """Cap this process's address space at `limit` bytes, or at the hard limit where that
    is lower (a process may not raise it); returns the previous (soft, hard) pair."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    return soft, hard


def cap_child(memory_bytes: int | None) -> None:
    """In a child process before it runs (`preexec_fn`): cap its address space at
    `memory_bytes` (never above a limit it inherited) and write no core dumps."""
    if memory_bytes is not None:
        lower_address_space(memory_bytes)
    no_core_dumps()


def no_core_dumps() -> None:
    """A crash leaves no core file: the supervisor reports it in one line instead."""
    _, hard = resource.getrlimit(resource.RLIMIT_CORE)
    resource.setrlimit(resource.RLIMIT_CORE, (0, hard))
