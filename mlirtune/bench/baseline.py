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
        return _measure(run, workload, options)


def torch_available() -> bool:
    """Whether PyTorch is installed (the `bench` extra), for the bf16 comparator."""
    return importlib.util.find_spec("torch") is not None


def measure_torch_matmul(
    workload: Workload, options: BenchOptions | None = None, threads: int = 1
) -> BenchResult:
    """Time PyTorch's CPU matmul (oneDNN; AMX or AVX512-BF16 where the host has them) on a
    matmul workload's inputs in their own dtype, with `threads` threads. Its bf16 product
    is rounded to bf16, where ours stays f32."""
    import torch

    if workload.name != "matmul" or workload.options["bias"] or workload.options["relu"]:
        raise UsageError(f"{workload.name}: PyTorch times plain matmuls only", stage="baseline")
    a, b = (
        torch.from_numpy(x.view(np.uint16)).view(torch.bfloat16)
        if x.dtype == ml_dtypes.bfloat16
        else torch.from_numpy(x)
        for x in workload.inputs[:2]
    )
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return _measure(lambda: torch.matmul(a, b), workload, options)
    finally:
        torch.set_num_threads(previous)


def _measure(
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
