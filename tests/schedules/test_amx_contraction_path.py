"""The contraction family's AMX path (UNIT=2): which bf16 and int8 matmuls take it and with
which blocks, what it lowers to on any host, and, on a host whose CPU and OS grant AMX
tiles, its numerics (bf16 against an f32 reference, int8 exact), with one or two threads."""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest
from mlir import ir

from mlirtune.api import engine_for
from mlirtune.engine import mlir_jit
from mlirtune.interfaces.errors import MlirtuneError
from mlirtune.ir.inspect import intrinsics_called, op_counts, ops_named
from mlirtune.schedules.contraction.amx_host import AMX_B_COLUMNS
from mlirtune.schedules.contraction.knob_values import UNIT_AMX, UNIT_DOT, UNIT_FMA
from mlirtune.targets import host_cpu
from mlirtune.targets.host_cpu import HostCPU, detect_features
from mlirtune.targets.tile_state import amx_refusal
from mlirtune.workloads import Matmul, Mlp
from tests.schedules.test_dot_contraction_path import (
    AMX,
    BASE,
    CONTRACTION,
    DOT_INTRINSIC,
    TILE_PRODUCT,
    assert_threads_agree,
    intrinsics,
    matmul_op,
    verified_outputs,
)

AMX_HOST = dataclasses.replace(BASE, flags=AMX | {"amx_int8"})
INT8_PRODUCT = "llvm.x86.tdpbssd.internal"
AMX_BLOCKS = {"MC": 32, "NC": 32, "KC": 64, "MR": 16, "NR": 16, "UNIT": UNIT_AMX}


def host_amx_refusal(unit: str) -> str | None:
    """Why this host cannot run AMX tiles with the multiplier `unit` (None: it can)."""
    missing = sorted({"amx_tile", unit} - detect_features().flags)
    if missing:
        return f"this host lacks {', '.join(missing)} (AMX tiles)"
    return amx_refusal()


def needs(unit: str) -> pytest.MarkDecorator:
    refusal = host_amx_refusal(unit)
    return pytest.mark.skipif(refusal is not None, reason=str(refusal))


needs_amx, needs_amx_int8 = needs("amx_bf16"), needs("amx_int8")


@pytest.fixture
def granted(monkeypatch):
    """Tile state granted, as an AMX host's OS would."""
    monkeypatch.setattr(host_cpu, "amx_refusal", lambda: None)


@pytest.mark.parametrize(
    ("m", "n", "k", "tile", "kc"),
    [
        (512, 512, 512, (32, 32), 512),
        (2048, 2048, 2048, (32, 32), 2048),
        (48, 80, 64, (48, 16), 64),  # 80 columns: no 32-column tiles
        (16, 96, 96, (16, 48), 96),  # one row of tiles
    ],
)
def test_amx_hosts_take_tiles_over_all_of_k(granted, m, n, k, tile, kc):
    op = matmul_op(m, n, k)
    target = HostCPU(AMX_HOST)
    config = CONTRACTION.select(op, target)
    assert (config["UNIT"], config["MR"], config["NR"], config["KC"]) == (UNIT_AMX, *tile, kc)
    assert m % config["MC"] == n % config["NC"] == 0 and config["NC"] <= max(AMX_B_COLUMNS, 48)
    assert not CONTRACTION.violations(op, target, {**config, "KU": 1, "ORDER": 1})


@pytest.mark.parametrize(
    ("m", "n", "k", "kc"), [(512, 512, 512, 512), (128, 4096, 4096, 4096), (64, 96, 192, 192)]
)
def test_amx_int8_hosts_take_tiles_for_int8_in_k_quads(granted, m, n, k, kc):
    op = matmul_op(m, n, k, dtype="i8")
    target = HostCPU(AMX_HOST)
    config = CONTRACTION.select(op, target)
    assert (config["UNIT"], config["KC"], config["KC"] % 64) == (UNIT_AMX, min(kc, 4096), 0)
    assert not CONTRACTION.violations(op, target, {**config, "KU": 1, "ORDER": 1})
    # Without AMX-INT8 (an AMX-BF16 flag set only), int8 takes dot products.
    assert CONTRACTION.select(op, HostCPU(dataclasses.replace(BASE, flags=AMX)))["UNIT"] == 1


@pytest.mark.parametrize(("k", "nc"), [(1024, 256), (2048, 128)])
def test_bs_vnni_block_keeps_to_half_of_l2(granted, k, nc):
    """KC x NC bf16 within half of the 1 MiB L2's ways, at most 256 columns: a long K
    takes narrower column blocks (K = 4096 on a 2 MiB L2 ran 1.5x faster at NC = 128)."""
    op, target = matmul_op(128, 4096, k), HostCPU(AMX_HOST)
    config = CONTRACTION.select(op, target)
    assert (config["UNIT"], config["KC"], config["NC"]) == (UNIT_AMX, k, nc)
    too_wide = {**config, "NC": 2 * nc, "KU": 1, "ORDER": 1}
    assert "amx_b_block_in_l2" in CONTRACTION.violations(op, target, too_wide)


def test_a_linear_layers_weight_takes_tiles_and_a_stored_k_by_m_does_not(granted):
    target = HostCPU(AMX_HOST)
    weight = dataclasses.replace(matmul_op(256, 1024, 512), attributes={"transpose_b": 1})
    assert CONTRACTION.select(weight, target)["UNIT"] == UNIT_AMX
    a_km = dataclasses.replace(matmul_op(256, 1024, 512), attributes={"transpose_a": 1})
    assert CONTRACTION.select(a_km, target)["UNIT"] == UNIT_FMA


def test_a_long_k_is_blocked_within_a_quarter_of_l2(granted):
    # A and B micro-panels of a 32 x 32 tile: 128 bytes per K element.
    target = HostCPU(AMX_HOST)
    config = CONTRACTION.select(matmul_op(256, 11008, 8192), target)
    bound = target.features.l2_bytes // 4 // 128
    assert config["UNIT"] == UNIT_AMX and config["KC"] < 8192
    assert 8192 % config["KC"] == 0 and config["KC"] <= bound and config["KC"] % 32 == 0
    assert config["MC"] * config["KC"] * 2 <= target.features.l2_bytes // 8


def test_a_fixed_unit_gets_its_own_paths_blocks(granted):
    """--param UNIT=0 on an AMX host: the FMA path's blocks, not the AMX tiles' (32 x 32)."""
    op, target = matmul_op(512, 512, 512), HostCPU(AMX_HOST)
    for unit in (UNIT_FMA, UNIT_DOT):
        config = CONTRACTION.select(op, target, {"UNIT": unit})
        assert config["UNIT"] == unit and config["MR"] < 32
        assert not CONTRACTION.violations(op, target, {**config, "KU": 1, "ORDER": 1})
    assert CONTRACTION.select(op, target, {"UNIT": UNIT_AMX}) == CONTRACTION.select(op, target)


def test_a_unit_given_as_a_parameter_reaches_the_selector(granted):
    engine = engine_for(HostCPU(AMX_HOST), use_specs=False)
    plan = engine.plan(Matmul(M=512, N=512, K=512, dtype="bf16"), {"UNIT": UNIT_FMA})
    assert plan.values["UNIT"] == UNIT_FMA and plan.values["MR"] < 32
    assert plan.sources["MR"] == "selector" and plan.sources["UNIT"] == "explicit"


def test_two_threads_get_whole_column_blocks_each(granted):
    config = CONTRACTION.select(matmul_op(512, 256, 512), HostCPU(AMX_HOST, threads=2))
    assert config["UNIT"] == UNIT_AMX and (256 // config["NC"]) % 2 == 0


@pytest.mark.parametrize(
    "op",
    [matmul_op(64, 64, 48), matmul_op(40, 64, 64), matmul_op(64, 64, 96, dtype="i8")],
    ids=["k-not-in-32s", "rows-not-in-16s", "int8-k-not-in-64s"],
)
def test_shapes_of_partial_tiles_take_dot_products(granted, op):
    assert CONTRACTION.select(op, HostCPU(AMX_HOST))["UNIT"] == UNIT_DOT


def test_a_refused_grant_falls_back_to_dot_products_with_a_warning(monkeypatch):
    monkeypatch.setattr(HostCPU, "runs_here", lambda self: True)  # the AMX host is this one
    monkeypatch.setattr(host_cpu, "amx_refusal", lambda: "refused for the selector test")
    with pytest.warns(UserWarning, match="refused for the selector test"):
        config = CONTRACTION.select(matmul_op(512, 512, 512), HostCPU(AMX_HOST))
    assert config["UNIT"] == UNIT_DOT


def test_the_tuner_searches_amx_tiles_only_where_the_os_grants_them(monkeypatch):
    op = matmul_op(256, 256, 256)
    target = HostCPU(AMX_HOST)
    config = {**AMX_BLOCKS, "MC": 64, "NC": 256, "KC": 256, "PACK": 0, "KU": 1, "ORDER": 1}
    config = {**config, "PREFETCH": 0}
    monkeypatch.setattr(HostCPU, "runs_here", lambda self: True)  # the AMX host is this one
    monkeypatch.setattr(host_cpu, "amx_refusal", lambda: None)
    assert CONTRACTION.violations(op, target, config) == []
    assert CONTRACTION.violations(op, target, {**config, "MR": 32, "NR": 32}) == []
    assert "amx_needs_whole_tiles" in CONTRACTION.violations(op, target, {**config, "MR": 8})
    # 64 x 32: eight C tiles and two A and two B tiles are more than 8 tile registers.
    broken = CONTRACTION.violations(op, target, {**config, "MR": 64, "NR": 32})
    assert "amx_needs_whole_tiles" in broken
    monkeypatch.setattr(host_cpu, "amx_refusal", lambda: "refused for the tuner test")
    with pytest.warns(
        UserWarning, match="refused for the tuner test; bf16 and int8 kernels do without"
    ):
        assert "amx_needs_amx_tiles" in CONTRACTION.violations(op, target, config)


@pytest.mark.jit
@pytest.mark.parametrize("tile", [(16, 16), (32, 32), (32, 16)])
def test_the_amx_path_lowers_to_tile_products_on_any_host(tile):
    blocks = {**AMX_BLOCKS, "MR": tile[0], "NR": tile[1], "MC": 64, "NC": 64}
    found = intrinsics(AMX_HOST, blocks)
    assert TILE_PRODUCT in found and DOT_INTRINSIC not in found


@pytest.mark.jit
def test_the_int8_amx_path_lowers_to_int8_tile_products_on_any_host():
    engine = engine_for(HostCPU(AMX_HOST), use_specs=False)
    blocks = {**AMX_BLOCKS, "KC": 64}
    module = engine.lower_payload(Matmul(M=64, N=64, K=128, dtype="i8"), blocks)
    assert INT8_PRODUCT in intrinsics_called(module)


@pytest.mark.jit
@pytest.mark.parametrize(("kc", "filled"), [(64, False), (32, True)], ids=["all-of-k", "k-blocks"])
def test_tiles_over_all_of_k_store_no_zero_fill_on_any_host(kc, filled):
    """Over all of K the C tiles start from zero in tile registers and the fill fused into
    them is dropped: nothing stores zeros into C. With K in blocks, C is filled and the
    later blocks load it."""
    engine = engine_for(HostCPU(AMX_HOST), use_specs=False)
    blocks = {**AMX_BLOCKS, "MC": 64, "NC": 64, "MR": 32, "NR": 32, "KC": kc}
    module = engine.lower_payload(Matmul(M=64, N=64, K=64, dtype="bf16"), blocks)
    stored = [store.operands[0].owner for store in ops_named(module.operation, "llvm.store")]
    zeros = [op for op in stored if isinstance(op, ir.OpView) and op.name == "llvm.mlir.constant"]
    assert bool(zeros) == filled


@pytest.mark.jit
@pytest.mark.parametrize("dtype", ["bf16", "i8"])
def test_a_linear_weight_is_packed_by_word_shuffles_on_any_host(dtype):
    """B stored [N, K]: its groups are words of its rows, transposed 16 x 16 words at a
    time by shuffles of whole registers, not moved element by element."""
    engine = engine_for(HostCPU(AMX_HOST), use_specs=False)
    workload = Matmul(M=64, N=64, K=128, dtype=dtype, transpose="b")
    blocks = {**AMX_BLOCKS, "MC": 64, "NC": 64, "KC": 128, "MR": 32, "NR": 32}
    counts = op_counts(engine.lower_payload(workload, blocks))
    assert counts["llvm.shufflevector"] > 0 and counts["llvm.extractelement"] == 0


@pytest.mark.jit
def test_an_amx_kernel_without_the_os_grant_is_refused_before_it_runs(monkeypatch):
    monkeypatch.setattr(mlir_jit, "amx_refusal", lambda: "refused in this test")
    engine = engine_for(HostCPU(), use_specs=False)
    with pytest.raises(MlirtuneError, match="refused in this test: this kernel uses AMX") as e:
        engine.compile(Matmul(M=64, N=64, K=64, dtype="bf16"), AMX_BLOCKS)
    assert e.value.stage == "jit"


@pytest.mark.jit
@needs_amx
@pytest.mark.parametrize(
    ("workload", "blocks"),
    [
        (Matmul(M=64, N=64, K=64, dtype="bf16"), (32, 32, 64, 32, 32)),  # zero-start tiles
        (Matmul(M=96, N=64, K=160, dtype="bf16"), (96, 64, 160, 32, 32)),  # K not 2^n
        (Matmul(M=64, N=96, K=128, dtype="bf16"), (64, 96, 64, 16, 48)),  # C tiles reloaded
        (Matmul(M=48, N=32, K=32, dtype="bf16"), (48, 32, 32, 48, 16)),  # 3 x 1 tiles
        (Mlp(M=32, N=64, K=64, dtype="bf16"), (32, 32, 64, 32, 32)),  # bias and ReLU fused
        (Matmul(M=64, N=96, K=128, dtype="bf16", transpose="b"), (64, 96, 128, 32, 32)),
    ],
    ids=["square", "k-160", "two-k-blocks", "tall-tile", "mlp", "b-n-by-k"],
)
def test_amx_kernels_match_the_f32_reference(workload, blocks):
    result, expected = verified_outputs(workload, blocks, UNIT_AMX)
    # bf16 inputs, f32 products and sums: within f32 rounding of the float64 reference.
    np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-4)


@pytest.mark.jit
@needs_amx_int8
@pytest.mark.parametrize(
    ("workload", "blocks"),
    [
        (Matmul(M=64, N=64, K=128, dtype="i8"), (64, 64, 128, 32, 32)),  # zero-start tiles
        (Matmul(M=64, N=96, K=192, dtype="i8"), (64, 96, 64, 32, 32)),  # C tiles reloaded
        (Matmul(M=48, N=32, K=64, dtype="i8"), (48, 32, 64, 48, 16)),  # 3 x 1 tiles
        (Matmul(M=64, N=96, K=128, dtype="i8", transpose="b"), (64, 96, 128, 32, 32)),
    ],
    ids=["square", "three-k-blocks", "tall-tile", "b-n-by-k"],
)
def test_int8_amx_kernels_are_exact(workload, blocks):
    result, expected = verified_outputs(workload, blocks, UNIT_AMX)
    assert np.array_equal(result, expected) and np.abs(expected).max() > 0


@pytest.mark.jit
@needs_amx
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs 2 cores")
def test_threads_give_the_amx_path_the_same_results():
    workload = Matmul(M=64, N=128, K=96, dtype="bf16")
    parameters = {"MC": 64, "NC": 32, "KC": 96, "MR": 32, "NR": 32, "UNIT": UNIT_AMX}
    assert_threads_agree(workload, parameters)
