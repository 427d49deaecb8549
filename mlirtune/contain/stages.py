"""The contained process's side: the stage it is in, recorded for the supervisor, and the
limits its compiles run under.

Outside a contained process (a library caller's, a test's), `compiling` and `running` do
nothing: only `enter`, which the supervisor's child calls first, turns them on.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
from collections.abc import Iterator
from dataclasses import asdict, dataclass

from mlirtune.interfaces.errors import MlirtuneError

COMPILE, RUN = "compile", "run"


@dataclass
class StageRecord:
    """What the supervisor reads once the child has ended: the stage it was in (None:
    outside any), whether that was a compile or a kernel running, and the compile's
    limits as the error line states them."""

    stage: str | None = None
    kind: str | None = None
    ceiling: str = ""
    timeout: str = ""
    verbose: bool = False

    @staticmethod
    def read(fd: int) -> StageRecord:
        """The record in the file open as `fd`; an empty one where the child wrote none (or
        half of one)."""
        try:
            fields = json.loads(os.pread(fd, 1 << 16, 0) or b"{}")
            return StageRecord(**fields)
        except (OSError, ValueError, TypeError):
            return StageRecord()


class _Recorder:
    def __init__(self, fd: int, native_log: int) -> None:
        self.fd, self.native_log = fd, native_log
        self.record = StageRecord()

    def write(self) -> None:
        data = json.dumps(asdict(self.record)).encode()
        os.pwrite(self.fd, data, 0)
        os.ftruncate(self.fd, len(data))


_recorder: _Recorder | None = None


def enter(record: int, native_log: int) -> None:
    """Make this process a contained one: its stages go to the file open as `record`, its
    compiles run under limits, a crash leaves no core file, and SIGALRM (the compile timer)
    ends it. C++ writes its messages to the file open as `native_log` (stderr)."""
    global _recorder
    from mlirtune.contain.limits import no_core_dumps

    no_core_dumps()
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    _recorder = _Recorder(record, native_log)
    _recorder.write()


def contained() -> bool:
    """Whether this process is a contained one (its compiles run under limits)."""
    return _recorder is not None


def current_record() -> StageRecord | None:
    """The stage this contained process is in (None outside one)."""
    return None if _recorder is None else _recorder.record


def rewrite_record() -> None:
    """Write this process's stage again, after a forked child wrote its own to the file."""
    if _recorder is not None:
        _recorder.write()


def native_log() -> int:
    """The file C++ writes its messages to in this contained process (-1 outside one)."""
    return -1 if _recorder is None else _recorder.native_log


def cxx_reason() -> str | None:
    """In a contained process, the line of C++'s output that says why it last failed ("" if
    none); None elsewhere, where C++ writes to the terminal itself."""
    if _recorder is None:
        return None
    from mlirtune.contain.native import native_reason

    return native_reason(_recorder.native_log)


def set_verbose(verbose: bool) -> None:
    """Whether the supervisor shows C++'s whole output beside a failure's one line."""
    if _recorder is not None:
        _recorder.record.verbose = verbose
        _recorder.write()


@contextlib.contextmanager
def compiling(stage: str) -> Iterator[None]:
    """Run a compile step named `stage` (a pipeline stage's origin, "jit"). In a contained
    process the outermost one runs under the compile limits (`limits.compile_limits`);
    nested ones only rename the stage. Running out of memory under the ceiling, where it
    surfaces in Python (std::bad_alloc as MemoryError), is an MlirtuneError naming it."""
    recorder = _recorder
    if recorder is None:
        yield
        return
    record = recorder.record
    outer = (record.stage, record.kind, record.ceiling, record.timeout)
    limited = record.kind != COMPILE
    restore: tuple[int, int] | None = None
    if limited:
        restore = _start_limits(record)
    record.stage, record.kind = stage, COMPILE
    recorder.write()
    try:
        yield
    except MemoryError:
        raise MlirtuneError(
            f"the compile ran out of memory under its ceiling of {record.ceiling}",
            stage=stage,
        ) from None
    finally:
        if limited:
            signal.setitimer(signal.ITIMER_REAL, 0)
            if restore is not None:
                resource.setrlimit(resource.RLIMIT_AS, restore)
        record.stage, record.kind, record.ceiling, record.timeout = outer
        recorder.write()


@contextlib.contextmanager
def running(stage: str) -> Iterator[None]:
    """Run compiled code (a kernel's call, its timing): recorded, so that a crash is
    reported as the kernel's, with the signal that ended it."""
    recorder = _recorder
    if recorder is None:
        yield
        return
    record = recorder.record
    outer = (record.stage, record.kind)
    record.stage, record.kind = stage, RUN
    recorder.write()
    try:
        yield
    finally:
        record.stage, record.kind = outer
        recorder.write()


def _start_limits(record: StageRecord) -> tuple[int, int] | None:
    """Cap the address space at its size now plus the ceiling and start the compile timer;
    returns the RLIMIT_AS pair to restore (None: left as it was)."""
    from mlirtune.contain.limits import compile_limits, lower_address_space
    from mlirtune.memory import address_space_bytes, format_bytes

    limits = compile_limits()
    restore = None
    if limits.ceiling_bytes is not None:
        record.ceiling = f"{format_bytes(limits.ceiling_bytes)} ({limits.ceiling_origin})"
        restore = lower_address_space(address_space_bytes() + limits.ceiling_bytes)
    if limits.timeout_s is not None:
        record.timeout = f"{limits.timeout_s:g} s ({limits.timeout_origin})"
        signal.setitimer(signal.ITIMER_REAL, limits.timeout_s)
    return restore
