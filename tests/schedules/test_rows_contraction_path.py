"""The contraction family's row-dot path (UNIT=3) for products of one column (N == 1): which
shapes the selector sends there (not matrix-vector products of one row, 1 x N x K), that its
configs meet the constraints and bad ones are named, and results against the float64
reference on odd, single-row, batched and epilogue shapes. Nothing is timed."""

from __future__ import annotations

import os

import numpy as np
import pytest
from mlir import ir

from mlirtune.api import engine_for
from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.op import OpInfo
from mlirtune.ir.context import new_context
from mlirtune.schedules.contraction import CONTRACTION
from mlirtune.schedules.contraction.knob_values import UNIT_FMA
from mlirtune.schedules.contraction.rows import UNIT_ROWS
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.workloads import BatchMatmul, Matmul
from tests.targets.test_targets_host import AVX512

F32 = ("f32", "f32", "f32")
TARGETS = {"avx512": HostCPU(AVX512), "avx2": HostCPU(AVX512, isa="avx2")}


def matmul_op(m: int, n: int, k: int, **attributes: int) -> OpInfo:
    return OpInfo("matmul", {"M": m, "N": n, "K": k}, F32, attributes=attributes)


def searched(config: dict[str, int]) -> dict[str, int]:
    """A selector config with the knobs the selector leaves at their defaults."""
    return {**config, "KU": 1, "ORDER": 1}


@pytest.mark.parametrize("isa", sorted(TARGETS))
@pytest.mark.parametrize("shape", [(256, 1, 131072), (7, 1, 1001), (1, 1, 1001), (3, 1, 5)])
def test_one_column_takes_the_row_dot_path(isa, shape):
    op, target = matmul_op(*shape), TARGETS[isa]
    config = CONTRACTION.select(op, target)
    assert config["UNIT"] == UNIT_ROWS and config["NR"] == config["NC"] == 1
    assert config["MR"] == min(shape[0], 4)
    assert CONTRACTION.violations(op, target, searched(config)) == []


@pytest.mark.parametrize(
    "op",
    [
        matmul_op(1, 11008, 4096),  # a matrix-vector product of one row keeps the FMA path
        matmul_op(1, 4096, 11008),
        matmul_op(256, 2, 1024),
        matmul_op(64, 1, 512, transpose_a=1),  # A's rows are not contiguous along K
    ],
    ids=["1x11008x4096", "1x4096x11008", "two-columns", "transposed-a"],
)
def test_other_shapes_keep_their_paths(op):
    config = CONTRACTION.select(op, TARGETS["avx512"])
    assert config["UNIT"] == UNIT_FMA


def test_the_constraints_name_what_the_path_cannot_take():
    target = TARGETS["avx512"]
    one = matmul_op(64, 1, 512)
    config = searched(CONTRACTION.select(one, target))
    assert "rows_whole_vectors" in CONTRACTION.violations(one, target, {**config, "KC": 24})
    assert "rows_repeats_nothing" in CONTRACTION.violations(one, target, {**config, "KU": 2})
    transposed = matmul_op(64, 1, 512, transpose_a=1)
    assert "rows_needs_rows_of_a" in CONTRACTION.violations(transposed, target, config)
    two = matmul_op(64, 2, 512)
    two_config = searched({**CONTRACTION.select(two, target), "UNIT": UNIT_ROWS})
    assert "rows_needs_one_column" in CONTRACTION.violations(two, target, two_config)


@pytest.mark.parametrize(
    ("op", "reason"),
    [
        (matmul_op(64, 2, 512), "rows_needs_one_column"),
        (matmul_op(64, 1, 512, transpose_a=1), "rows_needs_rows_of_a"),
    ],
)
def test_building_the_path_for_a_shape_it_cannot_take_names_why(op, reason):
    parameters = CONTRACTION.parameters(op, {"UNIT": UNIT_ROWS})
    with new_context(), ir.Location.unknown(), pytest.raises(UsageError, match=reason):
        CONTRACTION.build(op, parameters)


def test_the_cost_model_prefers_the_row_dot_path_for_one_column():
    op, target = matmul_op(256, 1, 131072), TARGETS["avx512"]
    rows = searched(CONTRACTION.select(op, target))
    fma = {**rows, "UNIT": UNIT_FMA, "MR": 16, "KC": 128}
    assert CONTRACTION.cost(op, target, rows) < CONTRACTION.cost(op, target, fma)


@pytest.mark.jit
@pytest.mark.parametrize(
    "workload",
    [
        Matmul(M=7, N=1, K=1001),  # partial row tile and a K tail
        Matmul(M=1, N=1, K=1001),  # a dot product
        Matmul(M=16, N=1, K=64),  # whole tiles
        Matmul(M=9, N=1, K=100, bias=True, relu=True),
        Matmul(M=9, N=1, K=100, transpose="b", mask="lower"),
        Matmul(M=5, N=1, K=40, dtype="bf16"),
        Matmul(M=6, N=1, K=33, dtype="f64"),
        BatchMatmul(B=2, M=7, N=1, K=101),
    ],
    ids=["odd", "dot", "whole", "bias-relu", "transposed-b-mask", "bf16", "f64", "batch"],
)
def test_row_dot_kernels_match_the_reference(engine, workload):
    assert engine.plan(workload).values["UNIT"] == UNIT_ROWS
    result = engine.execute(workload)
    assert result.verification.ok, result.verification.summary()


@pytest.mark.jit
@pytest.mark.parametrize(
    "parameters",
    [
        {"MR": 1, "KC": 16},
        {"MR": 3, "KC": 128, "MC": 6},  # row blocks of whole row tiles
        {"MR": 4, "KC": 32, "MC": 5},  # MC gives no whole blocks: one block
    ],
)
def test_row_dot_parameters(engine, parameters):
    workload = Matmul(M=12, N=1, K=203)
    result = engine.execute(workload, {**parameters, "UNIT": UNIT_ROWS})
    assert result.verification.ok, result.verification.summary()


@pytest.mark.jit
def test_the_row_dot_schedule_leaves_no_scalar_loops(engine):
    seen: list[str] = []

    def observer(stage: str, module: ir.Module) -> None:
        if stage == "schedule contraction":
            module.operation.walk(lambda op: seen.append(op.name) or ir.WalkResult.ADVANCE)

    engine.lower_payload(Matmul(M=7, N=1, K=1001, bias=True), observer=observer)
    assert seen and not [name for name in seen if name.startswith("linalg.")]
    assert "vector.reduction" in seen


@pytest.mark.jit
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs 2 cores")
def test_threads_split_the_rows_into_blocks():
    workload = Matmul(M=64, N=1, K=300)
    outputs = []
    for threads in (1, 2):
        engine = engine_for(HostCPU(threads=threads), use_specs=False)
        plan = engine.plan(workload)
        assert plan.values["UNIT"] == UNIT_ROWS
        assert (plan.values["MC"] < 64) == (threads == 2)
        assert engine.execute(workload).verification.ok
        kernel = engine.compile(workload)
        with workload.allocate(engine) as buffers:
            kernel.call(buffers)
            outputs.append(engine.runtime.to_host(buffers[-1]).copy())
    np.testing.assert_array_equal(*outputs)  # the same sums in the same order per row
