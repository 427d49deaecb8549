"""One compile step in a forked child of the contained process, so that an assertion, a
crash or a step that runs too long in MLIR ends the child, not the command: the caller
gets an MlirtuneError it can recover from (a library schedule that fails drops to the next
path that works, see mlirtune.engine.mlir_jit).

The step gets a share of the compile's time limit (`SHARE`), which leaves the rest to the
path it falls back to. Contexts in a contained process have no thread pool of their own
(mlirtune.ir.context.new_context): a pool's threads are not copied by fork, and a child
that waited on them would never finish.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
from collections.abc import Callable
from dataclasses import replace

from mlirtune.contain import stages
from mlirtune.contain.report import death_report
from mlirtune.contain.stages import COMPILE
from mlirtune.contain.supervisor import die_with
from mlirtune.interfaces.errors import MlirtuneError

# The share of the compile time limit one forked step may take.
SHARE = 0.25


def run_forked(work: Callable[[], bytes], stage: str, where: str) -> bytes:
    """`work()`'s bytes, computed in a forked child under `SHARE` of the compile time
    limit; its MlirtuneError is raised here, and its death becomes one (of `stage`, its
    message starting with `where`)."""
    record, log = stages.current_record(), stages.native_log()
    logged = os.fstat(log).st_size
    limit = _time_limit()
    parent = os.getpid()
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(reader)
        die_with(parent)
        _child(work, writer, limit, stage)
    os.close(writer)
    with os.fdopen(reader, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    stages.rewrite_record()  # the child wrote its stages to the same file
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        if number == signal.SIGALRM:
            text = f"ran past {limit:g} s, its share of the compile time limit, and was stopped"
            line = f"{where}: the step {text}"
        else:
            line, _ = death_report(-number, replace(record, stage=where, kind=COMPILE), log)
            line = line.partition(": error: ")[2] or line
        os.ftruncate(log, logged)  # the error says it; the command's output stays its own
        raise MlirtuneError(line, stage=stage)
    if data[:2] == b"er":
        raise pickle.loads(data[2:])
    if data[:2] != b"ok":
        raise MlirtuneError(f"{where}: the step's process ended without a result", stage=stage)
    return data[2:]


def _time_limit() -> float:
    """SHARE of the compile time limit, no more than the parent's compile has left; 0 for
    none, where the compile has none."""
    from mlirtune.contain.limits import compile_timeout

    limit, _ = compile_timeout()
    if limit is None:
        return 0.0
    left = signal.getitimer(signal.ITIMER_REAL)[0]
    return min(limit * SHARE, left) if left > 0 else limit * SHARE


def _child(work: Callable[[], bytes], writer: int, limit: float, stage: str) -> None:
    signal.setitimer(signal.ITIMER_REAL, limit)  # SIGALRM ends it (stages.enter)
    try:
        result = b"ok" + work()
    except MlirtuneError as error:
        result = b"er" + pickle.dumps(error)
    except BaseException as error:  # not ours to name: its type and message
        result = b"er" + pickle.dumps(MlirtuneError(f"{type(error).__name__}: {error}", stage))
    with contextlib.suppress(BaseException), os.fdopen(writer, "wb") as pipe:
        pipe.write(result)
    os._exit(0)
