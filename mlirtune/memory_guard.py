"""A memory ceiling on the compiles the `mlirtune` command runs.

Lowering and JIT compilation run in this process, in C++, and cannot be interrupted from
Python: a schedule that sends a pass into an endless loop takes the machine's memory and
leaves the kernel's OOM killer to choose a victim (one such, packed register tiles of one
row, grew past 14 GB in two minutes). While a guarded compile runs, a watchdog thread
samples the process's resident memory; once the compile has grown it by more than the
ceiling (half the memory available when the compile began, or MLIRTUNE_COMPILE_MEMORY),
the watchdog prints one error naming the stage that was running and ends the process with
exit code 2. A sound compile grows it by tens of megabytes at most (measured on a matmul:
18 MiB for a process's first lowering, 65 MiB for its first JIT compile, 2-4 MiB later).

Only the command turns the guard on (`compiles_guarded`): a library caller's process is
its own to end. The tuner's workers need none: their address space is capped, and a worker
that dies is recorded as a crashed candidate.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator

from mlirtune.interfaces.errors import MlirtuneError

CEILING_VARIABLE = "MLIRTUNE_COMPILE_MEMORY"
POLL_S = 0.01  # a lowering takes 50 ms and more; a runaway grew 100 MB/s: 1 MB past at most
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")

_enabled = False
_watch: _Watch | None = None  # the running guard's watchdog (guards nest: one watches)


@contextlib.contextmanager
def compiles_guarded() -> Iterator[None]:
    """Guard the compiles this process runs within the block (the command's run)."""
    global _enabled
    before, _enabled = _enabled, True
    try:
        yield
    finally:
        _enabled = before


def resident_bytes() -> int:
    """This process's resident memory, from /proc/self/statm."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * _PAGE_BYTES


@contextlib.contextmanager
def guarded(stage: str) -> Iterator[None]:
    """Run the block under the guard, `stage` (e.g. a pipeline stage's origin) named if it
    trips; inside a guarded block, only the stage name changes."""
    global _watch
    if _watch is not None:
        outer, _watch.stage = _watch.stage, stage
        try:
            yield
        finally:
            _watch.stage = outer
        return
    ceiling = _ceiling() if _enabled else None
    if ceiling is None:
        yield
        return
    _watch = _Watch(stage, *ceiling)
    _watch.start()
    try:
        yield
    finally:
        _watch.stop()
        _watch = None


def _ceiling() -> tuple[int, str] | None:
    """The growth a compile may reach, and where the figure came from."""
    from mlirtune.memory import DEFAULT_FRACTION, budget_of, parse_budget  # MLIR: not at start

    text = os.environ.get(CEILING_VARIABLE, "").strip()
    if text:
        ceiling = budget_of(parse_budget(text, CEILING_VARIABLE), f"{CEILING_VARIABLE}={text}")
    else:
        ceiling = budget_of(DEFAULT_FRACTION, "the default fraction")
    return None if ceiling is None else (ceiling.bytes, ceiling.origin)


class _Watch(threading.Thread):
    def __init__(self, stage: str, limit: int, origin: str) -> None:
        super().__init__(name="mlirtune-memory-guard", daemon=True)
        self.stage, self.limit, self.origin = stage, limit, origin
        self.start_bytes = resident_bytes()
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(POLL_S):
            grown = resident_bytes() - self.start_bytes
            if grown > self.limit:
                from mlirtune.memory import format_bytes, how_to_change

                error = MlirtuneError(
                    f"the compile grew this process by {format_bytes(grown)}, past its ceiling "
                    f"of {format_bytes(self.limit)} ({self.origin}), and was stopped before it "
                    "could exhaust the machine. A lowering that keeps growing is a bug in its "
                    f"schedule or pipeline; {how_to_change(CEILING_VARIABLE)}",
                    stage=self.stage,
                )
                sys.stdout.flush()
                print(f"mlirtune: error: {error}", file=sys.stderr, flush=True)
                os._exit(error.exit_code)

    def stop(self) -> None:
        self._done.set()
        self.join()
