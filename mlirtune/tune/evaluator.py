"""Isolated evaluation: every candidate runs in a worker process with a timeout and a memory
cap, so a candidate that crashes, hangs, runs out of memory or computes garbage costs one
candidate, never the search.

Workers compile in parallel and take turns on the benchmark core to time, with the other
workers kept off it meanwhile (see `mlirtune.tune.worker`). A worker that dies or overruns its
phase's timeout is killed and replaced; its candidate gets the status `crash` (with the
signal) or `timeout`.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

from mlirtune.api import engine_for
from mlirtune.interfaces.bench import BenchOptions
from mlirtune.interfaces.errors import MlirtuneError, UsageError
from mlirtune.interfaces.target import Target
from mlirtune.interfaces.workload import Workload
from mlirtune.tune.outcome import Outcome
from mlirtune.tune.worker import TUNING_BENCH, EngineFactory, WorkerSetup, log_tail, settled
from mlirtune.tune.worker_process import WorkerProcess, ask_to_exit, death, spawn_worker, stop

Config = dict[str, int]


@dataclass(frozen=True)
class EvaluatorSettings:
    """Isolation limits and measurement options for tuning candidates."""

    workers: int | None = None  # default: one per core, at least two
    compile_timeout_s: float = 120.0  # lowering + JIT of one candidate
    run_timeout_s: float = 20.0  # the verification run, and then the timing
    memory_bytes: int = 8 << 30  # address-space cap per worker
    bench_options: BenchOptions = TUNING_BENCH
    bench_core: int | None = None  # default: the highest core this process may use
    # How a worker makes its engine: engine_for, or (in tests) a picklable function that
    # wraps it, e.g. to inject faults.
    engine: EngineFactory = engine_for
    runs: bool = True  # False: workers only compile (compile_all), so skip the reference
    # Where the benchmark lock and the lists of processes to move off the benchmark core
    # live: a folder shared by every evaluator of one machine that times on it (the fleet's
    # actors, see mlirtune.fleet), so that no two of them time at once. Default: private.
    shared_dir: str | None = None

    def worker_count(self) -> int:
        """The worker processes an evaluator starts: `workers`, else one per usable core,
        at least two (the final race runs in two processes). More than that is refused:
        they would only share the cores, each holding its own copy of the workload."""
        most = max(2, len(os.sched_getaffinity(0)))
        if self.workers is not None and not 1 <= self.workers <= most:
            raise UsageError(
                f"--workers {self.workers}: give 1 to {most} on this host (one per usable "
                "core, at least 2); more would only share the cores",
                stage="tune",
            )
        return self.workers or most

    def worker_address_space(self) -> int:
        """Each worker's address-space cap: `memory_bytes`, or the limit this process runs
        under where that is lower (a worker cannot raise it)."""
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        return self.memory_bytes if soft == resource.RLIM_INFINITY else min(self.memory_bytes, soft)


@dataclass
class IsolatedEvaluator:
    """Evaluates configs of one workload in worker processes; use as a context manager."""

    workload: Workload
    target: Target
    pipeline: str | None = None
    settings: EvaluatorSettings = field(default_factory=EvaluatorSettings)

    def __post_init__(self) -> None:
        cores = sorted(os.sched_getaffinity(0))
        bench_core = self.settings.bench_core
        self.bench_core = cores[-1] if bench_core is None else bench_core
        if self.bench_core not in cores:
            raise MlirtuneError(f"benchmark core {self.bench_core} is not available", stage="tune")
        self.cores = frozenset(cores)
        self.worker_count = self.settings.worker_count()
        self._scratch = Path(tempfile.mkdtemp(prefix="mlirtune-tune-"))
        shared = Path(self.settings.shared_dir) if self.settings.shared_dir else self._scratch
        shared.mkdir(parents=True, exist_ok=True)
        self._lock_path = shared / "benchmark.lock"
        self._pids_path = shared / f"{self._scratch.name}.pids"
        self._workers: list[WorkerProcess | None] = [None] * self.worker_count
        self._started = 0

    def __enter__(self) -> IsolatedEvaluator:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop every worker (all asked at once, so that they exit in parallel) and remove
        the scratch folder."""
        workers = [w for w in self._workers if w is not None]
        self._workers = [None] * self.worker_count
        for worker in workers:
            ask_to_exit(worker)
        for worker in workers:
            stop(worker)
        shutil.rmtree(self._scratch, ignore_errors=True)
        self._pids_path.unlink(missing_ok=True)

    def start_workers(self) -> None:
        """Start every worker not yet running, without waiting for them: their start-up (the
        imports take about 0.7 s) then overlaps the caller's own set-up. Otherwise each starts
        with its first request, the second one after the caller found its first candidate."""
        for index, worker in enumerate(self._workers):
            if worker is None:
                self._start(index)

    # --- evaluation ------------------------------------------------------------------------

    def evaluate(
        self,
        next_config: Callable[[], Config | None],
        on_result: Callable[[Config, Outcome], None],
        cutoff: Callable[[Config], float | None] | None = None,
    ) -> None:
        """Pull configs from `next_config` (None: no more) while workers are free and report
        each outcome to `on_result` as soon as it is known, in completion order. A freed
        worker gets its next config before the outcome is reported, so that it compiles
        while `on_result` works (e.g. commits to the database). `cutoff(config)`, asked as
        the config is handed out: the time per call past which its timing may stop early
        (`BenchOptions.cutoff_s`), None to measure it in full."""

        def next_job() -> tuple[tuple, Config] | None:
            config = next_config()
            if config is None:
                return None
            return ("evaluate", config, cutoff(config) if cutoff else None), config

        self._stream(next_job, on_result)

    def evaluate_all(self, configs: Iterable[Config]) -> list[Outcome]:
        """Outcomes of `configs`, in the order given."""
        configs = [dict(c) for c in configs]
        pending = iter(enumerate(configs))
        outcomes: dict[int, Outcome] = {}
        jobs: dict[int, int] = {}  # id of the dict handed out -> its position

        def next_config() -> Config | None:
            item = next(pending, None)
            if item is None:
                return None
            index, config = item
            tagged = dict(config)
            jobs[id(tagged)] = index
            return tagged

        def on_result(config: Config, outcome: Outcome) -> None:
            outcomes[jobs[id(config)]] = outcome  # `evaluate` reports the very dict handed out

        self.evaluate(next_config, on_result)
        return [outcomes[i] for i in range(len(configs))]

    def compile_all(self, jobs: list[tuple[Config, str]]) -> list[Outcome | None]:
        """Compile each config into the program file beside it (for a GPU elsewhere to
        time), in parallel; per job, None once written, else why not (a compile error,
        crash or timeout costs that job only)."""
        pending = iter(enumerate(jobs))
        results: dict[int, Outcome | None] = {}

        def next_job() -> tuple[tuple, int] | None:
            item = next(pending, None)
            if item is None:
                return None
            position, (config, path) = item
            return ("compile", dict(config), path), position

        self._stream(next_job, results.__setitem__)
        return [results[i] for i in range(len(jobs))]

    def _stream(
        self,
        next_job: Callable[[], tuple[tuple, Any] | None],
        on_reply: Callable[[Any, Any], None],
    ) -> None:
        """Hand (request, job) pairs from `next_job` (None: no more) to free workers and
        report each reply with its job to `on_reply`, in completion order. A freed worker
        gets its next job before the reply is reported, so that it works meanwhile."""
        exhausted = False

        def refill() -> None:
            nonlocal exhausted
            for index in range(self.worker_count):
                worker = self._workers[index]
                if exhausted or (worker is not None and worker.job is not None):
                    continue
                item = next_job()
                exhausted = item is None
                if item is not None:
                    self._assign(index, *item)

        refill()
        while busy := [w for w in self._workers if w is not None and w.job is not None]:
            finished = list(self._collect(busy))
            refill()
            for job, reply in finished:
                on_reply(job, reply)

    def race(
        self, configs: list[Config], rounds: int, *, worker_index: int = 0
    ) -> list[list[list[float]]] | Outcome:
        """Samples of each config in each of `rounds` interleaved measurements in worker
        `worker_index` (config, round, sample), or the failure Outcome if that worker crashed
        or timed out."""
        return self.races(configs, rounds, [worker_index])[0]

    def races(
        self,
        configs: list[Config],
        rounds: int,
        worker_indices: list[int],
        *,
        until_settled: bool = False,
    ) -> list[list[list[list[float]]] | Outcome]:
        """`race` in each of `worker_indices` at once: they compile in parallel and take
        turns on the benchmark core; one result per worker, in the order given. With
        `until_settled`, the first config being the baseline, a worker stops its rounds once
        they settle the verdict (see `worker.settled`), and once one worker's rounds settle it
        or fail, the others are told to stop."""
        request = ("race", [dict(c) for c in configs], rounds, until_settled)
        jobs = {index: ("race", index) for index in worker_indices}
        for index, job in jobs.items():
            self._assign(index, request, job, len(configs))
        budget = self.settings.run_timeout_s * (1 + rounds * len(configs))
        results: dict[Any, Any] = {}
        while len(results) < len(jobs):
            busy = [w for w in self._workers if w is not None and w.job in jobs.values()]
            for job, reply in self._collect(busy, run_timeout=budget):
                results[job] = reply
                if until_settled and (isinstance(reply, Outcome) or settled(reply)):
                    for worker in busy:
                        if worker.job is not None and worker.job not in results:
                            with contextlib.suppress(OSError):
                                worker.connection.send("stop")
        return [results[jobs[index]] for index in worker_indices]

    # --- worker management -----------------------------------------------------------------

    def _assign(self, index: int, request: tuple, job: Any, compiles: int = 1) -> None:
        worker = self._workers[index] or self._start(index)
        worker.connection.send(request)
        worker.job, worker.phase = job, "compile"
        worker.deadline = time.monotonic() + self.settings.compile_timeout_s * compiles

    def _collect(self, busy: list[WorkerProcess], run_timeout: float | None = None):
        """Wait for the next event of any busy worker; yield (job, outcome) for each that
        finished, crashed or overran its deadline."""
        deadlines = [w.deadline for w in busy if w.deadline is not None]
        timeout = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
        wait([w.connection for w in busy], timeout)  # a dead worker's socket reads EOF
        for worker in busy:
            try:
                while worker.connection.poll():
                    kind, *payload = worker.connection.recv()
                    if kind == "ready":
                        worker.ready = True
                        continue
                    if kind == "done":
                        job, worker.job, worker.deadline = worker.job, None, None
                        yield job, payload[0]
                        break
                    worker.phase = payload[0]
                    limit = run_timeout or self.settings.run_timeout_s
                    waiting = worker.phase == "wait"
                    worker.deadline = None if waiting else time.monotonic() + limit
            except (EOFError, OSError):
                pass  # the worker died: handled below from its exit code
            if worker.job is None:
                continue
            failed = worker.process.poll() is not None
            late = worker.deadline is not None and time.monotonic() > worker.deadline
            if not worker.ready and (failed or late):
                stop(worker)
                what = "failed to start" if failed else "did not start"
                raise MlirtuneError(
                    f"a tuning worker {what}: {log_tail(worker.log_path)}", stage="tune"
                )
            if failed:
                yield worker.job, self._replace(worker, death(worker))
            elif late:
                detail = f"no result within the {worker.phase} timeout"
                yield worker.job, self._replace(worker, Outcome("timeout", detail=detail))

    def _replace(self, worker: WorkerProcess, outcome: Outcome) -> Outcome:
        """Kill a failed worker; a fresh one is started when it is next needed."""
        stop(worker)
        self._workers = [None if w is worker else w for w in self._workers]
        self._write_pids()
        return outcome

    def _start(self, index: int) -> WorkerProcess:
        self._started += 1
        log_path = str(self._scratch / f"worker-{self._started}.log")
        setup = WorkerSetup(
            workload=self.workload,
            target=self.target,
            pipeline=self.pipeline,
            make_engine=self.settings.engine,
            bench_options=self.settings.bench_options,
            memory_bytes=self.settings.worker_address_space(),
            cores=self.cores,
            bench_core=self.bench_core,
            lock_path=str(self._lock_path),
            pids_dir=str(self._pids_path.parent),
            log_path=log_path,
            runs=self.settings.runs,
        )
        worker = spawn_worker(setup, log_path)  # not waited for: see spawn_worker
        self._workers[index] = worker
        self._write_pids()
        return worker

    def _write_pids(self) -> None:
        """List the live workers, and this process (which records results meanwhile), for
        the worker holding the benchmark core to move off it (see worker.py)."""
        pids = [str(os.getpid())] + [str(w.process.pid) for w in self._workers if w is not None]
        path = self._pids_path
        path.with_suffix(".tmp").write_text("\n".join(pids))
        path.with_suffix(".tmp").replace(path)
