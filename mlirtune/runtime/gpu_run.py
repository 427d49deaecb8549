"""Saved GPU programs run where there is a GPU but no MLIR: verified and timed.

A program is written by `mlirtune opt --target nvidia-gpu --program FILE.json` (or
PtxEngine.compile(...).save); the `.npz` beside it, when there is one, holds the inputs and
the expected outputs, which the outputs are checked against with the tolerances the
program carries. Without it the inputs are seeded random values and nothing is verified.
Timing uses the benchmark harness over CUDA events around graphs of back-to-back calls.
The command line is mlirtune.cli.gpu_run.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mlirtune.bench.harness import run_benchmark
from mlirtune.interfaces.bench import BenchOptions
from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.gpu_program import GpuProgram
from mlirtune.interfaces.runtime import Placement
from mlirtune.interfaces.verification import VerificationResult
from mlirtune.runtime.cuda import CudaDevice
from mlirtune.verify import check_outputs

SEED = 0


@dataclass(frozen=True)
class ProgramRun:
    """One program's verification (None: no expected outputs) and per-call seconds."""

    program: GpuProgram
    verification: VerificationResult | None
    seconds: np.ndarray

    def summary(self) -> dict[str, object]:
        median = float(np.median(self.seconds))
        return {
            "workload": self.program.workload,
            "parameters": self.program.parameters,
            "verified": None if self.verification is None else self.verification.ok,
            "max_abs_error": None if self.verification is None else self.verification.max_abs_error,
            "median_s": median,
            "cv": float(np.std(self.seconds) / np.mean(self.seconds)),
            "samples": len(self.seconds),
            "gflops": self.program.flops / median / 1e9,
        }


def data_path(program_path: Path) -> Path:
    """Where a program's inputs and expected outputs are saved: beside it, as .npz."""
    return program_path.with_suffix(".npz")


def save_data(program_path: Path, arrays: dict[str, np.ndarray]) -> None:
    np.savez(data_path(program_path), **arrays)


def load_data(program_path: Path) -> dict[str, np.ndarray] | None:
    """The arrays saved beside a program; None where there are none."""
    path = data_path(program_path)
    if not path.exists():
        return None
    try:
        with np.load(path) as arrays:
            return dict(arrays)
    except (OSError, ValueError, zipfile.BadZipFile) as error:
        raise UsageError(f"{path}: cannot read the program's data: {error}", stage="load") from None


def run_program(
    device: CudaDevice,
    program: GpuProgram,
    data: dict[str, np.ndarray] | None = None,
    options: BenchOptions | None = None,
    placement: Placement = Placement.DEVICE,
) -> ProgramRun:
    """Load `program`, run it once on `data`'s inputs (seeded ones without), check its
    outputs against `data`'s, then time it with `options`, every argument placed at
    `placement` (on the host, each timed call uploads the inputs and downloads the
    outputs)."""
    buffers = []
    try:
        for argument, initial in zip(program.arguments, initial_arrays(program, data), strict=True):
            buffers.append(device.allocate(argument.name, initial, placement))
        with device.load(program) as loaded:
            loaded.launch(buffers)
            verification = None
            if data is not None:
                outputs = [
                    (a.name, device.to_host(b), a.atol, a.rtol)
                    for a, b in zip(program.arguments, buffers, strict=True)
                    if a.is_output
                ]
                expected = [_expected(data, name, got.shape) for name, got, *_ in outputs]
                verification = check_outputs(outputs, expected)
            seconds = run_benchmark(loaded.timer(buffers), options or BenchOptions())
    finally:
        for buffer in buffers:
            device.release(buffer)
    return ProgramRun(program, verification, seconds)


def initial_arrays(program: GpuProgram, data: dict[str, np.ndarray] | None) -> list[np.ndarray]:
    """Each argument's first contents: inputs from `data` (seeded random values without),
    outputs NaN, so that an element a kernel never writes fails verification."""
    rng = np.random.default_rng(SEED)
    arrays = []
    for argument in program.arguments:
        if argument.is_output:
            arrays.append(np.full(argument.shape, np.nan, dtype=argument.numpy_dtype))
        elif data is not None:
            arrays.append(_array(data, argument.name, argument.shape, argument.numpy_dtype))
        else:
            arrays.append(rng.uniform(-1, 1, argument.shape).astype(argument.numpy_dtype))
    return arrays


def _array(data: dict[str, np.ndarray], name: str, shape: tuple[int, ...], dtype: np.dtype):
    """Input `name` from `data`, checked against the program's shape and dtype. npz files
    keep ml_dtypes' bfloat16 as raw 2-byte records, which are viewed back as that dtype."""
    array = _expected(data, name, shape)
    if array.dtype.kind == "V" and array.dtype.itemsize == dtype.itemsize:
        array = array.view(dtype)
    if array.dtype != dtype:
        raise UsageError(
            f"array {name!r} is {array.dtype}, the program wants {dtype}", stage="load"
        )
    return array


def _expected(data: dict[str, np.ndarray], name: str, shape: tuple[int, ...]) -> np.ndarray:
    """Array `name` from `data`, checked against the program's shape (an expected output
    may be wider than the output, e.g. a float64 reference)."""
    if name not in data:
        raise UsageError(f"the program's data has no array {name!r}", stage="load")
    array = data[name]
    if array.shape != tuple(shape):
        raise UsageError(
            f"array {name!r} has shape {list(array.shape)}, the program wants {list(shape)}",
            stage="load",
        )
    return array
