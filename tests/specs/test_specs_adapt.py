"""`mlirtune specs adapt`: the shipped classes' configs raced on this host, the winner written
as an entry tuned here that the next compile applies; failures cost one candidate only."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from dataclasses import replace

import pytest
from mlir import ir

from mlirtune.cli import main
from mlirtune.curation.adapt import AdaptOptions, adapt, default_output, shipped_jobs
from mlirtune.engine.mlir_jit import MlirJitEngine
from mlirtune.ir.context import new_context
from mlirtune.specs.library import SpecLibrary
from mlirtune.specs.sources import fetch
from mlirtune.specs.specset import SpecWarning
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.toolchain import digest
from mlirtune.tune.db import TuningDB
from mlirtune.tune.evaluator import EvaluatorSettings
from mlirtune.tune.problem import generate
from mlirtune.workloads import Matmul
from tests.faulty import faulty_engines
from tests.specs.libraries import SAPPHIRE_RAPIDS, ZEN3, ZEN4, valid_configs, write_library

WORKLOAD = Matmul(M=32, N=32, K=32)
SECOND = Matmul(M=16, N=48, K=16)
FAST = EvaluatorSettings(workers=2, compile_timeout_s=60, run_timeout_s=5)
ISA = HostCPU().features.isa
needs_a_library = pytest.mark.skipif(
    HostCPU().spec_library_name() is None, reason="no spec library is shipped for this ISA"
)


@pytest.fixture(autouse=True)
def shipped(monkeypatch, tmp_path):
    """A folder of shipped libraries of this test's own, and the configured libraries and
    tuning database in the test's folder."""
    folder = tmp_path / "defaults"
    folder.mkdir()
    monkeypatch.setattr("mlirtune.specs.specset.DEFAULTS_DIR", folder)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("MLIRTUNE_DB", str(tmp_path / "default.db"))
    return folder


@functools.cache
def problem(workload=WORKLOAD, target=None):
    return generate(workload, target or HostCPU())


def ship(folder, tuned_on: str, *entries) -> str:
    """A shipped library for this ISA tuned on class `tuned_on`."""
    return write_library(folder / f"x86_64-{ISA}-{tuned_on}.mlir", tuned_on, list(entries))


def cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def entries(path) -> list:
    with new_context(), ir.Location.unknown():
        return SpecLibrary.parse(fetch(str(path))).entries


# --- options and dry runs (nothing compiled) -----------------------------------------------


@needs_a_library
def test_dry_run_lists_the_workloads_and_their_classes(shipped, capsys):
    zen4, zen3 = valid_configs(problem(), 2)
    ship(shipped, "amd-zen4", (problem(), zen4))
    ship(
        shipped,
        "amd-zen3",
        (problem(), zen3),
        (problem(SECOND), valid_configs(problem(SECOND), 1)[0]),
    )
    code, out, _ = cli(capsys, "specs", "adapt", "--dry-run")
    assert code == 0
    assert f"adapting 2 workloads to this host ({HostCPU().cpu_class()})" in out
    assert str(default_output(HostCPU())) in out
    first = sorted(["amd-zen3", "amd-zen4"], key=lambda name: name != HostCPU().cpu_class())
    assert f"matmul K=32 M=32 N=32 dtype=f32: selector, {', '.join(first)}" in out
    assert "matmul K=16 M=16 N=48 dtype=f32: selector, amd-zen3" in out
    assert not default_output(HostCPU()).exists()
    code, out, _ = cli(capsys, "specs", "adapt", "--dry-run", "--workload", "matmul")
    assert code == 0 and "2 workloads" in out


@needs_a_library
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-o", "out.txt"], "a spec library is a .mlir or .mlirbc file"),
        (["--workload", "conv2d"], "no shipped entry was tuned on workload(s) conv2d"),
        (["--max-time", "0"], "--max-time must be positive"),
        (["--max-time", "soon"], "--max-time must be a number of seconds"),
    ],
)
def test_bad_options_are_one_line_errors(shipped, capsys, argv, message):
    ship(shipped, "amd-zen4", (problem(), valid_configs(problem(), 1)[0]))
    code, _, err = cli(capsys, "specs", "adapt", *argv)
    assert code == 2 and message in err and err.count("\n") == 1


def test_no_shipped_library_is_an_error(capsys):
    code, _, err = cli(capsys, "specs", "adapt", "--dry-run")
    assert code == 2 and "no spec library is shipped" in err


# --- races -------------------------------------------------------------------------------


@needs_a_library
@pytest.mark.jit
@pytest.mark.subprocess
def test_adapt_writes_a_library_the_next_compile_applies(shipped, tmp_path, capsys):
    here = HostCPU()
    zen4, other = valid_configs(problem(), 2)
    ship(shipped, "amd-zen4" if here.cpu_class() != "amd-zen4" else "amd-zen3", (problem(), zen4))
    ship(shipped, "intel-sapphire-rapids", (problem(), other))
    db = tmp_path / "t.db"
    code, out, _ = cli(capsys, "specs", "adapt", "--max-time", "0.08", "--db", db)
    output = default_output(here)
    assert code == 0, out
    (line,) = [line for line in out.splitlines() if line.startswith("[1/1] matmul")]
    assert "selector" in line and "intel-sapphire-rapids" in line and "x (" in line
    assert f"wrote 1 entry to {output}" in out
    (entry,) = entries(output)
    target = entry.metadata["target"]
    assert target["class"] == here.cpu_class() and target["hash"] == digest(here.fingerprint())
    assert entry.metadata["speedup"] > 0 and entry.metadata["adapted_from"] in line
    with TuningDB(db, readonly=True) as database:
        assert len(database.verdicts()) == 1

    source = f"spec:{output.stem}:{entry.name}"
    lowering = MlirJitEngine(target=here).plan(WORKLOAD)  # loads the config folder anew
    assert lowering.config_source == source
    assert {k: lowering.values[k] for k in entry.config} == entry.config
    bench = [sys.executable, "-m", "mlirtune", "bench", "matmul", "M=32", "N=32", "K=32"]
    done = subprocess.run(
        [*bench, "--json", "--max-time", "0.05"],
        env={**os.environ},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["config_source"] == source


@needs_a_library
@pytest.mark.jit
@pytest.mark.subprocess
def test_a_failing_candidate_is_skipped_and_finished_work_is_kept(shipped, tmp_path):
    """On a Sapphire Rapids (as far as the classes go), the Zen 3 config crashes and the Zen 4
    one computes a wrong result: both are reported and skipped, the selector wins, and the
    entry is saved before the run is interrupted (after its first workload)."""
    target = HostCPU(**SAPPHIRE_RAPIDS)
    first, second = problem(WORKLOAD, target), problem(SECOND, target)
    zen3, zen4, good = valid_configs(first, 3)
    ship(shipped, "amd-zen3", (first, zen3), (second, good))
    ship(shipped, "amd-zen4", (first, zen4))
    faults = {tuple(sorted(zen3.items())): "segfault", tuple(sorted(zen4.items())): "wrong_result"}
    options = AdaptOptions(max_time_s=0.05, evaluator=replace(FAST, engine=faulty_engines(faults)))
    jobs = shipped_jobs(target)
    assert [len(job.configs) for job in jobs] == [2, 1]
    output = default_output(target)
    assert output.name == "adapted-intel-sapphire-rapids.mlir"
    results = []

    def stop_after_one(result) -> None:
        results.append(result)
        raise KeyboardInterrupt

    with TuningDB(tmp_path / "t.db") as db, pytest.raises(KeyboardInterrupt):
        adapt(jobs, target, output, db, options, on_result=stop_after_one)
    (result,) = results
    statuses = {c.name: c.status for c in result.contenders}
    details = {c.name: c.detail for c in result.contenders}  # why one failed, if it did
    assert statuses == {"selector": "ok", "amd-zen3": "crash", "amd-zen4": "wrong_result"}, details
    assert result.error is None and result.winner.name == "selector"
    assert result.verdict.params == first.slot_values(first.baseline) and not result.verdict.won
    (entry,) = entries(output)  # written before the interruption
    assert entry.name == result.entry and entry.metadata["target"]["class"] == target.cpu_class()
    assert entry.metadata["adapted_from"] == "selector"
    lowering = MlirJitEngine(target=target).plan(WORKLOAD)
    assert lowering.config_source == f"spec:{output.stem}:{entry.name}"
    # Elsewhere each class's own entries apply, and the others are not applied, never silently.
    with pytest.warns(SpecWarning, match="tuned on CPU class intel-sapphire-rapids"):
        zen3_host = MlirJitEngine(target=HostCPU(**ZEN3)).plan(WORKLOAD)
    assert zen3_host.config_source.startswith(f"spec:x86_64-{ISA}-amd-zen3:")
    zen4_host = MlirJitEngine(target=HostCPU(**ZEN4)).plan(SECOND)
    assert zen4_host.config_source == "selector"
    assert "tuned on CPU class amd-zen3, not on this host's (amd-zen4)" in zen4_host.notes[0]
