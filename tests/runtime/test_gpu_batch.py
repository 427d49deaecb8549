"""The device side of GPU tuning: a batch's candidates timed in device processes, a fault
or a hang costing one candidate, results kept across a killed run, and the race.

Like test_cuda_device.py, this module imports no MLIR: a GPU machine without the wheels
runs it with `pytest --noconftest tests/runtime/test_gpu_batch.py`. Without a GPU, a fake
device process (fake_device.py) aborts or hangs where a faulting kernel would; on a GPU,
kernels that trap and spin do it for real.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from mlirtune.interfaces.device_batch import (
    DATA,
    RACE,
    RESULTS,
    BatchCandidate,
    DeviceBatch,
    read_results,
)
from mlirtune.interfaces.errors import MlirtuneError, UsageError
from mlirtune.interfaces.gpu_program import GpuProgram, KernelLaunch
from mlirtune.runtime.cuda import cuda_unavailable, device_count
from mlirtune.runtime.gpu_batch import run_batch

HERE = Path(__file__).parent
PROGRAM = HERE / "data" / "matmul_64x48x32.json"
FAKE = [sys.executable, str(HERE / "fake_device.py")]
needs_gpu = pytest.mark.skipif(
    device_count() == 0, reason=f"needs an NVIDIA GPU: {cuda_unavailable() or 'none found'}"
)


def write_batch(directory: Path, programs: list[GpuProgram], timeout_s: float = 30.0) -> None:
    """A batch of `programs` (the first the baseline) on seeded data of the matmul."""
    directory.mkdir(exist_ok=True)
    a, b, c = programs[0].arguments
    rng = np.random.default_rng(3)
    arrays = {x.name: rng.uniform(-1, 1, x.shape).astype(x.numpy_dtype) for x in (a, b)}
    arrays[c.name] = arrays[a.name].astype(np.float64) @ arrays[b.name].astype(np.float64)
    np.savez(directory / DATA, **arrays)
    candidates = []
    for index, program in enumerate(programs):
        program.save(directory / f"candidate-{index}.json")
        candidates.append(BatchCandidate(index, program.parameters, f"candidate-{index}.json"))
    batch = DeviceBatch(programs[0].workload, programs[0].flops, tuple(candidates), 2, 3, timeout_s)
    batch.save(directory)


def tiles(block_m: int, block_n: int) -> GpuProgram:
    """The committed program, labelled with other tiles (the fake device times by them)."""
    program = GpuProgram.load(PROGRAM)
    return replace(
        program, parameters={**program.parameters, "block_m": block_m, "block_n": block_n}
    )


@pytest.fixture
def fake(monkeypatch, tmp_path):
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "measured.log"))
    return lambda: [int(i) for i in (tmp_path / "measured.log").read_text().split()]


def test_a_fault_a_hang_and_a_wrong_result_cost_one_candidate_each(tmp_path, monkeypatch, fake):
    directory = tmp_path / "batch"
    write_batch(
        directory,
        [
            tiles(32, 32),
            tiles(64, 64),
            tiles(128, 64),
            tiles(16, 16),
            tiles(128, 128),
            tiles(64, 32),
        ],
        timeout_s=2.0,
    )
    monkeypatch.setenv("FAKE_FAULT", "2")
    monkeypatch.setenv("FAKE_HANG", "3")
    monkeypatch.setenv("FAKE_WRONG", "5")
    seen = []
    results = run_batch(directory, FAKE, lambda index, result: seen.append(index))
    statuses = [results[i]["status"] for i in range(6)]
    assert statuses == ["ok", "ok", "crash", "timeout", "ok", "wrong_result"]
    assert "killed by signal 6" in results[2]["detail"]  # SIGABRT: the process died with it
    assert sorted(seen) == list(range(6)) and fake() == list(range(6))
    # The fastest two that ran (128x128, then 64x64) raced the baseline, in 3 rounds.
    race = json.loads((directory / RACE).read_text())
    assert race["indices"] == [0, 4, 1]
    assert [len(rounds) for rounds in race["samples"]] == [3, 3, 3]
    device, stored = read_results(directory)
    assert device == {"gpu": "Fake GPU", "chip": "sm_90", "driver": 13000}
    assert stored == results


def test_a_killed_run_goes_on_where_it_stopped(tmp_path, fake):
    directory = tmp_path / "batch"
    write_batch(directory, [tiles(32, 32), tiles(64, 64), tiles(128, 64), tiles(64, 32)])
    run_batch(directory, FAKE)
    lines = (directory / RESULTS).read_text().splitlines()
    # Killed while writing candidate 2's line: the half line is ignored, 2 and 3 run again.
    (directory / RESULTS).write_text("\n".join(lines[:3]) + "\n" + lines[3][:10])
    (directory / RACE).unlink()
    results = run_batch(directory, FAKE)
    assert fake() == [0, 1, 2, 3, 2, 3]
    assert [results[i]["status"] for i in range(4)] == ["ok"] * 4
    assert (directory / RACE).exists()


def test_the_command_reports_each_candidate_the_rate_and_the_race(
    tmp_path, monkeypatch, fake, capsys
):
    from mlirtune.cli import gpu_batch

    directory = tmp_path / "batch"
    write_batch(directory, [tiles(32, 32), tiles(64, 64), tiles(128, 64)])
    monkeypatch.setattr(gpu_batch, "device_command", lambda device: FAKE)
    assert gpu_batch.main([str(directory)]) == 0
    out = capsys.readouterr().out
    assert "[3/3]" in out and "candidates/s" in out and "{'ok': 3}" in out
    assert "the baseline" in out and "faster in 3/3 rounds" in out
    assert gpu_batch.main([str(tmp_path / "missing")]) == 2  # no batch.json: one line


def test_a_device_process_that_cannot_start_is_an_error(tmp_path):
    directory = tmp_path / "batch"
    write_batch(directory, [tiles(32, 32)])
    failing = [sys.executable, "-c", "import sys; sys.exit('no GPU here')"]
    with pytest.raises(MlirtuneError, match="no GPU here"):
        run_batch(directory, failing)


def test_no_race_without_a_baseline_that_ran(tmp_path, monkeypatch, fake):
    directory = tmp_path / "batch"
    write_batch(directory, [tiles(32, 32), tiles(64, 64)])
    monkeypatch.setenv("FAKE_WRONG", "0")
    run_batch(directory, FAKE)
    assert json.loads((directory / RACE).read_text())["failed"] == "the baseline failed"


def test_a_bad_manifest_names_the_file(tmp_path):
    (tmp_path / "batch.json").write_text('{"format": "mlirtune-device-batch/1"}')
    with pytest.raises(UsageError, match="malformed device batch") as caught:
        DeviceBatch.load(tmp_path)
    assert str(tmp_path / "batch.json") in str(caught.value)


# --- on a GPU: kernels that trap and spin ------------------------------------------------

TRAP = """.version 7.8
.target sm_80
.address_size 64
.visible .entry payload_kernel() { trap; }
"""
SPIN = """.version 7.8
.target sm_80
.address_size 64
.visible .entry payload_kernel() { spin: bra spin; }
"""


def kernel_without_arguments(ptx: str) -> GpuProgram:
    program = GpuProgram.load(PROGRAM)
    launch = KernelLaunch("payload_kernel", (1, 1, 1), (32, 1, 1), 0, ())
    return replace(program, ptx=ptx, launches=(launch,))


@needs_gpu
@pytest.mark.gpu
def test_a_trapping_and_a_spinning_kernel_on_the_gpu_cost_one_candidate_each(tmp_path):
    directory = tmp_path / "batch"
    program = GpuProgram.load(PROGRAM)
    programs = [
        program,
        kernel_without_arguments(TRAP),
        program,
        kernel_without_arguments(SPIN),
        program,
    ]
    write_batch(directory, programs, timeout_s=5.0)
    results = run_batch(directory)
    assert [results[i]["status"] for i in range(5)] == ["ok", "crash", "ok", "timeout", "ok"]
    assert json.loads((directory / RACE).read_text())["indices"] == [0, 2, 4]
