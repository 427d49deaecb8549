"""Every built-in workload selects, lowers and (where this machine can run the class's code)
verifies for every CPU class, on one thread and two, whatever CPU runs the tests: a config
that cannot lower on an AVX2 host fails here on an AVX-512 one too, and the other way round.
"""

from __future__ import annotations

import pytest

from mlirtune.engine import MlirJitEngine
from mlirtune.workloads import workload_class
from tests.cpu_classes import CLASSES, cpu

pytestmark = pytest.mark.jit

# (workload, options): odd shapes with tails, narrow types, every family's roots.
CASES = [
    ("matmul", {"M": "1000", "N": "1000", "K": "1000"}),
    ("matmul", {"M": "300", "N": "256", "K": "1024"}),  # AVX2: N outer, A packed
    ("matmul", {"M": "1", "N": "1024", "K": "512"}),
    ("matmul", {"M": "96", "N": "200", "K": "130", "dtype": "bf16"}),
    ("matmul", {"M": "64", "N": "96", "K": "128", "dtype": "i8"}),
    ("matmul", {"M": "130", "N": "97", "K": "64", "transpose": "b"}),
    ("mlp", {"M": "1000", "N": "1000", "K": "1000"}),
    ("mlp", {"M": "32", "N": "512", "K": "512"}),
    ("batch_matmul", {"B": "3", "M": "50", "N": "70", "K": "40"}),
    ("conv2d", {"H": "30", "W": "30", "C": "16", "F": "32"}),
    ("conv2d", {"H": "17", "W": "17", "C": "8", "F": "24", "layout": "nchw", "stride": "2"}),
    ("depthwise", {"H": "20", "W": "20"}),
    ("conv_transpose", {"H": "9", "W": "9", "stride": "2"}),
    ("softmax", {"M": "64", "N": "1000"}),
    ("norm", {"M": "64", "N": "1000", "affine": "True"}),
    ("channel_norm", {"shape": "2,32,9,9", "kind": "group"}),
    ("pool", {}),
    ("elementwise", {"M": "64", "N": "1000", "ops": "add,gelu"}),
    ("reduce", {}),
    ("loss", {"M": "16", "N": "1000"}),
]
THREADED = {"matmul", "mlp", "conv2d", "batch_matmul"}


def _cases():
    for name, options in CASES:
        label = "-".join([name, *(f"{k}{v}" for k, v in options.items())])
        for threads in (1, 2) if name in THREADED else (1,):
            yield pytest.param(name, options, threads, id=f"{label}-t{threads}")


@pytest.mark.parametrize("cpu_class", sorted(CLASSES))
@pytest.mark.parametrize(("name", "options", "threads"), list(_cases()))
def test_selects_lowers_and_verifies(cpu_class, name, options, threads):
    target = cpu(cpu_class, threads)
    workload = workload_class(name).from_strings(options)
    engine = MlirJitEngine(target=target, use_specs=False)
    plan = engine.plan(workload)
    assert plan.values, plan
    engine.lower_payload(workload)
    if target.runs_here():
        result = engine.execute(workload)
        assert result.verification.ok, result.verification.summary()
