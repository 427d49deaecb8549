"""The worker process side of isolated evaluation.

A worker compiles, verifies and times one candidate at a time for one workload. It runs
under a memory cap, with its output redirected to a log file, and tells the parent which
phase it is in so that the parent can apply the right timeout. Timing holds an exclusive
file lock, so only one candidate is measured at a time: the worker holding it pins itself
to the benchmark core and moves its sibling workers and the parent (listed by the parent in
a file) off that core until it is done, so that compilation uses every core except while a
candidate is being timed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import pickle
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

import numpy as np

from mlirtune.bench.harness import run_benchmark
from mlirtune.contain.limits import cap_child
from mlirtune.engine.mlir_jit import MlirJitEngine
from mlirtune.engine.ptx import PtxEngine
from mlirtune.interfaces.bench import BenchOptions
from mlirtune.interfaces.engine import Engine
from mlirtune.interfaces.errors import MlirtuneError, VerificationError
from mlirtune.interfaces.target import Target
from mlirtune.interfaces.workload import Workload
from mlirtune.ir.context import COMPILE_CHECKS
from mlirtune.memory import WORKER_OVERHEAD_BYTES, check_memory, set_memory_budget
from mlirtune.runtime.openmp import release_threads
from mlirtune.tune.outcome import Outcome

# Short measurements (15 to 30 ms of samples): finalists are re-measured against the
# baseline before a winner is declared, so a candidate only needs to be ranked, not timed to
# 1%. Where the 2% interval is not reached sooner, the machine's drift between measurements
# outweighs the sampling error: 40 configs of a 256^3 matmul on a noisy 2-core VM, each
# measured 8 times, erred from a long interleaved measurement by a median 6.1% with a 50 ms
# cap and 5.4% with 30 ms, and the top 3 by either cap held equally fast configs.
# The warm-up is a millisecond: the verification's call has just run the kernel on the same
# buffers, and a millisecond of calls refills the benchmark core's caches after the move to
# it. The same 40 configs, 8 times each, warmed up 5 ms or by a single call: 40.3 -> 33.3 ms
# per measurement, median error 5.1% -> 5.0%, best-of-top-3 regret 1.028 -> 1.007; and
# again (other configs) 37.9 -> 31.3 ms, 3.0% -> 2.7%, 1.002 -> 1.005.
TUNING_BENCH = BenchOptions(
    warmup_s=0.001, target_sample_s=0.001, min_samples=10, max_time_s=0.03, rel_ci=0.02
)
# Each round of the final race measures every finalist and the baseline once: 20 samples of
# 2 ms (the minimum it always took), no longer capped at 0.3 s. The race's verdict rests on
# the sign of each round's difference, whose false-positive rate (2^-rounds) holds for any
# round length; longer rounds barely sharpened it, because the spread comes from round to
# round: on a 256^3 matmul the finalist/baseline ratio varied by 2-2.7% (robust sd) between
# rounds of 0.3 s, while the median of a round's first 20 samples was within 1.1% of that of
# all of them.
RACE_BENCH = BenchOptions(
    warmup_s=0.005, target_sample_s=0.002, min_samples=20, max_time_s=0.04, rel_ci=0.01
)


def settled(samples: list[list[list[float]]]) -> bool:
    """Whether a race's verdict is known from the rounds so far (samples per config, per
    round, the baseline first): every other config has had a round whose median was not
    below the baseline's, so none can have beaten it in every round."""
    if not samples or not samples[0]:
        return False
    base = [float(np.median(r)) for r in samples[0]]
    return all(
        any(float(np.median(r)) >= b for r, b in zip(rounds, base, strict=False))
        for rounds in samples[1:]
    )


# make_engine(target, pipeline, use_specs=...): the engine a worker uses, the host's JIT
# engine (it compiles, runs and times a candidate, then clears its cache), IREE's (the same,
# through iree-compile: mlirtune/iree) or the PTX engine (it compiles programs for a GPU to
# time: "compile" requests).
EngineFactory = Callable[..., Engine]


@dataclass(frozen=True)
class WorkerSetup:
    """Everything a worker needs, sent once when it starts (pickled)."""

    workload: Workload
    target: Target
    pipeline: str | None
    make_engine: EngineFactory
    bench_options: BenchOptions
    memory_bytes: int
    cores: frozenset[int]
    bench_core: int
    lock_path: str
    pids_dir: str  # holds a `*.pids` list per evaluator timing on the benchmark core
    log_path: str
    runs: bool = True  # False: it only compiles programs, so needs no reference outputs


def main() -> None:
    """Entry point of `python -m mlirtune.tune.worker FD`: FD is a socket to the parent.
    The first message is the parent's sys.path (so that workloads defined in the parent's
    modules unpickle here), then the pickled WorkerSetup."""
    connection = Connection(socket.socket(fileno=int(sys.argv[1])).detach())
    sys.path[:] = connection.recv()
    setup: WorkerSetup = pickle.loads(connection.recv_bytes())
    try:
        serve(connection, setup)
    except (EOFError, BrokenPipeError, ConnectionResetError):
        # The parent is gone (killed: it closes a worker's socket only once the worker has
        # exited). Nobody is left to remove its scratch folder, so the first worker to notice
        # does; the logs in it had no reader left either.
        shutil.rmtree(Path(setup.log_path).parent, ignore_errors=True)
    # Exit at once: tearing down MLIR and LLVM takes about 0.2 s and frees nothing the
    # operating system does not; the log is flushed first.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def serve(connection: Connection, setup: WorkerSetup) -> None:
    """Serve ("evaluate", params, cutoff_s), ("race", [params], rounds, until_settled) and
    ("compile", params, path) requests until None; EOFError or BrokenPipeError when the
    parent goes away."""
    _redirect_output(setup.log_path)
    # Temporary files (an engine's scratch, such as IREE's) go to the evaluator's scratch
    # folder, which it removes on close: a worker exits at once, cleaning up nothing.
    tempfile.tempdir = str(Path(setup.log_path).parent)
    cap_child(setup.memory_bytes)  # never above a limit it was given
    # The parent admitted the workload for all workers against the machine's budget; here
    # the cap is the limit (the memory available now already excludes the siblings' arrays).
    set_memory_budget(max(1, setup.memory_bytes - WORKER_OVERHEAD_BYTES))
    # One small module at a time, one worker per core: no thread pool, the lowered module
    # verified once rather than after every pass, and one context (see CompileChecks).
    COMPILE_CHECKS.context_threads = COMPILE_CHECKS.verify_each_pass = False
    COMPILE_CHECKS.fresh_contexts = False
    engine = setup.make_engine(setup.target, setup.pipeline, use_specs=False)
    if setup.runs:
        setup.workload.reference_outputs  # noqa: B018 - computed once, before any timeout runs
    connection.send(("ready",))
    while True:
        request = connection.recv()
        if request is None:
            return
        if request == "stop":  # meant for a race that had already ended
            continue
        kind, *arguments = request
        if kind == "compile":
            connection.send(("done", _compile(setup, engine, *arguments)))
            continue
        try:
            if kind == "evaluate":
                reply = _evaluate(connection, setup, engine, *arguments)
            else:
                reply = _race(connection, setup, engine, *arguments)
        finally:
            engine.clear_cache()  # one candidate's JIT'd code at a time keeps memory flat
        connection.send(("done", reply))


def _compile(setup: WorkerSetup, engine: PtxEngine, params: dict, path: str) -> Outcome | None:
    """Compile a candidate into a program file that another process (on a GPU) times:
    None once it is written, else the compile error."""
    try:
        engine.compile(setup.workload, params).save(path)
    except MlirtuneError as error:
        return Outcome("compile_error", detail=str(error))
    return None


def _evaluate(
    connection: Connection,
    setup: WorkerSetup,
    engine: MlirJitEngine,
    params: dict,
    cutoff_s: float | None,
) -> Outcome:
    workload = setup.workload
    options = dataclasses.replace(setup.bench_options, cutoff_s=cutoff_s)
    started = time.perf_counter()
    try:
        engine.compile(workload, params)
    except MlirtuneError as error:
        return Outcome("compile_error", detail=str(error))
    compiled = time.perf_counter()
    connection.send(("phase", "run"))
    moments: dict[str, float] = {}

    @contextlib.contextmanager
    def timing_slot():
        """The benchmark core, taken once the candidate has verified on the other cores."""
        moments["verified"] = time.perf_counter()
        with _benchmark_slot(connection, setup):
            moments["locked"] = time.perf_counter()
            yield

    # One allocation: the verification's call, made on the same buffers, is the warm-up of
    # calls that outlast it (see run_benchmark).
    try:
        result = engine.benchmark(workload, params, options=options, timing_slot=timing_slot())
    except VerificationError as error:
        return Outcome("wrong_result", detail=error.args[0])
    seconds = {
        "compile_s": compiled - started,
        "verify_s": moments["verified"] - compiled,
        "wait_s": moments["locked"] - moments["verified"],
        "bench_s": time.perf_counter() - moments["locked"],
    }
    return Outcome(
        "ok", samples=tuple(result.samples), flops=result.complexity.flops, extra=seconds
    )


def _race(
    connection, setup: WorkerSetup, engine, configs: list[dict], rounds: int, until_settled=False
) -> list:
    """Per config, per round, the samples of `rounds` interleaved measurements (config order
    rotates every round, so slow drift of the machine spreads evenly over the configs). With
    `until_settled`, fewer rounds once the verdict is known (see `settled`) or once the parent
    says "stop" (another worker's rounds settled it)."""
    workload = setup.workload
    kernels = [engine.compile(workload, params) for params in configs]
    samples: list[list[list[float]]] = [[] for _ in configs]
    # One allocation for every config and round: from its second round on, a config's calls
    # have run on these buffers, so a call as long as the warm-up (a finalist's at 2048^3)
    # needs no warm-up call again, nor fresh buffers (see run_benchmark's first_call_s).
    check_memory(workload, "benchmark", verify=False)
    with workload.allocate(engine) as buffers, _benchmark_slot(connection, setup):
        timers = [kernel.timer(buffers) for kernel in kernels]
        for round_index in range(rounds):
            if until_settled and (_told_to_stop(connection) or settled(samples)):
                break
            order = [(round_index + i) % len(configs) for i in range(len(configs))]
            for index in order:
                earlier = float(np.median(samples[index][-1])) if samples[index] else None
                seconds = run_benchmark(timers[index], RACE_BENCH, earlier)
                samples[index].append(seconds.tolist())
        release_threads()
    return samples


def _told_to_stop(connection) -> bool:
    stop = False
    while connection.poll():
        stop = connection.recv() == "stop" or stop
    return stop


@contextlib.contextmanager
def _benchmark_slot(connection, setup: WorkerSetup):
    """Hold the benchmark lock, pinned to the benchmark core, with the sibling workers
    moved to the other cores."""
    connection.send(("phase", "wait"))
    with open(setup.lock_path, "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        connection.send(("phase", "bench"))
        others = setup.cores - {setup.bench_core}
        siblings = _sibling_pids(setup.pids_dir) if others else []
        for pid in siblings:
            _move(pid, others)
        os.sched_setaffinity(0, {setup.bench_core})
        try:
            yield
        finally:
            os.sched_setaffinity(0, setup.cores)
            for pid in siblings:
                _move(pid, setup.cores)
            fcntl.flock(lock, fcntl.LOCK_UN)


def _sibling_pids(pids_dir: str) -> list[int]:
    """The processes the evaluators sharing the benchmark core listed (see `_write_pids`)."""
    pids = []
    for path in Path(pids_dir).glob("*.pids"):
        with contextlib.suppress(OSError, ValueError):
            pids += [int(line) for line in path.read_text().split()]
    return [pid for pid in pids if pid != os.getpid()]


def _move(pid: int, cores: frozenset[int]) -> None:
    """Restrict every thread of process `pid` to `cores`; a process that is gone is skipped."""
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError, ValueError):
            os.sched_setaffinity(int(task.name), cores)


def _redirect_output(log_path: str) -> None:
    """Send this process's stdout/stderr (LLVM diagnostics included) to its log file."""
    descriptor = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(descriptor, 1)
    os.dup2(descriptor, 2)
    os.close(descriptor)


def log_tail(log_path: str, limit: int = 400) -> str:
    """The last `limit` characters of a worker's log, for crash reports."""
    try:
        text = Path(log_path).read_text(errors="replace")
    except OSError:
        return ""
    return text[-limit:].strip()


if __name__ == "__main__":
    main()
