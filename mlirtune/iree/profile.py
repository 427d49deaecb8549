"""Each dispatch's own time inside a module's run, from IREE's runtime profiling.

`iree-benchmark-module` calls the module's entry on the workload's own values with
host-execution profiling on; `iree-profile` reads the bundle back as one event per dispatch
call. A dispatch timed this way runs where the model runs it, on the values it reads there,
after the dispatches before it; the rest of the model adds nothing to its samples, which is
what a tuner of one dispatch needs. (The standalone benchmarks IREE can dump read
uninitialised buffers, and ran a matmul at half its in-model speed on a Zen 3.)
"""

from __future__ import annotations

import json
from collections import defaultdict, deque
from pathlib import Path

import numpy as np

from mlirtune.interfaces.errors import UsageError
from mlirtune.iree.tools import run_tool, tool

PROFILE_S = 0.25  # how long one profiling run calls the module


def dispatch_calls_ns(
    vmfb: Path, entry: str, inputs: list[Path], min_time_s: float
) -> dict[str, list[int]]:
    """Per dispatch function of `vmfb`, the nanoseconds of each of its calls while `entry`
    runs on the arrays in `inputs` (.npy files, in argument order) for at least
    `min_time_s`; the first call of each, cold, is dropped where there are more."""
    bundle = vmfb.with_suffix(".ireeprof")
    bundle.unlink(missing_ok=True)
    run_tool(
        [
            tool("iree-benchmark-module"),
            f"--module={vmfb}",
            "--device=local-sync",
            f"--function={entry}",
            *(f"--input=@{path}" for path in inputs),
            f"--benchmark_min_time={min_time_s:.3f}s",
            "--device_profiling_mode=host-execution",
            f"--device_profiling_output={bundle}",
        ],
        "iree-benchmark-module (profiling the dispatches)",
    )
    events = run_tool(
        [tool("iree-profile"), "dispatch", "--format=jsonl", "--dispatch_events", str(bundle)],
        "iree-profile",
    ).stdout
    bundle.unlink()
    calls: dict[str, list[int]] = defaultdict(list)
    for line in events.splitlines():
        record = json.loads(line)
        if record.get("type") == "host_dispatch_event" and record.get("valid"):
            calls[record["key"]].append(int(record["duration_ns"]))
    return {name: durations[1:] or durations for name, durations in calls.items()}


def time_shares(vmfb: Path, entry: str, inputs: list[Path]) -> dict[str, float]:
    """Each dispatch's share of the time all dispatches took, over one profiling run."""
    totals = {
        name: float(sum(durations))
        for name, durations in dispatch_calls_ns(vmfb, entry, inputs, PROFILE_S).items()
    }
    whole = sum(totals.values())
    return {name: total / whole if whole else 0.0 for name, total in totals.items()}


class DispatchTimer:
    """A NativeTimer (mlirtune.bench.harness) of one dispatch: each sample stands for
    `iterations` of its calls, read from profiling runs of the whole module, one run taken
    whenever the calls already read are spent. Each call is timed on its own, so a sample
    needs no more calls than one run gave: it is the mean of up to `iterations` of them,
    times `iterations` (a 20 µs dispatch of a 3 ms model would otherwise take a profiling
    run of its own for every sample)."""

    def __init__(self, vmfb: Path, entry: str, inputs: list[Path], dispatch: str) -> None:
        self.vmfb, self.entry, self.inputs, self.dispatch = vmfb, entry, inputs, dispatch
        self.calls: deque[int] = deque()

    def __call__(self, iterations: int, samples: int) -> np.ndarray:
        times = np.empty(samples, dtype=np.int64)
        for sample in range(samples):
            if not self.calls:
                self._profile()
            taken = [self.calls.popleft() for _ in range(min(iterations, len(self.calls)))]
            times[sample] = round(sum(taken) * iterations / len(taken))
        return times

    def _profile(self) -> None:
        calls = dispatch_calls_ns(self.vmfb, self.entry, self.inputs, PROFILE_S)
        if self.dispatch not in calls:
            raise UsageError(
                f"the profile of {self.vmfb.name} has no dispatch {self.dispatch} "
                f"({', '.join(calls) or 'none'})",
                stage="iree",
            )
        self.calls.extend(calls[self.dispatch])
