"""The supervisor: runs a command, or a library call, in a contained child process and
reports how it ended (see mlirtune.contain).

The command's parent has imported nothing but the standard library and argparse by the
time it forks, so the child starts at once, with no second interpreter to load; a library
caller's process has, so its calls go to a fresh interpreter (multiprocessing's spawn).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import multiprocessing
import os
import shutil
import signal
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from mlirtune.contain import stages
from mlirtune.contain.report import INTERNAL, death_report
from mlirtune.interfaces.errors import MlirtuneError

Result = TypeVar("Result")
FORWARDED = (signal.SIGTERM, signal.SIGHUP)
PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent exits


def supervise(main: Callable[[list[str]], int], argv: list[str]) -> int:
    """Run `main(argv)` in a forked child and return its exit code; where the child is
    ended by a signal (a compile past its limits or aborted in C++, a crashed kernel),
    print one line saying why and return the CLI's code for it."""
    with _scratch_files() as (record, native_log):
        sys.stdout.flush()
        sys.stderr.flush()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:
            die_with(parent)
            os._exit(_child(main, argv, record, native_log))
        code = _wait(pid)
        state = stages.StageRecord.read(record)
        if code >= 0:
            if code == 0 or state.verbose:
                _replay(native_log)
            return code
        line, exit_code = death_report(code, state, native_log)
        if state.verbose or os.environ.get("MLIRTUNE_DEBUG"):
            _replay(native_log)
        print(line, file=sys.stderr, flush=True)
        return exit_code


def call_contained(function: Callable[..., Result], *args: object) -> Result:
    """`function(*args)` run in a contained child process (a fresh interpreter: both must
    pickle), its result returned; an MlirtuneError it raises is raised here, and a death
    (a compile past its limits, a crash) becomes one."""
    context = multiprocessing.get_context("spawn")
    folder = Path(tempfile.mkdtemp(prefix="mlirtune-contain-"))
    paths = (folder / "stage.json", folder / "native.log")
    try:
        receiver, sender = context.Pipe(duplex=False)
        child = context.Process(
            target=_call_child, args=(os.getpid(), sender, *map(str, paths), function, args)
        )
        child.start()
        sender.close()
        try:
            outcome = receiver.recv()
        except EOFError:
            outcome = None
        child.join()
        if outcome is not None:
            kind, value = outcome
            if kind == "error":
                raise value
            return value
        with _opened(paths[0]) as record, _opened(paths[1]) as native_log:
            line, _ = death_report(child.exitcode or 0, stages.StageRecord.read(record), native_log)
        raise MlirtuneError(line.partition(": error: ")[2] or line)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def _scratch_files() -> Iterator[tuple[int, int]]:
    """Two files, the stage record and C++'s log, open for reading and writing and already
    unlinked: nothing is left behind, whatever ends the parent."""
    folder = Path(tempfile.mkdtemp(prefix="mlirtune-contain-"))
    try:
        record = os.open(folder / "stage.json", os.O_RDWR | os.O_CREAT, 0o600)
        native_log = os.open(folder / "native.log", os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    try:
        yield record, native_log
    finally:
        os.close(record)
        os.close(native_log)


@contextlib.contextmanager
def _opened(path: Path) -> Iterator[int]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        yield fd
    finally:
        os.close(fd)


def _child(main: Callable[[list[str]], int], argv: list[str], record: int, log: int) -> int:
    """The forked child's whole life: C++'s stderr to the log, Python's to the terminal,
    then `main`; returns its exit code (the caller ends the process with it, running no
    `finally` of the parent's frames)."""
    try:
        _split_stderr(log)
        stages.enter(record, log)
        code = main(argv)
    except SystemExit as exit_:
        code = _exit_code(exit_)
    except BaseException:  # a bug in mlirtune reached the top: say so, never hang
        traceback.print_exc()
        code = INTERNAL
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    return code


def _call_child(
    parent: int,
    sender: multiprocessing.connection.Connection,
    record_path: str,
    log_path: str,
    function: Callable[..., object],
    args: tuple[object, ...],
) -> None:
    die_with(parent)  # a killed caller leaves no compile running (a suite run's entry)
    record = os.open(record_path, os.O_RDWR | os.O_CREAT, 0o600)
    log = os.open(log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
    _split_stderr(log)
    stages.enter(record, log)
    try:
        sender.send(("ok", function(*args)))
    except MlirtuneError as error:
        sender.send(("error", error))
    except Exception as error:  # not ours to name: its type and message, as one error
        sender.send(("error", MlirtuneError(f"{type(error).__name__}: {error}")))


def die_with(parent: int) -> None:
    """End this child when its parent, `parent`, is killed (SIGKILL leaves it no time to
    pass the signal on), as the one process the command was before."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # killed before the request took effect
        os._exit(INTERNAL)


def _split_stderr(log: int) -> None:
    """Point file descriptor 2 (C++'s stderr: LLVM's fatal errors, assertions, IR printed
    after passes) at the file open as `log`, and Python's sys.stderr at a copy of the
    terminal's, so that the command's own lines, and progress bars, still reach it."""
    terminal = os.dup(2)
    os.dup2(log, 2)
    sys.stderr = open(terminal, "w", buffering=1, errors="backslashreplace")  # noqa: SIM115


def _wait(pid: int) -> int:
    """Wait for the child, ignoring Ctrl-C here (the child gets it too, and ends as it
    does) and passing on SIGTERM and SIGHUP; its exit code, or minus the signal's number."""
    previous = {signal.SIGINT: signal.signal(signal.SIGINT, signal.SIG_IGN)}
    for number in FORWARDED:
        previous[number] = signal.signal(number, lambda n, _frame: os.kill(pid, n))
    try:
        _, status = os.waitpid(pid, 0)
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    return os.waitstatus_to_exitcode(status)


def _replay(native_log: int) -> None:
    """Copy what C++ wrote (IR printed after each pass, warnings) to the terminal."""
    sys.stderr.flush()
    offset = 0
    with contextlib.suppress(OSError):
        while data := os.pread(native_log, 1 << 20, offset):
            sys.stderr.buffer.write(data)
            offset += len(data)
    sys.stderr.buffer.flush()


def _exit_code(exit_: SystemExit) -> int:
    if exit_.code is None or isinstance(exit_.code, int):
        return exit_.code or 0
    print(exit_.code, file=sys.stderr)
    return 1
