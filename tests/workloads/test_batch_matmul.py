"""batch_matmul: JIT results match numpy, wrong references are caught, options are checked."""

from __future__ import annotations

import numpy as np
import pytest

from mlirtune.interfaces.errors import UsageError
from mlirtune.workloads.batch_matmul import BatchMatmul
from tests.payloads import build_schedule


@pytest.mark.jit
@pytest.mark.parametrize(
    "options",
    [
        {"B": 2, "M": 16, "N": 32, "K": 8},  # tiles divide every dim: fully vectorized
        {"B": 3, "M": 20, "N": 40, "K": 9},  # partial register tiles in M and N
        {"B": 1, "M": 5, "N": 3, "K": 300},  # K larger than the K cache tile
        {"B": 2, "M": 16, "N": 32, "K": 8, "dtype": "f64"},
        {"B": 3, "M": 7, "N": 33, "K": 5, "dtype": "f64", "seed": 4},
    ],
)
def test_matches_reference(engine, options):
    result = engine.execute(BatchMatmul(**options))
    assert result.verification.ok, result.verification.summary()


@pytest.mark.jit
def test_schedule_parameters(engine):
    w = BatchMatmul(B=2, M=24, N=48, K=16)
    params = {"MC": 16, "NC": 32, "KC": 8, "MR": 4, "NR": 16}
    result = engine.execute(w, params)
    assert result.verification.ok, result.verification.summary()
    defaults = {"KU": 1, "ORDER": 1, "PACK": 0, "PREFETCH": 0, "UNIT": 0}
    target = engine.target.pipeline_values()  # THREADS, ISA, VECTOR_BITS
    assert result.parameters == {**params, **defaults, **target}


@pytest.mark.jit
def test_wrong_reference_is_detected(engine):
    w = BatchMatmul(B=2, M=8, N=16, K=4)
    wrong = w.reference_outputs[0].copy()
    wrong[1, 3, 5] += 1.0
    w.__dict__["reference_outputs"] = [wrong]
    assert not engine.execute(w).verification.ok


def test_reference_is_per_batch_matmul():
    w = BatchMatmul(B=3, M=4, N=5, K=6, seed=1)
    a, b = w.inputs
    (c,) = w.reference_outputs
    for i in range(3):
        np.testing.assert_allclose(c[i], a[i].astype(np.float64) @ b[i].astype(np.float64))


def test_arguments_and_complexity():
    w = BatchMatmul(B=3, M=4, N=5, K=6, dtype="f64")
    assert [(a.name, a.shape, a.is_output) for a in w.arguments()] == [
        ("A", (3, 4, 6), False),
        ("B", (3, 6, 5), False),
        ("C", (3, 4, 5), True),
    ]
    complexity = w.get_complexity()
    assert complexity.flops == 2 * 3 * 4 * 5 * 6
    assert complexity.bytes_read == (3 * 4 * 6 + 3 * 6 * 5) * 8
    assert complexity.bytes_written == 3 * 4 * 5 * 8
    assert w.accumulation_length() == 6


@pytest.mark.parametrize(
    "options",
    [
        {"B": 0},
        {"M": -1},
        {"K": 2.5},
        {"dtype": "bf16"},
        {"dtype": "i32"},
        {"batch": 2},
    ],
)
def test_bad_options(options):
    with pytest.raises(UsageError):
        BatchMatmul(**options)


def test_bad_strings_and_schedule_parameters():
    with pytest.raises(UsageError, match="B"):
        BatchMatmul.from_strings({"B": "two"})
    with pytest.raises(UsageError, match="XX"):
        build_schedule(BatchMatmul(B=1, M=8, N=8, K=8), {"XX": 4})
