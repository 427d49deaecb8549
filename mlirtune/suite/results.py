"""A suite run's results file: a manifest of where and how it ran, and one result per entry.

The file is JSON, rewritten whole (atomically) after every entry, so a killed run keeps what
it measured and resumes from there. Samples are seconds per call, every one of them kept, so
that `suite compare` and `report` can compute their own statistics.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

from mlirtune.files import load_json, write_output
from mlirtune.interfaces.errors import UsageError
from mlirtune.typed import from_plain

FORMAT = "mlirtune-suite-results/1"
# Entry statuses: measured and verified; refused (a module the importer does not take, e.g.
# one torch.export cannot trace, with the reason); failed (an error or a crash
# while compiling or measuring); or measured but with a wrong result.
OK, REFUSED, FAILED, WRONG = "ok", "refused", "failed", "wrong"


@dataclass
class Timing:
    """One side's measurement: every sample (seconds per call) and its statistics."""

    samples: list[float]
    median_s: float
    ci_low_s: float
    ci_high_s: float
    gflops: float | None


@dataclass
class EntryResult:
    """One suite entry: its workload, what ran, the timings (ours and each baseline)."""

    name: str
    status: str
    workload: dict[str, str | int | float | bool]
    tags: list[str]
    threads: int
    error: str | None = None
    parameters: dict[str, int | str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    flops: int = 0
    bytes_moved: int = 0
    ours: Timing | None = None
    baselines: dict[str, Timing] = field(default_factory=dict)
    # A payload split into dispatches: per dispatch, its function, family and whether its
    # schedule applied (with the notes that say why not).
    dispatches: list[dict[str, str | bool | list[str]]] = field(default_factory=list)
    # With the entry's `dispatch_times`: each distinct dispatch timed alone, slowest total
    # first (mlirtune.workloads.dispatch_times: function, kind, calls, median_s, roots).
    dispatch_times: list[dict[str, str | int | float | bool]] = field(default_factory=list)


@dataclass
class Manifest:
    """Where and how a suite ran."""

    suite: str
    mlirtune_version: str
    git_commit: str | None
    toolchain: dict[str, str]
    target: dict[str, str | int | list[str]]
    peak_gflops: float
    bandwidth_gbs: float
    threads: int
    command: list[str]
    started: str
    finished: str | None = None
    # One core's measured peak for each element type of the suite's entries but f32, whose
    # is peak_gflops: f64's is half the FMA's, bf16's and int8's their dot products' where
    # the host has them (mlirtune.peak). Results saved before it have none.
    dtype_peaks_gflops: dict[str, float] = field(default_factory=dict)

    def peak_for(self, workload: dict[str, str | int | float | bool]) -> float:
        """One core's peak for an entry's workload (its `describe()`): its element type's."""
        return self.dtype_peaks_gflops.get(str(workload.get("dtype")), self.peak_gflops)


@dataclass
class SuiteResults:
    manifest: Manifest
    entries: dict[str, EntryResult] = field(default_factory=dict)


def save_results(results: SuiteResults, path: Path) -> None:
    """Write `results` to `path` atomically: a kill leaves the previous file or this one."""
    text = json.dumps({"format": FORMAT, **dataclasses.asdict(results)}, indent=1)
    write_output(path, text.encode(), "results")


def load_results(path: Path) -> SuiteResults:
    """Read a results file, or a UsageError naming the file and what is wrong with it."""
    data = load_json(path, "results")
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise UsageError(f"{path}: not a suite results file ({FORMAT})", stage="results")
    body = {key: value for key, value in data.items() if key != "format"}
    return from_plain(SuiteResults, body, str(path), "results")
