"""Schedules keep the code they hand to LLVM compact: loops LLVM would unroll into blocks of
a thousand stores are marked `llvm.loop.unroll.disable`, and no copy goes through one vector
the size of a cache block. Either made a compile take most of a second (LLVM's instruction
schedulers are quadratic in a block's length; MLIR unrolls a large vector transfer into one
transfer per row), which the tuner pays per candidate. Checked at the IR level, on every
host."""

from __future__ import annotations

import math

import pytest
from mlir import ir

from mlirtune.api import engine_for
from mlirtune.ir.inspect import largest_vector
from mlirtune.schedules.builder import LOOP_ANNOTATION, NO_UNROLL
from mlirtune.schedules.contraction.knob_values import PACK_B, PACK_NONE, UNIT_DOT, UNIT_FMA
from mlirtune.schedules.contraction.steps.widen import WIDENING_ROW
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.workloads import Conv2d, Matmul, Mlp
from tests.schedules.test_int8_contraction_path import AVX2
from tests.schedules.test_packed_contraction_path import scheduled


def rolled_back_edges(module: ir.Module) -> int:
    """How many branches of a lowered module carry the annotation that disables LLVM's
    unroller (the back edges of the loops a schedule kept rolled)."""
    no_unroll = ir.Attribute.parse(NO_UNROLL, module.context)
    count = 0

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal count
        if op.name == "llvm.br" and LOOP_ANNOTATION in op.attributes:
            count += op.attributes[LOOP_ANNOTATION] == no_unroll
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return count


def extended_values(op: ir.Operation) -> int | None:
    """How many values an extension (arith.extsi of a vector: narrow values widened)
    takes, or None for other ops: what one step of a widening copy moves."""
    if op.name == "arith.extsi" and isinstance(op.results[0].type, ir.VectorType):
        return math.prod(ir.VectorType(op.results[0].type).shape)
    return None


UNPACKED = {"MC": 64, "NC": 64, "KC": 128, "MR": 4, "NR": 16, "PACK": PACK_NONE, "UNIT": UNIT_FMA}
PACKED = {"MC": 64, "NC": 64, "KC": 64, "MR": 4, "NR": 16, "PACK": PACK_B, "UNIT": UNIT_FMA}


@pytest.mark.parametrize(
    ("workload", "parameters"),
    [
        (Matmul(M=128, N=128, K=128), UNPACKED),  # the fill's register tiles
        (Mlp(M=128, N=128, K=128), UNPACKED),  # the fill's and the epilogue's
        (Matmul(M=128, N=128, K=256), PACKED),  # B's packing copies
    ],
    ids=["unpacked-fill", "unpacked-epilogue", "packed-copies"],
)
def test_fill_and_copy_loops_reach_llvm_marked_rolled(workload, parameters):
    engine = engine_for(HostCPU(AVX2), use_specs=False)
    assert rolled_back_edges(engine.lower_payload(workload, parameters)) >= 2


@pytest.mark.jit
@pytest.mark.parametrize("parameters", [UNPACKED, PACKED], ids=["unpacked", "packed"])
def test_matmuls_with_rolled_loops_verify(parameters):
    workload = Mlp(M=100, N=96, K=200)
    assert engine_for(HostCPU(), use_specs=False).execute(workload, parameters).verification.ok


def test_int8_widening_copies_move_one_row_at_a_time():
    workload = Matmul(M=64, N=256, K=512, dtype="i8")
    parameters = {"MC": 64, "NC": 16, "KC": 512, "MR": 4, "NR": 16, "PACK": 0, "UNIT": UNIT_DOT}
    engine = engine_for(HostCPU(AVX2), use_specs=False)
    # A block of rows per step was loaded whole before its first store: spilled, and a
    # block of 900 instructions for LLVM's schedulers.
    assert max(scheduled(engine, workload, parameters, extended_values)) == WIDENING_ROW


def test_packed_filter_conv_keeps_no_block_sized_vector():
    # The channel block's write-back into the output (an insert_slice) is not vectorized: as
    # one vector<56x56x8xf32> it unrolled into 3136 row transfers (2.6 s of compile).
    workload = Conv2d(H=58, W=58, C=64, F=64)
    parameters = {"OW_TILE": 14, "F_TILE": 8, "C_TILE": 1, "OH_TILE": 1, "PACK_FILTER": 1}
    largest: list[int] = []

    def observe(stage: str, module: ir.Module) -> None:
        if stage.startswith("schedule"):
            largest.append(largest_vector(module))

    engine_for(HostCPU(AVX2), use_specs=False).lower_payload(workload, parameters, observer=observe)
    assert largest and max(largest) <= 14 * 8
