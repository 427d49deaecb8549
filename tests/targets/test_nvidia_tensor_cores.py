"""Tensor cores on NVIDIA GPUs (gpu_contraction with mma = 1, and stages = 2 for
double-buffered K steps), bf16 or f16 inputs into f32: the PTX, the selector, the tile
rules and their z3 form. No GPU is needed; tests/runtime/test_cuda_device.py runs the
committed tensor-core programs where there is one."""

import itertools
import re
from pathlib import Path

import pytest
import z3

from mlirtune.engine.ptx import PtxEngine
from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.gpu_program import GpuProgram
from mlirtune.interfaces.op import OpInfo
from mlirtune.schedules.registry import family_named
from mlirtune.targets.nvidia_gpu import GpuFacts, NvidiaGPU
from mlirtune.workloads import Matmul, Mlp

# The input types tensor cores take, each summed in f32, and their mma.sync forms.
INPUTS = ("bf16", "f16")
MMA_FORMS = {t: f"mma.sync.aligned.m16n8k16.row.col.f32.{t}.{t}.f32" for t in INPUTS}
MMA = MMA_FORMS["bf16"]
RUNTIME_DATA = Path(__file__).parent.parent / "runtime" / "data"
COMMITTED_MMA_PROGRAM = RUNTIME_DATA / "matmul_bf16_128x128x256_mma.json"
H200 = NvidiaGPU("sm_90", facts=GpuFacts(sms=132))
# 2 x 2 warps of 32 x 32, K steps of 32: small enough to read, every rule exercised.
SMALL = {"mma": 1, "block_m": 64, "block_n": 64, "warp_m": 32, "warp_n": 32}
SMALL |= {"block_k": 32, "stages": 1}
STAGED = {**SMALL, "stages": 2}
# The selector's tiles for large ops: 70 KiB of double buffers, past the static 48 KiB.
DYNAMIC = {**SMALL, "block_m": 128, "block_n": 128, "warp_m": 64, "warp_n": 64}
DYNAMIC |= {"block_k": 64, "stages": 2}


def mma_matmul(m: int, n: int, k: int, inputs: str = "bf16") -> OpInfo:
    """A matmul root of `inputs` (bf16 unless told) into f32."""
    return OpInfo("matmul", {"M": m, "N": n, "K": k}, (inputs, inputs, "f32"))


@pytest.fixture(scope="module", params=INPUTS)
def inputs(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def small_ptx(nvptx, inputs) -> str:
    return PtxEngine(NvidiaGPU("sm_90")).compile_to_ptx(
        Matmul(M=128, N=128, K=128, dtype=inputs), SMALL
    )


def test_warp_tiles_run_as_mma_sync_fed_by_ldmatrix(small_ptx, inputs):
    # A warp tile of 32 x 32 is 2 x 4 instructions per 16 of K, in the inputs' PTX type.
    assert len(re.findall(re.escape(MMA_FORMS[inputs]), small_ptx)) >= 2 * 4
    assert not any(form in small_ptx for t, form in MMA_FORMS.items() if t != inputs)
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in small_ptx  # A
    assert "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16" in small_ptx  # B, K-major rows
    assert "fma.rn.f32" not in small_ptx


def test_accumulators_start_from_zero_and_c_is_only_stored(small_ptx):
    """The fill of C is dropped (the accumulators start as zeros in registers), C is never
    read, and each lane stores its two rows of each 16 x 8 accumulator once."""
    assert not re.search(r"\bld\.global\.(?!nc)", small_ptx)
    stores = re.findall(r"\bst\.global\.v2\.b32\b", small_ptx)
    assert len(stores) == 2 * (32 // 16) * (32 // 8)
    assert not re.search(r"\bst\.global\.(?!v2\.b32)", small_ptx)


def test_shared_rows_that_ldmatrix_reads_are_padded(small_ptx):
    """Rows of 64 and 128 bytes would put ldmatrix's eight rows in 2 or 4 banks; 8 more
    2-byte elements make each stride an odd number of 16-byte chunks."""
    shared = re.findall(r"^\s*\.shared\s.*\[(\d+)\];", small_ptx, re.MULTILINE)
    a, b = 64 * (32 + 8) * 2, 32 * (64 + 8) * 2
    assert sorted(map(int, shared)) == sorted([a, b])


@pytest.mark.parametrize("inputs", INPUTS)
def test_the_selector_takes_tensor_cores_where_the_op_and_chip_allow(inputs):
    family = family_named("gpu_contraction")
    square = mma_matmul(4096, 4096, 4096, inputs)
    chosen = family.select(square, H200)
    assert {k: chosen[k] for k in DYNAMIC} == DYNAMIC
    assert family.violations(square, H200, chosen) == []
    # K no multiple of 64: double-buffered steps of 32; of 32 (or one step of 32): single
    # steps of 16. Too few 128 x 128 blocks for the SMs: 64 x 64.
    assert family.select(mma_matmul(4096, 4096, 96, inputs), H200)["block_k"] == 32
    for k in (48, 32):
        shallow = family.select(mma_matmul(4096, 4096, k, inputs), H200)
        assert (shallow["block_k"], shallow["stages"]) == (16, 1)
    assert family.select(mma_matmul(512, 384, 1024, inputs), H200)["block_m"] == 64
    # FMAs: f32, mixed inputs, a chip before sm_80, tiles that cannot be whole, or an
    # epilogue.
    f32 = OpInfo("matmul", square.dims, ("f32",) * 3)
    mixed = OpInfo("matmul", square.dims, ("bf16", "f16", "f32"))
    odd = mma_matmul(1000, 999, 1001, inputs)
    turing = NvidiaGPU("sm_75")
    mlp = OpInfo("matmul", square.dims, square.dtypes, attributes={"epilogue": 1})
    for op, target in ((f32, H200), (mixed, H200), (square, turing), (odd, H200)):
        assert family.select(op, target)["mma"] == 0
    assert family.select(mlp, H200)["mma"] == 0


@pytest.mark.parametrize(
    ("workload", "tiles", "message"),
    [
        (Matmul(M=64, N=64, K=64), {}, r"inputs f32 into f32 \(needs bf16 or f16 into f32\)"),
        (Mlp(M=64, N=64, K=64, dtype="f16"), {}, "the matmul has epilogue"),
        (Matmul(M=64, N=64, K=64, dtype="f16"), {"warp_n": 12}, "constraint mma_tiles"),
        (Mlp(M=64, N=64, K=64, dtype="bf16"), {}, "the matmul has epilogue"),
        (Matmul(M=64, N=64, K=64, dtype="bf16"), {"warp_m": 24}, "constraint mma_tiles"),
        (Matmul(M=64, N=64, K=64, dtype="bf16"), {"block_k": 8}, "block_k % 16"),
        (Matmul(M=96, N=64, K=64, dtype="bf16"), {}, "whole block tiles"),
        (Matmul(M=64, N=64, K=64), {"mma": 0}, "stages=2 needs mma=1"),
        (Matmul(M=64, N=64, K=64, dtype="bf16"), {"block_k": 16}, "block_k >= 32"),
    ],
)
def test_tile_rules_are_usage_errors(workload, tiles, message):
    with pytest.raises(UsageError, match=message):
        PtxEngine(NvidiaGPU("sm_90")).compile_to_ptx(workload, {**STAGED, **tiles})


@pytest.mark.parametrize("inputs", INPUTS)
def test_z3_rules_match_the_checks_brute_force(inputs):
    """Every tensor-core config of a grid: the constraints hold exactly where the family's
    parameter checks accept it (both sides see the same rules)."""
    family, op = family_named("gpu_contraction"), mma_matmul(256, 192, 128, inputs)
    accepted = refused = 0
    grid = itertools.product(
        (32, 64, 128), (32, 64, 128), (16, 32, 64), (16, 32, 64), (8, 32), (1, 2)
    )
    for bm, bn, bk, wm, wn, stages in grid:
        config = {**SMALL, "block_m": bm, "block_n": bn, "block_k": bk, "stages": stages}
        config |= {"warp_m": wm, "warp_n": wn, "thread_m": 4, "thread_n": 4}
        try:
            family.parameters(op, config)
            ok = True
        except UsageError:
            ok = False
        domains = {v for v in family.violations(op, H200, config) if v.endswith("_domain")}
        if domains:
            continue
        assert (family.violations(op, H200, config) == []) == ok, config
        accepted, refused = accepted + ok, refused + (not ok)
    assert accepted > 10 and refused > 10


@pytest.mark.parametrize("inputs", INPUTS)
def test_no_tensor_cores_before_sm_80_in_the_space(inputs):
    family, op = family_named("gpu_contraction"), mma_matmul(256, 256, 256, inputs)
    config = {**family.select(op, H200)}
    assert config["mma"] == 1
    assert family.violations(op, NvidiaGPU("sm_75"), config) == ["mma_path"]
    knobs = {name: z3.Int(name) for name in family.domains(op, H200)}
    constraints = family.constraints(op, NvidiaGPU("sm_75"), knobs, {})
    (path,) = (c for c in constraints if c.name == "mma_path")
    assert "sm_75 has no bf16 or f16 mma.sync" in path.description


def test_cost_model_prefers_double_buffers_and_larger_warp_tiles():
    family, op = family_named("gpu_contraction"), mma_matmul(4096, 4096, 4096)
    facts = NvidiaGPU("sm_90", facts=GpuFacts(sms=132, l2_bytes_per_s=12e12))
    staged = {**family.select(op, H200)}
    single = {**staged, "stages": 1}
    small = {**staged, "block_m": 64, "block_n": 64, "warp_m": 32, "warp_n": 32}
    costs = [family.cost(op, facts, c) for c in (staged, single, small)]
    assert costs == sorted(costs)


@pytest.mark.parametrize("inputs", INPUTS)
def test_committed_tensor_core_programs_are_fresh_compiles(nvptx, inputs):
    """The programs the runtime's GPU tests verify are what the compiler makes now: the
    selector's tiles for large ops, double-buffered in dynamic shared memory."""
    committed = RUNTIME_DATA / f"matmul_{inputs}_128x128x256_mma.json"
    fresh = PtxEngine().compile(Matmul(M=128, N=128, K=256, dtype=inputs), DYNAMIC)
    assert fresh == GpuProgram.load(committed), (
        f"regenerate {committed} with PtxEngine().compile(Matmul(M=128, N=128, "
        f"K=256, dtype={inputs!r}), DYNAMIC).save(path)"
    )


def test_shared_memory_past_48_kib_is_dynamic(nvptx):
    """Buffers past the static 48 KiB are carved from dynamic shared memory, an external
    unsized array, and the launch asks for their bytes: A's 128 x (64 + 8) and B's
    64 x (128 + 8) bf16, twice."""
    program = GpuProgram.load(COMMITTED_MMA_PROGRAM)
    assert re.search(r"\.extern \.shared \.align 16 \.b8 \w+\[\];", program.ptx)
    assert not re.search(r"^\s*\.shared\s", program.ptx, re.MULTILINE)
    (launch,) = program.launches
    assert launch.shared_bytes == 2 * (128 * 72 + 64 * 136) * 2
    assert "cp.async.wait_group" in program.ptx and MMA in program.ptx


@pytest.fixture(scope="module")
def staged_ptx(nvptx) -> str:
    return PtxEngine(NvidiaGPU("sm_90")).compile_to_ptx(
        Matmul(M=128, N=128, K=128, dtype="bf16"), STAGED
    )


def test_double_buffers_are_filled_by_cp_async(staged_ptx):
    """Two buffers per shared tile, filled 16 bytes at a time by cp.async; each step ends
    waiting for the copies it started, and one barrier per step (besides the one before
    the K loop) both shows them to the block and guards the buffer refilled next."""
    shared = re.findall(r"^\s*\.shared\s.*\[(\d+)\];", staged_ptx, re.MULTILINE)
    a, b = 64 * (32 + 8) * 2, 32 * (64 + 8) * 2
    assert sorted(map(int, shared)) == sorted([2 * a, 2 * b])
    assert "cp.async.cg.shared.global" in staged_ptx and ", 16;" in staged_ptx
    assert re.search(r"cp\.async\.wait_group\s+0;", staged_ptx)
    assert "cp.async.commit_group" in staged_ptx
    assert staged_ptx.count("bar.sync") == 2
    assert not re.search(r"\bld\.global\.", staged_ptx)  # every read of A and B is cp.async
    assert MMA in staged_ptx


def test_three_stages_keep_two_steps_in_flight(nvptx):
    ptx = PtxEngine(NvidiaGPU("sm_90")).compile_to_ptx(
        Matmul(M=128, N=128, K=256, dtype="bf16"), {**SMALL, "stages": 3}
    )
    shared = re.findall(r"^\s*\.shared\s.*\[(\d+)\];", ptx, re.MULTILINE)
    assert sorted(map(int, shared)) == sorted([3 * 64 * 40 * 2, 3 * 32 * 72 * 2])
    assert re.search(r"cp\.async\.wait_group\s+1;", ptx)  # the newest step's copies fly on
