"""Benchmark suites: their validation, a run that resumes after a kill, and compare's
verdicts and exit codes on crafted sample sets."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from mlirtune.cli import main
from mlirtune.cli.suite import speedup_summary
from mlirtune.interfaces.errors import UsageError
from mlirtune.suite import runner
from mlirtune.suite.compare import FAILED, IMPROVED, MISSING, REGRESSED, UNCHANGED, compare_results
from mlirtune.suite.definition import load_suite, shipped_suites
from mlirtune.suite.results import OK, EntryResult, Manifest, SuiteResults, Timing, load_results
from mlirtune.suite.runner import run_suite
from tests.payloads import MATMUL_16x8x32

TINY = """
name: tiny
defaults: {baselines: [numpy], max_time: 0.01}
entries:
  - {name: mm-32, workload: matmul, options: {M: 32, N: 32, K: 32}, tags: [gemm]}
  - {name: mm-48, workload: matmul, options: {M: 48, N: 32, K: 16}, tags: [gemm]}
  - {name: softmax-16, workload: softmax, options: {M: 16, N: 64}, tags: [norm]}
"""


def suite_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "suite.yaml"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("entries:\n  - {name: a, workload: matmal}", r"entry 1 \(a\): field `workload`: unknown"),
        (
            "entries:\n  - {name: a, workload: matmul, size: 3}",
            r"entry 1 \(a\): unknown field 'size'",
        ),
        (
            "entries:\n  - {name: a, workload: matmul, tags: [Big!]}",
            r"field `tags`: bad tag 'Big!'",
        ),
        ("entries:\n  - {name: a, workload: matmul, threads: two}", r"`threads` must be a int"),
        ("entries:\n  - {workload: matmul}", r"entry 1: field `name` is missing"),
        (
            "entries:\n  - {name: a}",
            r"entry 1 \(a\): give one of `workload`, `payload` and `torch`",
        ),
        ("entries:\n  - {name: a, workload: matmul, baselines: [blas]}", r"unknown 'blas'"),
        ("entries: [\n", r"suite.yaml:\d+: invalid YAML"),
        ("name: x\n", r"a mapping with an `entries` list"),
    ],
)
def test_bad_suites_name_the_file_entry_and_field(tmp_path, text, message):
    with pytest.raises(UsageError, match=message) as error:
        load_suite(suite_file(tmp_path, text))
    assert "suite.yaml" in str(error.value)


def test_missing_suite_files_and_unknown_shipped_suites_are_refused(tmp_path):
    with pytest.raises(UsageError, match=r"none\.yaml: No such file"):
        load_suite(str(tmp_path / "none.yaml"))
    shipped = r"cpu-ops, gemm, kernelbench-l1, resnet50, smoke"
    with pytest.raises(UsageError, match=rf"no shipped suite \({shipped}\)"):
        load_suite("nonesuch")


@pytest.mark.parametrize("name", ["smoke", "gemm", "cpu-ops"])
def test_shipped_suites_load(name):
    suite = load_suite(name)
    assert suite.name == name and len(suite.entries) >= 6
    assert {"numpy"} <= set(suite.entries[0].baselines)


def test_list_shows_the_shipped_suites_and_one_suites_entries(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # one table row a line
    assert main(["suite", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for name in shipped_suites():
        (row,) = [line for line in lines if line.startswith(f"│ {name} ")]
        assert f"│ {len(load_suite(name).entries)} " in row
    assert main(["suite", "list", "smoke"]) == 0
    out = capsys.readouterr().out
    for entry in load_suite("smoke").entries:
        assert entry.name in out
    assert "matmul M=256 N=256 K=256" in out and load_suite("smoke").description in out


def test_tags_and_filters_select_entries(tmp_path):
    suite = load_suite(suite_file(tmp_path, TINY))
    assert [e.name for e in suite.select(["norm"], None)] == ["softmax-16"]
    assert [e.name for e in suite.select([], "mm-4")] == ["mm-48"]
    with pytest.raises(UsageError, match="--filter"):
        suite.select([], "(")


@pytest.mark.jit
def test_a_killed_run_resumes_where_it_stopped(tmp_path):
    suite = load_suite(suite_file(tmp_path, TINY))
    output = tmp_path / "results.json"
    ran: list[str] = []

    def killed_at_the_second(entry, position, count):
        if position == 1:
            raise KeyboardInterrupt
        ran.append(entry.name)

    with pytest.raises(KeyboardInterrupt):
        run_suite(suite, output, list(suite.entries), progress=killed_at_the_second)
    kept = load_results(output)
    assert list(kept.entries) == ["mm-32"] and kept.manifest.finished is None
    assert not list(tmp_path.glob("*.partial"))
    run_suite(suite, output, list(suite.entries), progress=lambda e, p, c: ran.append(e.name))
    results = load_results(output)
    assert ran == ["mm-32", "mm-48", "softmax-16"]  # the first entry was not run again
    assert results.manifest.finished and set(results.entries) == {"mm-32", "mm-48", "softmax-16"}
    first = results.entries["mm-32"]
    assert first.status == OK and first.ours and len(first.ours.samples) >= 10
    assert "numpy" in first.baselines and first.parameters["MR"] > 0
    assert first.sources["MR"] in ("selector", "spec", "default")


@pytest.mark.jit
def test_a_failing_entry_is_recorded_and_the_run_goes_on(tmp_path, capsys):
    text = TINY.replace("options: {M: 16, N: 64}", "options: {M: 16, N: 64}, params: {XX: 1}")
    output = tmp_path / "results.json"
    assert main(["suite", "run", suite_file(tmp_path, text), "-o", str(output)]) == 0
    results = json.loads(output.read_text())
    assert results["entries"]["softmax-16"]["status"] == "failed"
    assert "unknown parameter" in results["entries"]["softmax-16"]["error"]
    assert results["entries"]["mm-32"]["status"] == "ok"
    assert "failed" in capsys.readouterr().out


def results(**medians: float | None) -> SuiteResults:
    """A crafted run: per entry, 40 samples around the given median (None: a failure)."""
    rng = np.random.default_rng(len(medians))
    manifest = Manifest("s", "0", None, {}, {}, 100.0, 10.0, 1, [], "now")
    entries = {}
    for name, median in medians.items():
        if median is None:
            entries[name] = EntryResult(name, "failed", {}, [], 1, error="boom")
            continue
        samples = list(median * (1 + 0.005 * rng.standard_normal(40)))
        timing = Timing(samples, median, median * 0.99, median * 1.01, None)
        entries[name] = EntryResult(name, OK, {}, [], 1, ours=timing)
    return SuiteResults(manifest, entries)


def test_compare_gives_each_entry_its_verdict():
    base = results(slower=1.0, same=1.0, faster=1.0, noise=1.0, broken=1.0, gone=1.0)
    new = results(slower=1.2, same=1.0, faster=0.8, noise=1.01, broken=None, added=1.0)
    verdicts = {c.name: c.verdict for c in compare_results(base, new, threshold=0.03)}
    assert verdicts == {
        "slower": REGRESSED,
        "same": UNCHANGED,
        "faster": IMPROVED,
        "noise": UNCHANGED,  # within the threshold
        "broken": FAILED,
        "gone": MISSING,
        "added": MISSING,
    }


def test_times_relative_to_numpy_cancel_a_machine_that_drifted():
    base, new = results(mm=1.0), results(mm=1.2)  # the whole machine 20% slower...
    for run in (base, new):  # ...numpy too, timed beside ours at twice its time
        ours = run.entries["mm"].ours
        run.entries["mm"].baselines["numpy"] = Timing([2 * x for x in ours.samples], 0, 0, 0, None)
    (comparison,) = compare_results(base, new)
    assert comparison.verdict == UNCHANGED and comparison.note == "relative to numpy"


def test_compare_exits_1_on_a_regression_or_failure(tmp_path, capsys):
    from mlirtune.suite.results import save_results

    paths = {}
    runs = {
        "base": results(a=1.0, b=1.0),
        "same": results(a=1.0, b=1.0),
        "slow": results(a=1.3, b=1.0),
        "fail": results(a=1.0, b=None),
    }
    for name, run in runs.items():
        paths[name] = tmp_path / f"{name}.json"
        save_results(run, paths[name])
    assert main(["suite", "compare", str(paths["base"]), str(paths["same"])]) == 0
    assert main(["suite", "compare", str(paths["base"]), str(paths["slow"])]) == 1
    code = main(
        ["suite", "compare", str(paths["base"]), str(paths["fail"]), "--format", "markdown"]
    )
    assert code == 1 and "| b | failed |" in capsys.readouterr().out
    assert main(["suite", "compare", str(paths["base"]), str(tmp_path / "none.json")]) == 2


@pytest.mark.jit
def test_payload_entries_run_from_files_next_to_the_suite(tmp_path):
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "mm.mlir").write_text(MATMUL_16x8x32)
    text = "entries:\n  - {name: mm, payload: kernels/mm.mlir, entry: mm, max_time: 0.01}\n"
    suite = load_suite(suite_file(tmp_path, text))
    (entry,) = suite.entries
    assert entry.payload == tmp_path / "kernels" / "mm.mlir"
    result = run_suite(suite, tmp_path / "out.json", [entry]).entries["mm"]
    assert result.status == OK and result.ours and result.ours.samples


@pytest.mark.subprocess
def test_a_run_killed_by_a_signal_keeps_its_entries_and_resumes(tmp_path):
    entries = "\n".join(
        f"  - {{name: mm-{size}, workload: matmul, options: {{M: {size}, N: 32, K: 32}}}}"
        for size in range(16, 96, 8)
    )
    path = suite_file(tmp_path, f"defaults: {{max_time: 0.05}}\nentries:\n{entries}\n")
    output = tmp_path / "results.json"
    command = [sys.executable, "-m", "mlirtune", "suite", "run", path, "-o", str(output)]
    run = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and run.poll() is None:
        if output.exists() and len(load_results(output).entries) >= 2:
            break
        time.sleep(0.05)
    run.send_signal(signal.SIGKILL)
    run.wait()
    kept = load_results(output).entries  # the file is whole: never a half-written one
    assert 2 <= len(kept) < 10
    assert main(["suite", "run", path, "-o", str(output)]) == 0
    resumed = load_results(output)
    assert len(resumed.entries) == 10 and resumed.manifest.finished
    assert all(resumed.entries[name].ours.samples == kept[name].ours.samples for name in kept)


def test_run_summary_gives_each_baselines_geometric_mean_and_lowest_entry():
    run = results(a=1.0, b=1.0, c=None)
    for name, torch_time in (("a", 4.0), ("b", 0.25)):
        run.entries[name].baselines["torch"] = Timing([torch_time], torch_time, 0, 0, None)
    run.entries["a"].baselines["numpy"] = Timing([2.0], 2.0, 0, 0, None)
    summary = speedup_summary(list(run.entries.values()))
    assert summary == (
        "vs numpy: geometric mean 2.00x over 1, lowest 2.00x (a); "
        "vs torch: geometric mean 1.00x over 2, lowest 0.25x (b)"
    )


def test_the_manifest_holds_each_entry_types_peak(tmp_path, monkeypatch):
    """Entries of other element types than f32 are held against their own type's peak
    (f64: half the FMA's; bf16 and int8: their dot products' where the host has them)."""
    peaks = {"f32": 100.0, "f64": 50.0, "i8": 180.0}
    monkeypatch.setattr(runner, "measured_peak_gflops", lambda target, dtype="f32": peaks[dtype])
    monkeypatch.setattr(runner, "measured_bandwidth_gbs", lambda target: 20.0)
    text = TINY.replace(
        "options: {M: 32, N: 32, K: 32}", "options: {M: 32, N: 32, K: 32, dtype: i8}"
    )
    text = text.replace(
        "options: {M: 48, N: 32, K: 16}", "options: {M: 48, N: 32, K: 16, dtype: f64}"
    )
    output = tmp_path / "results.json"
    run_suite(load_suite(suite_file(tmp_path, text)), output, [])
    manifest = load_results(output).manifest
    assert manifest.peak_gflops == 100.0
    assert manifest.dtype_peaks_gflops == {"f64": 50.0, "i8": 180.0}
    assert manifest.peak_for({"kind": "matmul", "dtype": "i8"}) == 180.0
    assert manifest.peak_for({"kind": "softmax", "dtype": "f32"}) == 100.0
    assert manifest.peak_for({"kind": "payload"}) == 100.0  # a payload file's: no dtype
    # A results file saved before the per-type peaks loads, with the f32 peak for all.
    saved = json.loads(output.read_text())
    del saved["manifest"]["dtype_peaks_gflops"]
    output.write_text(json.dumps(saved))
    assert load_results(output).manifest.peak_for({"dtype": "i8"}) == 100.0
