"""Numpy baselines, timed in the same run as the kernel with one BLAS thread."""

from __future__ import annotations

import time

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

    def timer(iterations: int, samples: int) -> np.ndarray:
        out = np.empty(samples, dtype=np.int64)
        for s in range(samples):
            start = time.perf_counter_ns()
            for _ in range(iterations):
                run()
            out[s] = time.perf_counter_ns() - start
        return out

    with threadpool_limits(limits=threads):
        seconds = run_benchmark(timer, options or BenchOptions())
    return bench_result(
        workload=workload.describe(),
        parameters={},
        seconds=seconds,
        complexity=workload.get_complexity(),
        verified=True,
    )
