"""The contraction family's bf16 pair paths: which targets take AVX512-BF16 dot products
(UNIT=1) or AMX tiles (UNIT=2), what they lower to, and the dot path's numerics against an
f32 reference. The AMX path's own tests are in test_amx_contraction_path.py."""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest

from mlirtune.api import engine_for
from mlirtune.interfaces.op import OpInfo
from mlirtune.ir.inspect import intrinsics_called, uses_amx_tiles
from mlirtune.schedules.contraction.knob_values import UNIT_AMX, UNIT_DOT, UNIT_FMA
from mlirtune.schedules.registry import FAMILIES
from mlirtune.targets import host_cpu
from mlirtune.targets.host_cpu import CpuFeatures, HostCPU, detect_features
from mlirtune.workloads import Matmul, Mlp
from tests.targets.test_targets_host import AVX512

CONTRACTION = FAMILIES["contraction"]
# The AVX-512 test host of the selector tests, without bf16 dot products or AMX.
BASE = AVX512
BF16_DOT = BASE.flags | {"avx512_bf16"}
AMX = BF16_DOT | {"amx_bf16", "amx_tile"}
# Feature sets a host may have, and the micro-kernel instructions a bf16 matmul gets there.
PATHS = {
    "avx512": (BASE, UNIT_FMA),
    "avx512_bf16": (dataclasses.replace(BASE, flags=BF16_DOT), UNIT_DOT),
    # AMX hosts also have AVX512-BF16; tiles are taken where the OS grants them.
    "amx": (dataclasses.replace(BASE, flags=AMX), UNIT_AMX),
    # A target lowered below AVX-512 has no 512-bit dot products, whatever the flags say.
    "avx2_bf16_flag": (dataclasses.replace(BASE, isa="avx2", flags=BF16_DOT), UNIT_FMA),
}
DOT_INTRINSIC = "llvm.x86.avx512bf16.dpbf16ps.512"
TILE_PRODUCT = "llvm.x86.tdpbf16ps.internal"
HOST_HAS_BF16_DOT = "avx512_bf16" in detect_features().flags
needs_bf16_dot = pytest.mark.skipif(
    not HOST_HAS_BF16_DOT, reason="this host lacks avx512_bf16 (AVX512-BF16 dot products)"
)


def matmul_op(m: int, n: int, k: int, dtype: str = "bf16", kind: str = "matmul") -> OpInfo:
    dims = {"M": m, "N": n, "K": k} | ({"B": 2} if kind == "batch_matmul" else {})
    return OpInfo(kind, dims, (dtype, dtype, "f32" if dtype == "bf16" else dtype))


@pytest.mark.parametrize("feature_set", PATHS)
def test_the_target_features_choose_the_path(feature_set, monkeypatch):
    monkeypatch.setattr(host_cpu, "amx_refusal", lambda: None)  # as an AMX host's OS would
    features, unit = PATHS[feature_set]
    target = HostCPU(features)
    op = matmul_op(512, 512, 512)
    config = CONTRACTION.select(op, target)
    assert config["UNIT"] == unit
    assert not CONTRACTION.violations(op, target, {**config, "KU": 1, "ORDER": 1})
    if unit == UNIT_DOT:  # whole blocks, K in pairs, 16-column vectors
        m, n, k = 512, 512, 512
        assert m % config["MC"] == n % config["NC"] == k % config["KC"] == 0
        assert config["KC"] % 2 == 0 and config["NR"] % 16 == 0 and config["PACK"] == 0


@pytest.mark.parametrize(
    "op",
    [
        matmul_op(512, 512, 512, dtype="f32"),  # nothing to pair
        matmul_op(64, 64, 33),  # odd K
        matmul_op(64, 40, 64),  # 40 columns are no whole 16-column vectors
        matmul_op(64, 64, 64, kind="batch_matmul"),
    ],
    ids=["f32", "odd-k", "narrow-n", "batch"],
)
def test_shapes_the_dot_path_cannot_take_keep_fma(op):
    target = HostCPU(PATHS["avx512_bf16"][0])
    assert CONTRACTION.select(op, target)["UNIT"] == UNIT_FMA


def test_constraints_reject_dot_products_the_target_lacks():
    op = matmul_op(256, 256, 256)
    config = CONTRACTION.select(op, HostCPU(PATHS["avx512_bf16"][0]))
    config = {**config, "KU": 1, "ORDER": 1}
    assert "dot_needs_dot_products" in CONTRACTION.violations(op, HostCPU(BASE), config)
    broken = CONTRACTION.violations(
        op, HostCPU(PATHS["avx512_bf16"][0]), {**config, "NR": 8, "KC": 255}
    )
    assert {"dot_needs_whole_vectors", "dot_needs_k_pairs"} <= set(broken)


def intrinsics(features: CpuFeatures, parameters: dict[str, int] | None = None) -> set[str]:
    """The LLVM intrinsics a bf16 matmul lowers to for a target with `features`: an IR-level
    check that runs on every host, since lowering executes nothing."""
    engine = engine_for(HostCPU(features), use_specs=False)
    module = engine.lower_payload(Matmul(M=64, N=64, K=64, dtype="bf16"), parameters)
    found = intrinsics_called(module)
    assert uses_amx_tiles(module) == (TILE_PRODUCT in found)
    return found


@pytest.mark.jit
def test_the_dot_path_lowers_to_avx512_bf16_dot_products_on_any_host():
    assert DOT_INTRINSIC in intrinsics(PATHS["avx512_bf16"][0])
    assert DOT_INTRINSIC not in intrinsics(BASE)


def outputs(workload, parameters, threads: int = 1) -> tuple[np.ndarray, bool]:
    engine = engine_for(HostCPU(threads=threads), use_specs=False)
    result = engine.execute(workload, parameters)
    kernel = engine.compile(workload, parameters)
    with workload.allocate(engine) as buffers:
        kernel.call(buffers)
        return engine.runtime.to_host(buffers[-1]).copy(), result.verification.ok


def assert_threads_agree(workload, parameters) -> None:
    """Two threads verify and give exactly the one-thread output."""
    one, _ = outputs(workload, parameters, threads=1)
    two, verified = outputs(workload, parameters, threads=2)
    assert verified and np.array_equal(one, two)


def verified_outputs(workload, blocks, unit: int) -> tuple[np.ndarray, np.ndarray]:
    """The kernel's output with blocks (MC, NC, KC, MR, NR) on the path `unit`, which its
    own verification passed, and the float64 reference."""
    parameters = {**dict(zip(("MC", "NC", "KC", "MR", "NR"), blocks, strict=True)), "UNIT": unit}
    result, verified = outputs(workload, parameters)
    assert verified
    return result, workload.reference([x.copy() for x in workload.inputs])[0]


@pytest.mark.jit
@needs_bf16_dot
@pytest.mark.parametrize(
    ("workload", "blocks"),
    [
        (Matmul(M=64, N=128, K=96, dtype="bf16"), (32, 64, 32, 8, 32)),
        (Matmul(M=7, N=48, K=34, dtype="bf16"), (7, 48, 34, 7, 16)),  # odd M, K not 2^n
        (Mlp(M=24, N=96, K=64, dtype="bf16"), (24, 32, 64, 6, 32)),  # bias and ReLU fused
    ],
    ids=["blocks", "odd-rows", "mlp"],
)
def test_dot_kernels_match_the_f32_reference(workload, blocks):
    result, expected = verified_outputs(workload, blocks, UNIT_DOT)
    # bf16 inputs, f32 products and sums: within f32 rounding of the float64 reference.
    np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-4)


@pytest.mark.jit
@needs_bf16_dot
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs 2 cores")
def test_threads_give_the_dot_path_the_same_results():
    workload = Matmul(M=64, N=128, K=64, dtype="bf16")
    parameters = {"MC": 32, "NC": 64, "KC": 64, "MR": 8, "NR": 32, "UNIT": UNIT_DOT}
    assert_threads_agree(workload, parameters)
