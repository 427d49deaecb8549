"""Tuning for a GPU through device batches: candidates compiled here into one folder,
timed by a (fake) device, read back into the database keyed on the GPU that measured
them. The device side's own faults and resumption: tests/runtime/test_gpu_batch.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from mlirtune.cli import main
from mlirtune.interfaces.device_batch import DeviceBatch
from mlirtune.interfaces.errors import UsageError
from mlirtune.runtime.cuda import device_count
from mlirtune.runtime.gpu_batch import run_batch
from mlirtune.targets.nvidia_gpu import NvidiaGPU
from mlirtune.tune.db import TuningDB
from mlirtune.tune.device import export_batch, import_batch
from mlirtune.tune.evaluator import EvaluatorSettings
from mlirtune.tune.problem import generate
from mlirtune.tune.tuner import TuneOptions, _Silent
from mlirtune.workloads.matmul import Matmul

pytestmark = [pytest.mark.subprocess]

FAKE = [sys.executable, str(Path(__file__).parents[1] / "runtime" / "fake_device.py")]
SIZE = {"M": 128, "N": 128, "K": 128, "dtype": "bf16"}
OPTIONS = TuneOptions(
    budget=5,
    strategy="random",
    race_rounds=3,
    finalists=2,
    evaluator=EvaluatorSettings(workers=2),
)


@pytest.fixture
def problem():
    return generate(Matmul(**SIZE), NvidiaGPU(chip="sm_90"))


def test_a_batch_runs_on_the_device_and_its_records_name_the_gpu(problem, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "measured.log"))
    monkeypatch.setenv("FAKE_FAULT", "2")
    directory = tmp_path / "batch"
    batch = export_batch(problem, OPTIONS, directory, _Silent())
    assert len(batch.candidates) == 6  # the baseline and the budget's 5
    assert batch.candidates[0].parameters == problem.slot_values(problem.baseline)
    programs = [json.loads((directory / c.program).read_text()) for c in batch.candidates]
    assert all("mma.sync" in p["ptx"] or p["parameters"]["mma"] == 0 for p in programs)
    run_batch(directory, FAKE)
    with TuningDB(tmp_path / "t.db") as db:
        report = import_batch(problem, directory, db, _Silent())
        records = db.records(report.problem.key)
    assert report.problem.key.target["device"]["gpu"] == "Fake GPU"
    assert report.failed_by_status == {"crash": 1}
    assert {r.role for r in records} == {"baseline", "candidate", "race"}
    # The fake times a config by its block tile: the winner, if any, has the largest one.
    fastest = max(
        (c.config for c in report.evaluated if c.outcome.ok),
        key=lambda c: c["block_m"] * c["block_n"],
    )
    baseline = problem.baseline
    if fastest["block_m"] * fastest["block_n"] > baseline["block_m"] * baseline["block_n"]:
        assert report.winner is not None
        assert report.winner["block_m"] * report.winner["block_n"] == (
            fastest["block_m"] * fastest["block_n"]
        )


def test_import_refuses_a_batch_not_yet_measured_or_of_another_workload(problem, tmp_path):
    directory = tmp_path / "batch"
    export_batch(problem, OPTIONS, directory, _Silent())
    with TuningDB(tmp_path / "t.db") as db:
        with pytest.raises(UsageError, match=r"python -m mlirtune\.cli\.gpu_batch"):
            import_batch(problem, directory, db, _Silent())
        other = generate(Matmul(**{**SIZE, "K": 256}), NvidiaGPU(chip="sm_90"))
        with pytest.raises(UsageError, match="the batch is for"):
            import_batch(other, directory, db, _Silent())


def test_a_batch_needs_a_budget(problem, tmp_path):
    options = TuneOptions(time_limit_s=10, evaluator=EvaluatorSettings(workers=2))
    with pytest.raises(UsageError, match="--budget"):
        export_batch(problem, options, tmp_path / "batch", _Silent())


def test_cli_exports_and_imports_a_batch(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "measured.log"))
    directory, db = tmp_path / "batch", str(tmp_path / "t.db")
    command = [
        "tune",
        "matmul",
        *(f"{k}={v}" for k, v in SIZE.items()),
        "--target",
        "nvidia-gpu",
        "--chip",
        "sm_90",
        "--budget",
        "3",
        "--db",
        db,
    ]
    assert main([*command, "--export-batch", str(directory)]) == 0
    assert len(DeviceBatch.load(directory).candidates) == 4
    run_batch(directory, FAKE)
    capsys.readouterr()
    assert main([*command, "--import-batch", str(directory), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["evaluated"] == 3 and report["strategy"] == "device batch"


@pytest.mark.skipif(device_count() > 0, reason="this host has a GPU")
def test_tuning_for_a_gpu_without_one_says_how_to_time_it_elsewhere(tmp_path, capsys):
    command = [
        "tune",
        "matmul",
        "--target",
        "nvidia-gpu",
        "--budget",
        "2",
        "--db",
        str(tmp_path / "t.db"),
    ]
    assert main(command) != 0
    assert "--export-batch DIR" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--export-batch", "b"], "apply to --target nvidia-gpu"),
        (["--target", "nvidia-gpu", "--export-batch", "b", "--import-batch", "b"], "not both"),
        (["--target", "nvidia-gpu", "--update-spec", "lib.mlir"], "apply to host targets"),
    ],
)
def test_batch_and_spec_flags_go_with_their_targets(tmp_path, capsys, flags, message):
    command = ["tune", "matmul", "--budget", "2", "--db", str(tmp_path / "t.db"), *flags]
    assert main(command) == 2
    assert message in capsys.readouterr().err
