"""Tuning candidates timed on the GPU, a faulting or hung one costing only itself.

A supervisor (`run_batch`, no GPU work of its own) runs the candidates of a device batch
(mlirtune.interfaces.device_batch) in a device process, `python -m
mlirtune.runtime.gpu_batch DIR`, which tells it over its standard output which candidate
it starts and how each ended. A candidate that faults the CUDA context kills that process
(the context is unusable after a fault) and one that hangs outlives its timeout; either
way the supervisor records it as a crash or a timeout, starts a fresh device process and
goes on with the next candidate. Each result is appended to `results.jsonl` as it comes,
so a run that is killed resumes where it stopped. Then the fastest finalists race the
baseline in interleaved rounds, in one device process.
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from mlirtune.bench.harness import run_benchmark
from mlirtune.interfaces.bench import BenchOptions
from mlirtune.interfaces.device_batch import (
    DATA,
    RACE,
    DeviceBatch,
    append_result,
    read_results,
)
from mlirtune.interfaces.errors import MlirtuneError
from mlirtune.interfaces.gpu_program import GpuProgram
from mlirtune.interfaces.runtime import Placement
from mlirtune.runtime.cuda import CudaDevice
from mlirtune.runtime.gpu_run import initial_arrays, load_data, run_program

# Short measurements: a candidate needs a rank, the finalists are raced again. CUDA events
# around graphs of calls are steady (0.0-2.1% cv on an H200), so 10 samples of 2 ms do.
TUNING_OPTIONS = BenchOptions(
    warmup_s=0.01, target_sample_s=0.002, min_samples=10, max_time_s=0.1, rel_ci=0.01
)
RACE_OPTIONS = BenchOptions(
    warmup_s=0.005, target_sample_s=0.002, min_samples=20, max_time_s=0.1, rel_ci=0.005
)
# Seconds a device process may take to start (import, create its CUDA context, load data).
START_TIMEOUT_S = 120.0
LOG = "device.log"


class Measurer(Protocol):
    """What a device process measures with: the real one is `CudaMeasurer`; tests give a
    fake that faults or hangs on chosen candidates."""

    def fingerprint(self) -> dict[str, Any]: ...

    def measure(self, program: Path) -> dict[str, Any]:
        """{"status": "ok", "samples": [...]} or {"status": "wrong_result", "detail": ...}."""
        ...

    def race(self, programs: list[Path], rounds: int) -> list[list[list[float]]]:
        """Seconds per call of each program in each round (programs rotate every round)."""
        ...


class CudaMeasurer:
    """Runs saved programs on CUDA device `index`, verified against the batch's data."""

    def __init__(self, directory: Path, index: int = 0) -> None:
        self.device = CudaDevice(index)
        self.data = load_data(directory / DATA)

    def fingerprint(self) -> dict[str, Any]:
        return self.device.fingerprint()

    def measure(self, program: Path) -> dict[str, Any]:
        run = run_program(self.device, GpuProgram.load(program), self.data, TUNING_OPTIONS)
        if run.verification is not None and not run.verification.ok:
            return {"status": "wrong_result", "detail": run.verification.summary()}
        return {"status": "ok", "samples": run.seconds.tolist()}

    def race(self, programs: list[Path], rounds: int) -> list[list[list[float]]]:
        loaded = [GpuProgram.load(p) for p in programs]
        arrays = initial_arrays(loaded[0], self.data)
        buffers = [
            self.device.allocate(a.name, array, Placement.DEVICE)
            for a, array in zip(loaded[0].arguments, arrays, strict=True)
        ]
        modules = [self.device.load(p) for p in loaded]
        try:
            timers = [m.timer(buffers) for m in modules]
            samples: list[list[list[float]]] = [[] for _ in programs]
            for round_index in range(rounds):
                for i in ((round_index + j) % len(programs) for j in range(len(programs))):
                    seconds = run_benchmark(timers[i], RACE_OPTIONS)
                    samples[i].append(seconds.tolist())
            return samples
        finally:
            for module in modules:
                module.close()
            for buffer in buffers:
                self.device.release(buffer)


# --- the device process ----------------------------------------------------------------


def serve(directory: Path, measurer: Measurer, race: list[int] | None, rounds: int) -> None:
    """Measure every candidate without a result yet, announcing each on stdout before it
    starts; or, with `race`, race those candidates. One JSON object per line."""
    batch = DeviceBatch.load(directory)
    _say({"device": measurer.fingerprint()})
    programs = {c.index: directory / c.program for c in batch.candidates}
    if race is not None:
        _say({"race": measurer.race([programs[i] for i in race], rounds)})
        return
    _, done = read_results(directory)
    for candidate in batch.candidates:
        if candidate.index in done:
            continue
        _say({"start": candidate.index})
        try:
            result = measurer.measure(programs[candidate.index])
        except MlirtuneError as error:  # e.g. the PTX did not load: this candidate only
            result = {"status": "crash", "detail": str(error)}
        _say({"index": candidate.index, **result})
        if result["status"] == "crash":
            return  # the context may be unusable: a fresh process takes the rest


def _say(message: dict[str, Any]) -> None:
    print(json.dumps(message), flush=True)


def main(argv: list[str] | None = None, measurer: Callable[[Path], Measurer] | None = None):
    """`python -m mlirtune.runtime.gpu_batch DIR [--race I,J,...] [--rounds N]`."""
    parser = argparse.ArgumentParser(prog="python -m mlirtune.runtime.gpu_batch")
    parser.add_argument("directory", type=Path)
    parser.add_argument("--race", default=None, help="candidate indices to race")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--device", type=int, default=0)
    args = parser.parse_args(argv)
    race = None if args.race is None else [int(i) for i in args.race.split(",")]
    make = measurer or (lambda directory: CudaMeasurer(directory, args.device))
    try:
        serve(args.directory, make(args.directory), race, args.rounds)
    except MlirtuneError as error:  # no device, a bad batch: said to the supervisor's log
        print(f"error: {error}", file=sys.stderr)
        sys.exit(error.exit_code)


# --- the supervisor --------------------------------------------------------------------

Result = dict[str, Any]  # {"index", "status", "detail", "samples", "wall_s"}
OnResult = Callable[[int, Result], None]


def device_command(device: int = 0) -> list[str]:
    """The device process of the real GPU."""
    return [sys.executable, "-m", "mlirtune.runtime.gpu_batch", "--device", str(device)]


def run_batch(
    directory: Path, command: list[str] | None = None, on_result: OnResult | None = None
) -> dict[int, Result]:
    """Every candidate's result (resuming from results.jsonl), then the race (race.json).
    `command` starts a device process given the folder (default: `device_command()`)."""
    command = command or device_command()
    batch = DeviceBatch.load(directory)
    device, results = read_results(directory)
    while len(results) < len(batch.candidates):
        started = _measure_some(directory, batch, command, device is None, results, on_result)
        device = device or started
    _race(directory, batch, command, results)
    return results


def _measure_some(
    directory: Path,
    batch: DeviceBatch,
    command: list[str],
    first: bool,
    results: dict[int, Result],
    on_result: OnResult | None,
) -> dict[str, Any] | None:
    """One device process: the results it gives, and the one candidate it dies or hangs
    on. Returns the device's fingerprint."""
    process = _DeviceProcess([*command, str(directory)], directory)
    device, current, started, before = None, None, time.monotonic(), len(results)
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        while (message := process.next_message(deadline)) is not None:
            if "device" in message:
                device = message["device"]
                if first:
                    append_result(directory, {"device": device})
            elif "start" in message:
                current, started = int(message["start"]), time.monotonic()
                deadline = started + batch.candidate_timeout_s
            elif "index" in message:
                message["wall_s"] = time.monotonic() - started
                _record(directory, results, message, on_result)
                current = None
                deadline = time.monotonic() + batch.candidate_timeout_s
        failure = process.failure()
    finally:
        process.stop()
    if current is not None:
        entry = {"index": current, **failure, "wall_s": time.monotonic() - started}
        _record(directory, results, entry, on_result)
    elif len(results) == before < len(batch.candidates):  # no progress: it would repeat
        why = failure.get("detail", "it ended without measuring")
        raise MlirtuneError(f"the device process failed before a candidate: {why}", stage="device")
    return device


def _record(
    directory: Path, results: dict[int, Result], message: Result, on_result: OnResult | None
) -> None:
    entry = {
        "index": int(message["index"]),
        "status": message["status"],
        "detail": message.get("detail", ""),
        "samples": message.get("samples", []),
        "wall_s": message.get("wall_s", 0.0),
    }
    append_result(directory, entry)
    results[entry["index"]] = entry
    if on_result:
        on_result(entry["index"], entry)


def _race(
    directory: Path, batch: DeviceBatch, command: list[str], results: dict[int, Result]
) -> None:
    """Race the fastest `batch.finalists` ok candidates against the baseline (index 0)."""
    if (directory / RACE).exists():
        return
    ok = {i: float(np.median(r["samples"])) for i, r in results.items() if r["status"] == "ok"}
    finalists = sorted((i for i in ok if i != 0), key=ok.get)[: batch.finalists]
    if 0 not in ok or not finalists:
        why = "the baseline failed" if 0 not in ok else "no other candidate ran"
        (directory / RACE).write_text(json.dumps({"indices": [], "failed": why}))
        return
    indices = [0, *finalists]
    arguments = ["--race", ",".join(map(str, indices)), "--rounds", str(batch.race_rounds)]
    process = _DeviceProcess([*command, str(directory), *arguments], directory)
    budget = START_TIMEOUT_S + batch.candidate_timeout_s * batch.race_rounds * len(indices)
    deadline, samples = time.monotonic() + budget, None
    try:
        while (message := process.next_message(deadline)) is not None:
            samples = message.get("race", samples)
        failure = process.failure()
    finally:
        process.stop()
    race = {"indices": indices, "samples": samples} if samples else {"indices": indices, **failure}
    (directory / RACE).write_text(json.dumps(race))


class _DeviceProcess:
    """A device process whose stdout is read a JSON line at a time against deadlines."""

    def __init__(self, argv: list[str], directory: Path) -> None:
        self.log_path = directory / LOG
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                argv,
                stdout=subprocess.PIPE,
                stderr=log,
                stdin=subprocess.DEVNULL,
                env=_environment(),
            )
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.process.stdout, selectors.EVENT_READ)
        self.pending = b""
        self.timed_out = False

    def next_message(self, deadline: float) -> dict[str, Any] | None:
        """The next JSON line; None at the end of output or past `deadline`."""
        while b"\n" not in self.pending:
            left = deadline - time.monotonic()
            if left <= 0 or not self.selector.select(left):
                self.timed_out = True
                return None
            chunk = os.read(self.process.stdout.fileno(), 1 << 16)
            if not chunk:
                return None
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        try:
            return json.loads(line)
        except json.JSONDecodeError:  # something else printed to stdout: ignored
            return {}

    def failure(self) -> dict[str, str]:
        """How the process ended, as a result's status and detail ({} if it ended well)."""
        if self.timed_out:
            self.stop()
            return {"status": "timeout", "detail": "no result within the candidate timeout"}
        code = self.process.wait(timeout=30)
        if code == 0:
            return {}
        tail = self.log_path.read_text(errors="replace")[-400:].strip()
        cause = f"killed by signal {-code}" if code < 0 else f"exited with status {code}"
        return {"status": "crash", "detail": f"device process {cause}: {tail}"}

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)
        self.selector.close()
        self.process.stdout.close()


def _environment() -> dict[str, str]:
    """The device process imports this package's mlirtune, wherever it runs from."""
    root = str(Path(__file__).resolve().parents[2])
    paths = [root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "PYTHONUNBUFFERED": "1"}


if __name__ == "__main__":
    main()
