"""Numpy baselines, timed in the same run as the kernel with one BLAS thread."""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable

import ml_dtypes
import numpy as np
from threadpoolctl import threadpool_limits

from mlirtune.bench.harness import run_benchmark
from mlirtune.bench.result import bench_result
from mlirtune.interfaces.bench import BenchOptions, BenchResult
from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.workload import Workload
from mlirtune.memory import check_memory

BASELINES = ("numpy",)


def measure_numpy(
    workload: Workload, options: BenchOptions | None = None, threads: int = 1
) -> BenchResult:
    """Time the workload's numpy baseline with `threads` BLAS threads (one by default, as
    kernels run), by the same sampling rules as kernels."""
    if type(workload).numpy_baseline is Workload.numpy_baseline:  # known without allocating
        raise UsageError(f"{workload.name} has no numpy baseline", stage="baseline")
    check_memory(workload, "numpy baseline", baseline=True)
    run = workload.numpy_baseline()
    if run is None:
        raise UsageError(f"{workload.name} has no numpy baseline", stage="baseline")

    with threadpool_limits(limits=threads):
        return measure_callable(run, workload, options)


def torch_available() -> bool:
    """Whether PyTorch is installed (the `bench` extra): the bf16 and CPU-operator comparator."""
    return importlib.util.find_spec("torch") is not None


def torch_tensor(array: np.ndarray):
    """A PyTorch CPU tensor holding a copy of `array` in PyTorch's own memory (bf16 arrays
    through a uint16 view, since torch.from_numpy has no bfloat16), for workloads'
    `torch_baseline` closures. A copy, not a view: PyTorch allocates 64-byte aligned, numpy
    16-byte, and oneDNN's AMX kernels ran at half speed on numpy's memory (1024^3 bf16 on an
    Intel Xeon: 630 against 1228 GFLOP/s)."""
    import torch

    if array.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(array.view(np.uint16)).view(torch.bfloat16).clone()
    return torch.from_numpy(array).clone()


def measure_torch(
    workload: Workload,
    options: BenchOptions | None = None,
    threads: int = 1,
    compiled: bool = False,
) -> BenchResult:
    """Time the workload's PyTorch eager baseline (oneDNN kernels; AMX or AVX512-BF16 where
    the host has them), or with `compiled` its torch.compile form, with `threads` intra-op
    threads, by the same sampling rules as kernels. A UsageError where PyTorch is missing,
    the workload has no such form, or torch.compile fails on this host (its reason)."""
    if not torch_available():
        raise UsageError(
            "PyTorch is not installed: pip install 'mlirtune[bench]'", stage="baseline"
        )
    run = workload.torch_compiled_baseline() if compiled else workload.torch_baseline()
    form = "torch.compile" if compiled else "PyTorch"
    if run is None:
        raise UsageError(f"{workload.name} has no {form} baseline", stage="baseline")
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with torch.inference_mode():
            try:
                run()  # compiles, for torch.compile: not timed
            except Exception as error:  # inductor needs a C++ compiler, among others
                raise UsageError(
                    f"{form} fails here: {type(error).__name__}", stage="baseline"
                ) from None
            return measure_callable(run, workload, options)
    finally:
        torch.set_num_threads(previous)


def measure_callable(
    run: Callable[[], object], workload: Workload, options: BenchOptions | None
) -> BenchResult:
    """Time `run` by the same sampling rules as kernels."""

    def timer(iterations: int, samples: int) -> np.ndarray:
        out = np.empty(samples, dtype=np.int64)
        for s in range(samples):
            start = time.perf_counter_ns()
            for _ in range(iterations):
                run()
            out[s] = time.perf_counter_ns() - start
        return out

    seconds = run_benchmark(timer, options or BenchOptions())
    return bench_result(
        workload=workload.describe(),
        parameters={},
        seconds=seconds,
        complexity=workload.get_complexity(),
        verified=True,
    )
