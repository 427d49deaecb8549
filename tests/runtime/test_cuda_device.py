"""The CUDA runtime: saved programs, devices, buffers, placement and the graph timer.

This module imports no MLIR, so a GPU machine without the wheels runs it as it stands:
`pytest --noconftest tests/runtime/test_cuda_device.py`. Its program is the committed
PROGRAM (a 64x48x32 f32 matmul for sm_80, which the driver compiles for any newer GPU);
tests/targets/test_targets_nvidia.py keeps it equal to a fresh compile. Tests marked `gpu`
skip where the driver finds no GPU; the others check what happens then.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from mlirtune.cli.gpu_run import main
from mlirtune.interfaces.errors import MlirtuneError, UsageError
from mlirtune.interfaces.gpu_program import GpuProgram, KernelLaunch
from mlirtune.interfaces.runtime import Placement
from mlirtune.runtime import cuda
from mlirtune.runtime.cuda import CudaDevice, CudaError, cuda_devices, device_count
from mlirtune.runtime.gpu_run import load_data, run_program, save_data

PROGRAM = Path(__file__).parent / "data" / "matmul_64x48x32.json"
# bf16 (and f16) into f32 on tensor cores (mma.sync, sm_80 and newer): 2 x 2 warps of
# 64 x 64 in double-buffered K steps of 64, in 70 KiB of dynamic shared memory.
MMA_PROGRAMS = {
    inputs: Path(__file__).parent / "data" / f"matmul_{inputs}_128x128x256_mma.json"
    for inputs in ("bf16", "f16")
}
MMA_PROGRAM = MMA_PROGRAMS["bf16"]
NO_GPU = f"needs an NVIDIA GPU: {cuda.cuda_unavailable() or 'the driver sees none'}"
needs_gpu = pytest.mark.skipif(device_count() == 0, reason=NO_GPU)
without_gpu = pytest.mark.skipif(device_count() > 0, reason="this host has a GPU")


def matmul_data(program: GpuProgram, seed: int = 1) -> dict[str, np.ndarray]:
    """Seeded A and B (in the program's input type) for its matmul, and their product in
    float64 as C (f32)."""
    a, b, c = program.arguments
    rng = np.random.default_rng(seed)
    arrays = {x.name: rng.uniform(-1, 1, x.shape).astype(x.numpy_dtype) for x in (a, b)}
    product = arrays[a.name].astype(np.float64) @ arrays[b.name].astype(np.float64)
    arrays[c.name] = product.astype(np.float32)
    return arrays


# --- saved programs (any host) -------------------------------------------------------------


def test_program_round_trips(tmp_path):
    program = GpuProgram.load(PROGRAM)
    assert sorted(program.launches[0].arguments) == [0, 1, 2]
    assert [a.is_output for a in program.arguments] == [False, False, True]
    program.save(tmp_path / "p.json")
    assert GpuProgram.load(tmp_path / "p.json") == program


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "cannot read a GPU program"),
        ('{"format": "other/1"}', "not a mlirtune-gpu-program/1 file"),
        ('{"format": "mlirtune-gpu-program/1", "chip": "sm_80"}', "malformed GPU program"),
    ],
)
def test_bad_program_files_name_the_file(tmp_path, text, message):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(UsageError, match=message) as caught:
        GpuProgram.load(path)
    assert str(path) in str(caught.value)


def test_a_launch_cannot_take_an_argument_the_program_lacks():
    program = GpuProgram.load(PROGRAM)
    launch = KernelLaunch("payload_kernel", (1, 1, 1), (1, 1, 1), 0, (0, 1, 3))
    with pytest.raises(UsageError, match=r"takes arguments \(0, 1, 3\), but the program has 3"):
        replace(program, launches=(launch,))


def test_data_round_trips_and_a_corrupt_file_is_named(tmp_path):
    path = tmp_path / "p.json"
    assert load_data(path) is None
    save_data(path, {"A": np.arange(3, dtype=np.float32)})
    assert load_data(path)["A"].tolist() == [0.0, 1.0, 2.0]
    path.with_suffix(".npz").write_bytes(b"not a zip")
    with pytest.raises(UsageError, match="cannot read the program's data"):
        load_data(path)


# --- without a GPU ---------------------------------------------------------------------------


@without_gpu
def test_without_a_gpu_the_list_is_empty_and_asking_says_why():
    assert cuda_devices() == []
    with pytest.raises(UsageError, match="no CUDA device 0: ") as caught:
        CudaDevice(0)
    assert caught.value.stage == "cuda"


@without_gpu
def test_gpu_run_reads_its_files_first_then_says_there_is_no_gpu(tmp_path, capsys):
    assert main([str(tmp_path / "missing.json")]) == 2
    assert "cannot read a GPU program" in capsys.readouterr().err
    assert main([str(PROGRAM)]) == 2
    assert "no CUDA device 0" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [(["--device", "-1"], "--device must be"), (["--max-time", "0"], "max-time")],
)
def test_gpu_run_refuses_bad_options(argv, message, capsys):
    with pytest.raises(SystemExit) as caught:
        main([str(PROGRAM), *argv])
    assert caught.value.code == 2 and message in capsys.readouterr().err


def test_missing_bindings_are_named(monkeypatch):
    monkeypatch.setitem(sys.modules, "cuda.bindings", None)  # import fails
    cuda._driver_and_reason.cache_clear()
    try:
        assert "cuda-bindings is not installed" in cuda.cuda_unavailable()
        assert device_count() == 0
    finally:
        monkeypatch.undo()
        cuda._driver_and_reason.cache_clear()


# --- on a GPU ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def device() -> CudaDevice:
    return CudaDevice(0)


@pytest.mark.gpu
@needs_gpu
def test_devices_are_enumerated_with_their_facts(device):
    devices = cuda_devices()
    assert [d.index for d in devices] == list(range(device_count()))
    major, _ = device.compute_capability
    assert major >= 5 and device.sms > 0 and device.memory_bytes > 0 and device.model
    assert device.chip.startswith("sm_")
    assert set(device.fingerprint()) == {"gpu", "chip", "driver"}
    with pytest.raises(UsageError, match=f"this host has {device_count()} GPU"):
        CudaDevice(device_count())


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("placement", list(Placement))
def test_the_program_verifies_and_times(device, placement):
    program = GpuProgram.load(PROGRAM)
    run = run_program(device, program, matmul_data(program), placement=placement)
    assert run.verification.ok, run.verification.summary()
    assert len(run.seconds) >= 3 and (run.seconds > 0).all()


def test_shared_memory_past_the_device_is_refused_before_launch():
    """A kernel asking for more shared memory than the device gives a block is an error
    naming both (checked before the driver is asked to opt the kernel in)."""
    device = SimpleNamespace(model="Some GPU", chip="sm_86", shared_bytes_per_block=101376)
    launch = replace(GpuProgram.load(MMA_PROGRAM).launches[0], shared_bytes=200_000)
    with pytest.raises(UsageError, match=r"needs 200000 bytes .* Some GPU \(sm_86\) .* 101376"):
        cuda._allow_shared_memory(device, None, launch)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("inputs", MMA_PROGRAMS)
def test_the_tensor_core_programs_verify(device, inputs):
    program = GpuProgram.load(MMA_PROGRAMS[inputs])
    major, _ = device.compute_capability
    if major < 8:
        pytest.skip(f"{inputs} mma.sync needs sm_80 or newer, this GPU is {device.chip}")
    run = run_program(device, program, matmul_data(program))
    assert run.verification.ok, run.verification.summary()


@pytest.mark.gpu
@needs_gpu
def test_host_placement_copies_in_every_timed_call(device):
    """An input placed on the host is uploaded by each timed call, and an output placed
    there downloaded; a device-placed input is what was uploaded before timing."""
    program = GpuProgram.load(PROGRAM)
    first, second = matmul_data(program, 1), matmul_data(program, 2)
    names = [a.name for a in program.arguments]
    for placement, expected in ((Placement.HOST, second), (Placement.DEVICE, first)):
        initial = {**first, "C": np.full_like(first["C"], np.nan)}
        buffers = [device.allocate(n, initial[n], placement) for n in names]
        try:
            with device.load(program) as loaded:
                for name, buffer in zip(names[:2], buffers[:2], strict=True):
                    buffer.host[...] = second[name]  # after the upload of `first`
                loaded.timer(buffers)(2, 1)
                got = buffers[2].host if placement == Placement.HOST else device.to_host(buffers[2])
                np.testing.assert_allclose(got, expected["C"], rtol=1e-4, atol=1e-4)
        finally:
            for buffer in buffers:
                device.release(buffer)


@pytest.mark.gpu
@needs_gpu
def test_bad_ptx_is_an_error_and_the_device_stays_usable(device):
    program = GpuProgram.load(PROGRAM)
    with pytest.raises(CudaError, match="cuModuleLoadData failed") as caught:
        device.load(replace(program, ptx="this is not PTX"))
    assert caught.value.stage == "cuda"
    missing = replace(program, launches=(replace(program.launches[0], kernel="no_such"),))
    with pytest.raises(MlirtuneError, match="cuModuleGetFunction failed"):
        device.load(missing)
    assert run_program(device, program, matmul_data(program)).verification.ok


@pytest.mark.gpu
@needs_gpu
def test_gpu_run_verifies_saved_programs(tmp_path, capsys):
    path = tmp_path / "mm.json"
    program = GpuProgram.load(PROGRAM)
    program.save(path)
    save_data(path, matmul_data(program))
    assert main([str(path), "--max-time", "0.05", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["verified"] is True and report["gflops"] > 0
    wrong = matmul_data(program)
    wrong["C"] = wrong["C"] + 1
    save_data(path, wrong)
    assert main([str(path), "--max-time", "0.05"]) == 1
    assert "WRONG" in capsys.readouterr().out
