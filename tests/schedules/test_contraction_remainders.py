"""Contractions whose sizes the tile sizes do not divide: the partial tiles are peeled, get
static shapes and vectorize like full tiles, and the results stay correct."""

from __future__ import annotations

import pytest
from mlir import ir

from mlirtune.interfaces.op import OpInfo
from mlirtune.ir.context import new_context
from mlirtune.schedules.contraction import CONTRACTION
from mlirtune.workloads.batch_matmul import BatchMatmul
from mlirtune.workloads.matmul import Matmul, Mlp

# Explicit tiles, so that the shapes below leave partial tiles whatever a target selects.
TILES = {"MC": 64, "NC": 128, "KC": 256, "MR": 8, "NR": 32}

SHAPES = [
    {"M": 1, "N": 3, "K": 5},  # tiny: every tile is clamped to the whole problem
    {"M": 5, "N": 20, "K": 7},  # smaller than one MR x NR register tile
    {"M": 9, "N": 33, "K": 257},  # remainders of one row, one column, one K step
    {"M": 70, "N": 45, "K": 300},  # partial cache and register tiles in M, N and K
    {"M": 129, "N": 1, "K": 3},  # a single column
]

WORKLOADS = {
    "matmul": lambda **options: Matmul(**options),
    "mlp": lambda **options: Mlp(**options),
    "batch_matmul": lambda **options: BatchMatmul(B=2, **options),
}


def _linalg_ops(module: ir.Module) -> list[str]:
    """Names of the linalg ops (structured ops and their yields) left in `module`."""
    names: list[str] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name.startswith("linalg."):
            names.append(op.name)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return names


def _after_schedule(engine, workload, parameters=None) -> list[str]:
    """The linalg ops in the payload right after the contraction schedule ran."""
    seen: dict[str, list[str]] = {}

    def observer(stage: str, module: ir.Module) -> None:
        if stage == "schedule contraction":
            seen["ops"] = _linalg_ops(module)

    engine.lower_payload(workload, parameters, observer=observer)
    assert "ops" in seen, "the contraction schedule did not run"
    return seen["ops"]


@pytest.mark.jit
@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(str(v) for v in s.values()))
@pytest.mark.parametrize("kind", sorted(WORKLOADS))
def test_partial_tiles_verify(engine, kind, shape, dtype):
    workload = WORKLOADS[kind](**shape, dtype=dtype)
    result = engine.execute(workload, TILES)
    assert result.verification.ok, result.verification.summary()


@pytest.mark.jit
@pytest.mark.parametrize("kind", sorted(WORKLOADS))
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_partial_tiles_verify_with_target_tiles(engine, kind, dtype):
    """The same, with the tile sizes the target picks."""
    workload = WORKLOADS[kind](M=67, N=75, K=131, dtype=dtype)
    result = engine.execute(workload)
    assert result.verification.ok, result.verification.summary()


@pytest.mark.jit
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(str(v) for v in s.values()))
@pytest.mark.parametrize("kind", sorted(WORKLOADS))
def test_every_tile_is_vectorized(engine, kind, shape):
    """No contraction (nor fill or epilogue) is left for scalar loops after scheduling."""
    remaining = _after_schedule(engine, WORKLOADS[kind](**shape), TILES)
    assert not {"linalg.matmul", "linalg.batch_matmul"} & set(remaining)
    assert remaining == []


@pytest.mark.jit
@pytest.mark.parametrize("tile", [(12, 32), (6, 64)], ids=["12x32", "6x64"])
@pytest.mark.parametrize("kind", sorted(WORKLOADS))
def test_wide_register_tiles_with_partial_rows_verify(engine, kind, tile):
    """The unpacked nest's 24-accumulator tiles (register_tiles.wide_register_tile), whose
    rows seldom divide M: 100 = 8 x 12 + 4 = 16 x 6 + 4, and 150 columns past 64 or 32."""
    mr, nr = tile
    parameters = {"MC": 100, "NC": 150, "KC": 128, "MR": mr, "NR": nr, "PACK": 0}
    result = engine.execute(WORKLOADS[kind](M=100, N=150, K=200), parameters)
    assert result.verification.ok, result.verification.summary()


@pytest.mark.jit
def test_large_partial_tiles_are_vectorized(engine):
    remaining = _after_schedule(engine, Mlp(M=500, N=300, K=700), TILES)
    assert remaining == []


def _peel_count(kind: str, dims: dict[str, int], parameters: dict[str, int]) -> int:
    """How many transform.loop.peel ops the schedule for `kind` with loop sizes `dims` has."""
    with new_context(), ir.Location.unknown():
        op = OpInfo(kind, dims, ("f32",) * 3)
        schedule = CONTRACTION.build(op, CONTRACTION.parameters(op, parameters))
        count = 0

        def visit(op: ir.Operation) -> ir.WalkResult:
            nonlocal count
            count += op.name == "transform.loop.peel"
            return ir.WalkResult.ADVANCE

        schedule.operation.walk(visit)
        return count


@pytest.mark.parametrize(
    "dims",
    [
        {"M": 512, "N": 512, "K": 512},
        {"M": 1024, "N": 1024, "K": 1024},
        {"M": 1, "N": 3, "K": 5},
        {"M": 64, "N": 128, "K": 256},
    ],
)
def test_dividing_shapes_are_not_peeled(dims):
    """Shapes every tile divides keep the schedule they had before remainder handling."""
    assert _peel_count("matmul", dims, TILES) == 0
    assert _peel_count("batch_matmul", {"B": 2, **dims}, TILES) == 0


def test_only_non_dividing_loops_are_peeled():
    # K divides KC; M and N leave partial cache tiles whose register tiles are partial too.
    assert _peel_count("matmul", {"M": 500, "N": 300, "K": 512}, TILES) == 6
    # Only K leaves a partial cache tile.
    assert _peel_count("matmul", {"M": 512, "N": 512, "K": 700}, TILES) == 1
    # A cache tile that the register tile does not divide, with dividing problem sizes.
    uneven = {**TILES, "MC": 60}
    assert _peel_count("matmul", {"M": 120, "N": 128, "K": 256}, uneven) == 2
