"""`suite run`: time every selected entry of a suite, with its baselines, into a results file.

Each entry is verified, then timed, in a contained child process of its own: an entry that
fails, refuses its input, aborts in C++ or runs past its limits is recorded with its error,
and the run goes on. The results file is rewritten after every entry, so a killed run keeps what it
measured, and running the same command again resumes: entries already in the file are not
run again unless `rerun`.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from mlirtune.api import engine_for
from mlirtune.bench.baseline import measure_numpy, measure_torch
from mlirtune.contain.supervisor import call_contained
from mlirtune.files import prepare_output
from mlirtune.interfaces.bench import BenchOptions, BenchResult
from mlirtune.interfaces.engine import Engine
from mlirtune.interfaces.errors import MlirtuneError, UsageError
from mlirtune.interfaces.workload import Workload
from mlirtune.peak import measured_bandwidth_gbs, measured_peak_gflops
from mlirtune.suite.definition import Suite, SuiteEntry
from mlirtune.suite.results import (
    FAILED,
    OK,
    REFUSED,
    WRONG,
    EntryResult,
    Manifest,
    SuiteResults,
    Timing,
    load_results,
    save_results,
)
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.toolchain import toolchain_versions

# Called before each entry with (entry, position, count), e.g. to move a progress bar.
Progress = Callable[[SuiteEntry, int, int], None]


def run_suite(
    suite: Suite,
    output: Path,
    entries: list[SuiteEntry],
    *,
    rerun: bool = False,
    command: list[str] | None = None,
    progress: Progress | None = None,
) -> SuiteResults:
    """Run `entries` of `suite` into `output`, resuming the results already there."""
    prepare_output(output, "results")
    results = _resume(suite, output) if output.exists() else None
    if results is None:
        results = SuiteResults(_manifest(suite, command or []))
    results.manifest.finished = None
    todo = [e for e in entries if rerun or e.name not in results.entries]
    for position, entry in enumerate(todo):
        if progress:
            progress(entry, position, len(todo))
        results.entries[entry.name] = _contained_entry(entry)
        save_results(results, output)
    results.manifest.finished = _now()
    save_results(results, output)
    return results


def _contained_entry(entry: SuiteEntry) -> EntryResult:
    """`run_entry` in a child process; its death (an abort in C++, a compile past its
    limits) is the entry's failure."""
    try:
        return call_contained(run_entry, entry)
    except MlirtuneError as error:
        return EntryResult(
            name=entry.name,
            status=FAILED,
            workload={"name": entry.source},
            tags=list(entry.tags),
            threads=entry.threads,
            error=str(error),
        )


def run_entry(entry: SuiteEntry) -> EntryResult:
    """Verify and time one entry and its baselines; a failure becomes the entry's status."""
    base = {"name": entry.name, "tags": list(entry.tags), "threads": entry.threads}
    try:
        workload = entry.build()
        base["workload"] = workload.describe()
        target = HostCPU(threads=entry.threads)
        specs = None
        if entry.specs:
            from mlirtune.specs.specset import SpecSet

            specs = SpecSet.for_target(target, list(entry.specs))
        engine = engine_for(target, entry.pipeline, specs=specs, use_specs=not entry.no_specs)
        options = BenchOptions(max_time_s=entry.max_time)
        executed = engine.execute(workload, entry.params or None)
        base["dispatches"] = [_dispatch(d) for d in executed.extra.get("dispatches", [])]
        verification = executed.verification
        if not verification.ok and not verification.skipped:
            return EntryResult(status=WRONG, error=verification.summary(), **base)
        ours = engine.benchmark(workload, entry.params or None, options=options)
        baselines = {
            name: _baseline(name, workload, options, entry.threads) for name in entry.baselines
        }
        if entry.dispatch_times and base["dispatches"]:
            base["dispatch_times"] = _dispatch_times(workload, engine)
    except MlirtuneError as error:
        base.setdefault("workload", {"name": entry.source})
        # A module the importer does not take (torch.export's refusal, a shape that depends
        # on the values) is refused; any other error is the entry's failure.
        status = REFUSED if isinstance(error, UsageError) and error.stage == "torch" else FAILED
        return EntryResult(status=status, error=str(error), **base)
    complexity = ours.complexity
    return EntryResult(
        status=OK,
        parameters=dict(ours.parameters),
        sources=dict(ours.extra.get("parameter_sources", {})),
        flops=complexity.flops,
        bytes_moved=complexity.bytes_read + complexity.bytes_written,
        ours=timing(ours),
        baselines={name: t for name, t in baselines.items() if t is not None},
        **base,
    )


def _dispatch(report: dict[str, object]) -> dict[str, str | bool | list[str]]:
    """What a results file keeps of a dispatch: its function, kind, pipeline, whether it
    was scheduled, and the notes that say why not."""
    kept = ("function", "kind", "pipeline", "scheduled", "notes")
    return {key: report[key] for key in kept if key in report}  # type: ignore[misc]


def _dispatch_times(
    workload: Workload, engine: Engine
) -> list[dict[str, str | int | float | bool]]:
    """Each distinct dispatch of `workload`, timed alone on the values it reads there."""
    from mlirtune.workloads.dispatch_times import dispatch_times
    from mlirtune.workloads.dispatches import dispatch_workloads

    parts = dispatch_workloads(workload)
    return [t.to_json() for t in dispatch_times(parts, engine)]


def timing(result: BenchResult) -> Timing:
    return Timing(
        samples=list(result.samples),
        median_s=result.stats.median,
        ci_low_s=result.stats.ci_low,
        ci_high_s=result.stats.ci_high,
        gflops=result.gflops,
    )


def _baseline(name: str, workload: Workload, options: BenchOptions, threads: int) -> Timing | None:
    """A baseline's timing; None where it does not apply (no torch, or no numpy form)."""
    measure = measure_torch if name == "torch" else measure_numpy
    try:
        return timing(measure(workload, options, threads=threads))
    except UsageError:  # PyTorch missing, or the workload has no form in it
        return None


def _resume(suite: Suite, output: Path) -> SuiteResults:
    results = load_results(output)
    if results.manifest.suite != suite.name:
        raise UsageError(
            f"{output} holds results of suite {results.manifest.suite!r}, not {suite.name!r}: "
            "give another -o",
            stage="suite",
        )
    return results


def _manifest(suite: Suite, command: list[str]) -> Manifest:
    target = HostCPU()
    dtypes = {str(e.options["dtype"]) for e in suite.entries if "dtype" in e.options} - {"f32"}
    return Manifest(
        suite=suite.name,
        mlirtune_version=metadata.version("mlirtune"),
        git_commit=_git_commit(),
        toolchain=toolchain_versions(),
        target=dict(target.fingerprint()),
        peak_gflops=measured_peak_gflops(target),
        bandwidth_gbs=measured_bandwidth_gbs(target),
        threads=max((1, *(e.threads for e in suite.entries))),
        command=command,
        started=_now(),
        dtype_peaks_gflops={dtype: measured_peak_gflops(target, dtype) for dtype in sorted(dtypes)},
    )


def _git_commit() -> str | None:
    """The commit of the checkout mlirtune runs from, or None when it is not one."""
    here = Path(__file__).resolve().parent
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
