"""The parent's side of one tuning worker: start its process, and stop it or tell how it
died. `IsolatedEvaluator` hands the jobs out; `mlirtune.tune.worker` is the child's side."""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from mlirtune.tune.outcome import Outcome
from mlirtune.tune.worker import WorkerSetup, log_tail


@dataclass
class WorkerProcess:
    """A running worker, the job it holds and the phase it last reported."""

    process: subprocess.Popen[bytes]
    connection: Connection
    log_path: str
    job: Any = None
    deadline: float | None = None
    phase: str = "idle"
    ready: bool = False  # set when the worker says it has started (see `_collect`)


def spawn_worker(setup: WorkerSetup, log_path: str) -> WorkerProcess:
    """Start a worker process and send it `setup`, without waiting for it: it starts
    (imports MLIR, computes the reference) while the caller goes on; requests sent meanwhile
    wait in its socket."""
    parent_socket, child_socket = socket.socketpair()
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-P", "-m", "mlirtune.tune.worker", str(child_socket.fileno())],
            pass_fds=[child_socket.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=_worker_environment(),
        )
    child_socket.close()
    parent = Connection(parent_socket.detach())
    parent.send(list(sys.path))
    parent.send_bytes(pickle.dumps(setup))
    return WorkerProcess(process, parent, log_path)


def _worker_environment() -> dict[str, str]:
    """The environment a worker starts in: its `mlirtune` is this process's. With `-m`,
    Python would put the working directory first on the worker's path, so a folder there
    named like a module (another checkout of mlirtune, a stray numpy.py) would have replaced
    it. `-P` leaves the working directory out; this package's root goes first instead."""
    package_root = str(Path(__file__).resolve().parents[2])
    paths = [package_root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def death(worker: WorkerProcess) -> Outcome:
    """The crash outcome of a worker that exited, naming the signal that killed it."""
    code = worker.process.wait(timeout=5)
    if code is not None and code < 0:
        cause = f"killed by {signal.Signals(-code).name}"
    else:
        cause = f"worker exited with status {code}"
    tail = log_tail(worker.log_path)
    return Outcome("crash", detail=f"{cause} during {worker.phase}" + (f": {tail}" if tail else ""))


def ask_to_exit(worker: WorkerProcess) -> None:
    """Tell an idle worker to exit (once)."""
    if worker.job is None and not worker.connection.closed and worker.phase != "exit":
        worker.phase = "exit"
        with contextlib.suppress(OSError):
            worker.connection.send(None)


def stop(worker: WorkerProcess) -> None:
    """Ask an idle worker to exit; kill a busy (failed or hung) one at once."""
    if worker.job is None and worker.process.poll() is None:
        ask_to_exit(worker)
        with contextlib.suppress(subprocess.TimeoutExpired):
            worker.process.wait(timeout=1)
    if worker.process.poll() is None:
        worker.process.kill()
        worker.process.wait(timeout=5)
    worker.connection.close()
