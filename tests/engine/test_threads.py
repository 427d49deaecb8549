"""Kernels on several cores: `HostCPU(threads=N)` / `--threads N` spread a contraction's outer
block loop (an scf.forall) over OpenMP threads, with the same results as one thread."""

import dataclasses
import importlib.metadata
import os

import numpy as np
import pytest
from mlir import ir

from mlirtune.api import engine_for
from mlirtune.cli import main
from mlirtune.interfaces.bench import BenchOptions
from mlirtune.interfaces.errors import MlirtuneError, UsageError
from mlirtune.interfaces.op import OpInfo
from mlirtune.runtime.openmp import openmp_library
from mlirtune.targets.host_cpu import HostCPU, detect_features
from mlirtune.tune.problem import searchable_threads
from mlirtune.tune.space_for import space_for
from mlirtune.workloads import BatchMatmul, Conv2d, Elementwise, Matmul, Mlp, Softmax

CORES = os.cpu_count() or 1
pytestmark = pytest.mark.jit
needs_two_cores = pytest.mark.skipif(CORES < 2, reason="needs 2 cores, this host has 1")

# Small caches, so these small shapes take the packed path where their blocks are whole.
SMALL_CACHES = {"l1d_bytes": 8 << 10, "l2_bytes": 64 << 10, "l3_bytes": 1 << 20}
INTEL_CACHES = {"l1d_bytes": 48 << 10, "l2_bytes": 2 << 20, "l3_bytes": 32 << 20}


def outputs(threads: int, workload, parameters=None) -> np.ndarray:
    engine = engine_for(HostCPU(threads=threads, **SMALL_CACHES), use_specs=False)
    kernel = engine.compile(workload, parameters)
    with workload.allocate(engine) as buffers:
        kernel.call(buffers)
        return engine.runtime.to_host(buffers[-1]).copy()


def op_names(threads: int, workload) -> tuple[set[str], set[str]]:
    """Op names after the schedule, and after lowering."""
    engine = engine_for(HostCPU(threads=threads, **SMALL_CACHES), use_specs=False)
    scheduled: set[str] = set()

    def observe(stage: str, module: ir.Module) -> None:
        if stage.startswith("schedule"):
            module.operation.walk(lambda op: scheduled.add(op.name) or ir.WalkResult.ADVANCE)

    lowered: set[str] = set()
    engine.lower_payload(workload, observer=observe).operation.walk(
        lambda op: lowered.add(op.name) or ir.WalkResult.ADVANCE
    )
    return scheduled, lowered


@needs_two_cores
@pytest.mark.parametrize(
    "workload",
    [
        Matmul(M=128, N=256, K=256),  # packed: column blocks in parallel
        Mlp(M=128, N=256, K=256),  # packed, bias and ReLU in each column block
        Matmul(M=64, N=96, K=64),  # cache-resident, whole tiles: output blocks in parallel
        Matmul(M=70, N=45, K=30),  # partial tiles, peeled: one thread
        BatchMatmul(B=4, M=32, N=64, K=32),
    ],
    ids=["packed", "mlp", "resident", "peeled", "batch"],
)
def test_threads_give_the_results_of_one_thread(workload):
    one, two = outputs(1, workload), outputs(2, workload)
    np.testing.assert_array_equal(one, two)  # the same sums in the same order, per block
    engine = engine_for(HostCPU(threads=2, **SMALL_CACHES), use_specs=False)
    assert engine.execute(workload).verification.ok


@needs_two_cores
def test_parallel_loops_become_openmp_loops():
    workload = Matmul(M=128, N=256, K=256)
    (scheduled, lowered), (serial, serial_lowered) = op_names(2, workload), op_names(1, workload)
    assert "scf.forall" in scheduled and "scf.forall" not in serial
    assert {"omp.parallel", "omp.wsloop"} <= lowered
    assert not any(name.startswith("omp.") for name in serial_lowered)


@needs_two_cores
def test_the_selector_gives_each_thread_a_column_block():
    workload = Matmul(M=128, N=256, K=256)
    engine = engine_for(HostCPU(threads=2, **SMALL_CACHES), use_specs=False)
    plan = engine.plan(workload)
    assert plan.values["THREADS"] == 2 and plan.sources["THREADS"] == "target"
    assert plan.values["PACK"] > 0 and plan.values["NC"] <= 256 // 2


@needs_two_cores
@pytest.mark.parametrize(
    "workload",
    [
        Matmul(M=128, N=768, K=3072),  # its output fits L2: one block
        Matmul(M=128, N=768, K=3072, transpose="b", bias=True),  # packed: 3 blocks of 256
        Matmul(M=64, N=96, K=64),  # N's register tiles do not halve: M's blocks split
        BatchMatmul(B=3, M=64, N=64, K=32),
    ],
    ids=["resident", "packed", "rows", "batch"],
)
def test_the_threads_get_as_many_output_blocks_each(workload):
    engine = engine_for(HostCPU(threads=2, **INTEL_CACHES), use_specs=False)
    values, dims = engine.plan(workload).values, workload.root.dims
    assert dims["M"] % values["MC"] == 0 and dims["N"] % values["NC"] == 0
    blocks = dims.get("B", 1) * dims["M"] // values["MC"] * dims["N"] // values["NC"]
    assert blocks % 2 == 0


@pytest.mark.parametrize("threads", [-1, CORES + 1, 1.5, True])
def test_thread_counts_beyond_the_host_are_refused(threads):
    with pytest.raises(UsageError, match=f"from 1 to this host's {CORES} cores"):
        HostCPU(threads=threads)


def test_zero_threads_means_every_core():
    assert HostCPU(threads=0).threads == CORES
    assert "threads" not in HostCPU().fingerprint()  # one-thread keys stay as they were


def test_cli_threads_are_the_targets_not_a_parameter(capsys):
    code = main(["run", "matmul", "M=16", "N=16", "K=16", "--param", "THREADS=2"])
    assert code == 2 and "THREADS: set by the target" in capsys.readouterr().err
    code = main(["run", "matmul", "--target", "nvidia-gpu", "--threads", "2"])
    assert code == 2 and "--threads applies to the host target" in capsys.readouterr().err


@needs_two_cores
def test_bench_says_how_many_threads_ran(capsys):
    code = main(["bench", "matmul", "M=64", "N=64", "K=64", "--threads", "2", "--json",
                 "--max-time", "0.05", "--baseline", "numpy"])  # fmt: skip
    assert code == 0
    report = capsys.readouterr().out
    assert '"threads": 2' in report and '"THREADS": 2' in report


@needs_two_cores
@pytest.mark.parametrize(
    "workload",
    [
        Conv2d(H=10, W=12, C=8, F=16),  # output rows in parallel, the fill fused
        Softmax(M=32, N=100),  # whole row tiles in parallel
        Softmax(M=30, N=100),  # a partial row tile, peeled: one thread
        Elementwise(M=16, N=70, ops="add,mul,relu"),  # rows in parallel, columns peeled
    ],
    ids=["conv2d", "softmax", "softmax-peeled", "elementwise"],
)
def test_every_host_family_gives_the_results_of_one_thread(workload):
    np.testing.assert_array_equal(outputs(1, workload), outputs(2, workload))


@needs_two_cores
def test_engines_dropped_right_after_a_parallel_call_do_not_crash_later_calls():
    # A task's worker thread can still be leaving the kernel's code when the call returns;
    # freeing that code at once crashed such a thread about once in 400 drops. Each engine
    # here is dropped right after its call.
    for columns in range(100, 140):
        workload = Softmax(M=32, N=columns)
        engine = engine_for(HostCPU(threads=2), use_specs=False)
        kernel = engine.compile(workload)
        with workload.allocate(engine) as buffers:
            kernel.call(buffers)
        del kernel, engine


def test_searched_thread_counts_are_powers_of_two_and_the_targets_count():
    many_cores = dataclasses.replace(detect_features(), cores=8)
    assert searchable_threads(HostCPU(many_cores, threads=6)) == (1, 2, 4, 6)
    assert searchable_threads(HostCPU(many_cores, threads=8)) == (1, 2, 4, 8)
    with pytest.raises(UsageError, match="2 or more threads"):
        searchable_threads(HostCPU())


def test_a_searched_thread_count_is_a_knob_whose_cost_shares_the_work():
    target = HostCPU(dataclasses.replace(detect_features(), cores=4), threads=4)
    op = OpInfo("matmul", {"M": 256, "N": 256, "K": 256}, ("f32",) * 3)
    space = space_for(op, "contraction", target, threads=(1, 2, 4))
    assert space.domains["THREADS"] == (1, 2, 4)
    one = next(c for c in space.enumerate() if c["THREADS"] == 1)
    assert space.cost({**one, "THREADS": 4}) == pytest.approx(space.cost(one) / 4)
    assert "THREADS" not in space_for(op, "contraction", target).domains


@needs_two_cores
def test_a_config_may_use_fewer_threads_than_the_target_not_more():
    engine = engine_for(HostCPU(threads=2), use_specs=False)
    workload = Matmul(M=64, N=96, K=64)
    plan = engine.plan(workload, {"THREADS": 1})
    assert plan.values["THREADS"] == 1 and plan.sources["THREADS"] == "explicit"
    assert engine.execute(workload, {"THREADS": 1}).verification.ok
    with pytest.raises(UsageError, match="THREADS: set by the target"):
        engine.plan(workload, {"THREADS": 3})


def test_cli_searching_threads_needs_several(capsys):
    code = main(["tune", "matmul", "M=16", "N=16", "K=16", "--search-threads", "--budget", "1"])
    assert code == 2 and "2 or more threads" in capsys.readouterr().err


def test_a_missing_openmp_runtime_is_named(monkeypatch):
    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", not_installed)
    openmp_library.cache_clear()
    try:
        with pytest.raises(MlirtuneError, match="pip install intel-openmp"):
            openmp_library()
    finally:
        openmp_library.cache_clear()


@needs_two_cores
def test_threads_sleep_after_a_benchmark():
    """After a timed parallel kernel the runtime's threads are paused; the next parallel
    kernel wakes them and gives the same result."""
    workload = Matmul(M=128, N=256, K=256)
    engine = engine_for(HostCPU(threads=2, **SMALL_CACHES), use_specs=False)
    engine.benchmark(workload, options=BenchOptions(max_time_s=0.01))
    np.testing.assert_array_equal(outputs(2, workload), outputs(1, workload))
