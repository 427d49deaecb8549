"""K-step unrolling in the contraction family (KU)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from mlir import ir

from mlirtune.engine import MlirJitEngine
from mlirtune.ir.inspect import op_counts
from mlirtune.pipeline.lookup import PACKAGED
from mlirtune.workloads.matmul import Matmul, Mlp

LOWER_CPU = PACKAGED / "generic" / "lower_cpu.yaml"

WORKLOADS = {"matmul": Matmul, "mlp": Mlp}


def _descriptor(tmp_path: Path, name: str, params: dict[str, int]) -> Path:
    slots = " ".join(f"{key}=${key}" for key in params)
    values = ", ".join(f"{key}: {value}" for key, value in params.items())
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        f"description: {name} test pipeline\n"
        f"params: {{{values}}}\n"
        "stages:\n"
        f"  - schedule: {name} {{{slots}}}\n"
        f"  - include: {LOWER_CPU}\n"
    )
    return path


@pytest.fixture(scope="module")
def contraction_engine(tmp_path_factory) -> MlirJitEngine:
    params = {"MC": 64, "NC": 128, "KC": 256, "MR": 8, "NR": 32, "KU": 1}
    return MlirJitEngine(pipeline=_descriptor(tmp_path_factory.mktemp("ku"), "contraction", params))


def _op_counts(engine, workload, parameters, stage: str) -> Counter:
    """Op-name counts of the payload right after the schedule stage `stage`."""
    seen: dict[str, Counter] = {}

    def observer(name: str, module: ir.Module) -> None:
        if name == stage:
            seen["counts"] = op_counts(module)

    engine.lower_payload(workload, parameters, observer=observer)
    assert "counts" in seen, f"stage {stage!r} did not run"
    return seen["counts"]


# --- KU: unrolled K step ---------------------------------------------------------------------


@pytest.mark.jit
@pytest.mark.parametrize("ku", [2, 4])
@pytest.mark.parametrize("kind", sorted(WORKLOADS))
def test_unrolled_k_step_verifies(contraction_engine, kind, ku):
    workload = WORKLOADS[kind](M=64, N=96, K=128)
    result = contraction_engine.execute(workload, {"KU": ku})
    assert result.verification.ok, result.verification.summary()


@pytest.mark.jit
@pytest.mark.parametrize("ku", [2, 4])
@pytest.mark.parametrize("kind", sorted(WORKLOADS))
def test_unrolling_multiplies_the_micro_kernel(contraction_engine, kind, ku):
    workload = WORKLOADS[kind](M=64, N=64, K=64)
    rolled = _op_counts(contraction_engine, workload, {"KU": 1}, "schedule contraction")
    unrolled = _op_counts(contraction_engine, workload, {"KU": ku}, "schedule contraction")
    assert rolled["vector.fma"] > 0
    assert unrolled["vector.fma"] == ku * rolled["vector.fma"]
    assert unrolled["scf.for"] == rolled["scf.for"]


@pytest.mark.jit
@pytest.mark.parametrize("kind", sorted(WORKLOADS))
def test_ku_1_leaves_the_schedule_unchanged(engine, contraction_engine, kind):
    """KU=1 gives the IR the packaged descriptor (which has no KU) gives."""
    workload = WORKLOADS[kind](M=64, N=64, K=64)
    tiles = {"MC": 64, "NC": 128, "KC": 256, "MR": 8, "NR": 32}
    before = _op_counts(engine, workload, tiles, "schedule contraction")
    after = _op_counts(contraction_engine, workload, {**tiles, "KU": 1}, "schedule contraction")
    assert after == before


@pytest.mark.jit
def test_ku_that_does_not_divide_kc_is_ignored(contraction_engine):
    workload = Matmul(M=16, N=32, K=24)
    rolled = _op_counts(contraction_engine, workload, {"KU": 1}, "schedule contraction")
    skipped = _op_counts(contraction_engine, workload, {"KU": 5}, "schedule contraction")
    assert skipped == rolled
    assert contraction_engine.execute(workload, {"KU": 5}).verification.ok
