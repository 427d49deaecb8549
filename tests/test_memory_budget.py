"""The memory budget: workloads too big to fit are refused, with one clear line, before any
array is allocated; the estimate covers what the code really allocates."""

import os
import resource
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest

from mlirtune import memory
from mlirtune.bench.baseline import measure_numpy
from mlirtune.cli import main
from mlirtune.engine import MlirJitEngine
from mlirtune.interfaces.bench import BenchOptions
from mlirtune.interfaces.errors import UsageError
from mlirtune.memory import (
    BUDGET_VARIABLE,
    WORKER_OVERHEAD_BYTES,
    estimate,
    parse_budget,
    set_memory_budget,
)
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.tune.evaluator import EvaluatorSettings
from mlirtune.tune.problem import generate
from mlirtune.workloads import WORKLOADS, Matmul, Softmax

# Python objects (ctypes descriptors, results, numpy bookkeeping) that tracemalloc sees
# besides the arrays; the estimate counts arrays, which these sizes make the bulk. How much
# depends on what ran before in the process (a full run once saw 326 KiB).
PYTHON_SLACK = 512 << 10
QUICK = BenchOptions(warmup_s=0.0, min_samples=2, max_samples=2, max_time_s=0.0)


@pytest.fixture(autouse=True)
def _default_budget(monkeypatch):
    """Each test starts from the default budget: no variable, no API override."""
    monkeypatch.delenv(BUDGET_VARIABLE, raising=False)
    set_memory_budget(None)
    yield
    set_memory_budget(None)


def cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def refusal(err: str) -> str:
    """The one error line, checked to be a memory refusal."""
    lines = [line for line in err.splitlines() if line.startswith("mlirtune: error:")]
    assert len(lines) == 1, err
    assert "[memory]" in lines[0]
    return lines[0]


@pytest.mark.parametrize(
    "argv",
    [
        ("run", "matmul"),
        ("bench", "matmul", "--baseline", "numpy"),
        ("tune", "matmul", "--budget", "2"),
    ],
)
def test_cli_refuses_over_budget(capsys, monkeypatch, tmp_path, argv):
    monkeypatch.setenv(BUDGET_VARIABLE, "1M")
    monkeypatch.setenv("MLIRTUNE_DB", str(tmp_path / "tuning.db"))
    code, _, err = cli(capsys, *argv)
    line = refusal(err)
    assert code == 2
    # The 256^3 matmul: 512 KiB of inputs, 768 KiB of buffers, 512 KiB float64 reference.
    assert "inputs 512.0 KiB" in line and "reference outputs 512.0 KiB" in line
    assert "memory budget of 1.0 MiB" in line and f"{BUDGET_VARIABLE}=1M" in line
    assert "to change it, set MLIRTUNE_MEMORY_BUDGET" in line
    assert not (tmp_path / "tuning.db").exists()  # a refused tune opened nothing


@pytest.mark.jit
def test_refused_before_anything_is_allocated(monkeypatch):
    monkeypatch.setenv(BUDGET_VARIABLE, "100K")
    engine = MlirJitEngine(use_specs=False)
    workload = Matmul()
    for attempt in (
        lambda: engine.execute(workload),
        lambda: engine.benchmark(workload),
        lambda: measure_numpy(workload),
        lambda: generate(workload, HostCPU()),
    ):
        with pytest.raises(UsageError, match=r"\[memory\]"):
            attempt()
    assert "inputs" not in vars(workload) and "reference_outputs" not in vars(workload)
    assert engine._cache == {}  # not even compiled


@pytest.mark.jit
def test_numpy_baseline_has_its_own_estimate(monkeypatch):
    workload = Matmul(M=512, N=512, K=512)
    need = estimate(workload, baseline=True).total
    assert need < estimate(workload).total
    set_memory_budget(need - 1)
    with pytest.raises(UsageError, match="numpy baseline of matmul"):
        measure_numpy(workload)
    assert "inputs" not in vars(workload)


@pytest.mark.jit
def test_364_tib_benchmark_is_refused(capsys):
    code, _, err = cli(capsys, "bench", "matmul", "M=10000000", "N=10000000", "K=8")
    line = refusal(err)
    assert code == 2
    assert "runtime buffers 363.8 TiB" in line and "0.5 x" in line  # the default budget


@pytest.mark.jit
def test_sizes_beyond_int64_are_refused_cleanly(capsys):
    code, _, err = cli(capsys, "run", "matmul", f"M={2**64}")
    assert code == 2 and "int64" in refusal(err)


@pytest.mark.subprocess
def test_opt_is_not_refused_but_needs_representable_shapes(tmp_path):
    env = {**os.environ, BUDGET_VARIABLE: "1"}
    command = [sys.executable, "-m", "mlirtune", "opt", "matmul", "N=4", "K=4"]
    # A byte count MLIR cannot represent made it abort on an assertion (SIGABRT).
    overflow = subprocess.run([*command, f"M={2**62}"], env=env, capture_output=True, text=True)
    assert overflow.returncode == 2, overflow.stderr
    assert overflow.stderr.startswith("mlirtune: error: [memory] @payload: argument A")
    huge = subprocess.run([*command, "M=10000000"], env=env, capture_output=True, text=True)
    assert huge.returncode == 0, huge.stderr
    assert "after lowering" in huge.stdout


@pytest.mark.jit
@pytest.mark.parametrize("text", ["abc", "12Q", "-5", "0", "0K", "1.5", "0.0", "1e9", "5 GB x"])
def test_malformed_budget_is_a_clear_error(capsys, monkeypatch, text):
    monkeypatch.setenv(BUDGET_VARIABLE, text)
    code, _, err = cli(capsys, "run", "matmul", "M=8", "N=8", "K=8")
    assert code == 2
    assert err.startswith(f"mlirtune: error: [memory] {BUDGET_VARIABLE}={text!r}")
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1048576", 1 << 20),
        ("1M", 1 << 20),
        ("512k", 512 << 10),
        ("16G", 16 << 30),
        ("16GiB", 16 << 30),
        ("1.5G", 3 << 29),
        (" 2T ", 2 << 40),
        ("0.5", 0.5),
        ("1.0", 1.0),
        (".25", 0.25),
    ],
)
def test_budget_syntax(text, value):
    parsed = parse_budget(text)
    assert parsed == value and type(parsed) is type(value)


def test_budget_sources_and_precedence(monkeypatch):
    available, _ = memory.available_memory()
    assert available > 0
    default = memory.memory_budget()
    assert 0 < default.bytes <= available and "default" in default.origin
    monkeypatch.setenv(BUDGET_VARIABLE, "3M")
    assert memory.memory_budget().bytes == 3 << 20
    monkeypatch.setenv(BUDGET_VARIABLE, "1.0")
    assert memory.memory_budget().bytes > default.bytes
    set_memory_budget(5000)  # the API wins over the variable
    assert memory.memory_budget().bytes == 5000
    set_memory_budget("2K")
    assert memory.memory_budget().bytes == 2048
    for bad in (0, -1, 1.5, True, "x"):
        with pytest.raises(UsageError):
            set_memory_budget(bad)


@pytest.mark.jit
def test_under_budget_still_runs(capsys, monkeypatch):
    monkeypatch.setenv(BUDGET_VARIABLE, "64M")
    code, out, _ = cli(capsys, "run", "matmul", "M=64", "N=48", "K=32")
    assert code == 0 and "verification passed" in out
    set_memory_budget(estimate(Softmax(M=64, N=96)).total)  # exactly enough
    assert MlirJitEngine(use_specs=False).execute(Softmax(M=64, N=96)).verification.ok


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_estimate_covers_the_arguments(name):
    workload = WORKLOADS[name]()
    args = workload.arguments()
    need = estimate(workload)
    parts = dict(need.parts)
    assert parts["inputs"] == sum(a.nbytes for a in args if not a.is_output)
    assert parts["runtime buffers"] >= sum(a.nbytes for a in args)
    assert need.total >= sum(a.nbytes for a in args) + parts["inputs"]
    outputs = sum(a.elements for a in args if a.is_output)
    assert parts["reference outputs"] == 8 * outputs


def test_huge_estimate_is_exact_without_allocating():
    workload = Matmul(M=10_000_000, N=10_000_000, K=8)
    parts = dict(estimate(workload).parts)
    assert parts["runtime buffers"] == 4 * (2 * 80_000_000 + 10**14) + 3 * 64
    assert "inputs" not in vars(workload)


def test_kernel_temporaries_are_read_from_the_payload():
    # Softmax's payload has an [M, N] intermediate and an [M] one used twice.
    assert Softmax(M=64, N=96).kernel_scratch_bytes == 4 * (64 * 96 + 2 * 64)
    assert Matmul().kernel_scratch_bytes == 0


def traced_peak(action) -> int:
    tracemalloc.start()
    start = tracemalloc.get_traced_memory()[0]
    try:
        action()
        return tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()


ENGINE_CASES = [
    ("matmul", {"M": 256, "N": 384, "K": 128}),
    ("matmul", {"M": 256, "N": 384, "K": 128, "dtype": "bf16", "bias": True, "relu": True}),
    ("mlp", {"M": 128, "N": 256, "K": 1024, "dtype": "f64"}),
    ("softmax", {"M": 256, "N": 512}),
    ("elementwise", {"M": 256, "N": 512, "ops": "add,mul,relu"}),
    ("conv2d", {"N": 2, "H": 40, "W": 40, "C": 32, "F": 64, "stride": 2}),
    ("softmax", {"M": 256, "N": 512, "log": True}),
    ("elementwise", {"M": 256, "N": 512, "ops": "scale_rows,silu"}),
    ("norm", {"M": 256, "N": 512, "kind": "layer", "affine": True}),
    ("reduce", {"shape": "8,64,96", "axis": 1, "op": "mean"}),
    ("reduce", {"shape": "8,64,96", "axis": 1, "op": "argmax"}),
    ("pool", {"kind": "avg", "N": 2, "C": 8, "spatial": "40,40", "kernel": 3, "padding": 1}),
    ("loss", {"M": 256, "N": 512, "kind": "kl_div"}),
]


@pytest.mark.jit
@pytest.mark.parametrize(("name", "options"), ENGINE_CASES)
def test_estimate_bounds_what_a_run_allocates(name, options):
    """numpy reports its allocations to tracemalloc: a verified run's peak stays within the
    estimate (compiled first, so only the run is traced)."""
    engine = MlirJitEngine(use_specs=False)
    engine.compile(WORKLOADS[name](**options))
    for _ in range(2):  # the first run also allocates one-time Python state
        workload = WORKLOADS[name](**options)
        workload.kernel_scratch_bytes  # noqa: B018 - IR objects, not arrays
        peak = traced_peak(lambda w=workload: engine.execute(w))
    args = workload.arguments()
    # tracemalloc sees the arrays: at least the cached inputs and the runtime's buffers.
    assert peak >= sum(a.nbytes for a in args) + sum(a.nbytes for a in args if not a.is_output)
    assert peak <= estimate(workload).total + PYTHON_SLACK


@pytest.mark.jit
@pytest.mark.parametrize(
    ("name", "options"),
    [
        *ENGINE_CASES,
        ("batch_matmul", {"B": 8, "M": 128, "N": 96, "K": 64}),
        ("conv2d", {"N": 1, "H": 40, "W": 40, "C": 32, "F": 64, "dilation": 2}),
    ],
)
def test_estimate_bounds_baseline_and_reference(name, options):
    """The numpy baseline's peak, and the reference computation's, stay within the
    estimate."""
    for _ in range(2):
        workload = WORKLOADS[name](**options)
        baseline = traced_peak(lambda w=workload: measure_numpy(w, QUICK))
    assert baseline <= estimate(workload, baseline=True).total + PYTHON_SLACK
    workload = WORKLOADS[name](**options)
    workload.inputs  # noqa: B018
    reference = traced_peak(lambda: workload.reference_outputs)
    outputs = sum(8 * a.elements for a in workload.arguments() if a.is_output)
    assert reference > outputs
    assert reference <= outputs + workload.reference_scratch_bytes() + PYTHON_SLACK


@pytest.mark.jit
def test_outputs_start_as_nan_without_a_temporary():
    workload = Matmul(M=512, N=512, K=8)
    engine = MlirJitEngine(use_specs=False)
    workload.inputs  # noqa: B018

    def allocate():
        with workload.allocate(engine) as buffers:
            assert np.isnan(buffers[-1].host).all() and buffers[-1].host.flags.writeable

    output = 4 * 512 * 512
    allocate()
    # The buffers alone; filling C from a full NaN array would add another 1 MiB.
    assert traced_peak(allocate) < sum(a.nbytes for a in workload.arguments()) + output // 2


def test_tuning_counts_every_worker_and_their_cap():
    workload = Matmul(M=512, N=512, K=512)
    need = estimate(workload).total
    set_memory_budget(2 * need)
    generate(workload, HostCPU(), settings=EvaluatorSettings(workers=2))
    set_memory_budget(2 * need - 1)
    with pytest.raises(UsageError, match=r"tuning of matmul .* needs 2 processes x"):
        generate(workload, HostCPU(), settings=EvaluatorSettings(workers=2))
    set_memory_budget(2 * need)
    # Workers beyond the cores (at least two) would only share them, each with its arrays.
    too_many = max(2, len(os.sched_getaffinity(0))) + 1
    with pytest.raises(UsageError, match=f"--workers {too_many}: give 1 to {too_many - 1}"):
        generate(workload, HostCPU(), settings=EvaluatorSettings(workers=too_many))
    small_cap = EvaluatorSettings(workers=2, memory_bytes=WORKER_OVERHEAD_BYTES + need - 1)
    with pytest.raises(UsageError, match="a tuning worker may use"):
        generate(workload, HostCPU(), settings=small_cap)
    # Nothing runs when only the space is wanted, so nothing is refused.
    set_memory_budget(1)
    assert generate(workload, HostCPU(), memory_check=False).space.count() > 0


def _address_space_capped(limit: int):
    """A preexec_fn: the child runs under `ulimit -v` of `limit` bytes."""
    return lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


@pytest.mark.subprocess
def test_the_budget_keeps_within_the_address_space_limit():
    """Under `ulimit -v` a run is refused for what the limit leaves, before it allocates,
    where a half of the available memory would admit it (and it died of MemoryError)."""
    command = [sys.executable, "-m", "mlirtune", "run", "elementwise", "M=8000", "N=8000"]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=_address_space_capped(3 << 30),
    )
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert "what this process's address-space limit (ulimit -v) leaves" in line
    assert "raise the limit, or choose smaller sizes" in line


@pytest.mark.jit
@pytest.mark.subprocess
def test_a_tune_runs_under_an_address_space_limit_below_the_workers_cap(tmp_path):
    """Workers cap their address space at 8 GiB, or lower where they inherit a lower limit:
    raising it is not allowed (every worker failed under `ulimit -v 6G`)."""
    command = [sys.executable, "-m", "mlirtune", "tune", "matmul", "M=32", "N=32", "K=32"]
    command += ["--budget", "2", "--db", str(tmp_path / "t.db")]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=600,
        preexec_fn=_address_space_capped(6 << 30),
    )
    assert done.returncode == 0, done.stderr
    assert "not allowed to raise" not in done.stdout + done.stderr
