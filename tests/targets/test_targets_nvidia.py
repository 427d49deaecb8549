"""The NVIDIA GPU target: matmul payloads lowered to PTX and GPU programs, no GPU needed.

NvidiaGPU holds facts; PtxEngine lowers through the packaged `nvidia/` descriptors (the
`gpu_contraction` schedule family, then nvidia/lower_gpu.yaml) into a GpuProgram, which
tests/runtime/test_cuda_device.py runs where there is a GPU. Tests that produce PTX need
LLVM's NVPTX backend in the MLIR wheel; where it is missing they skip with that reason,
which the `nvptx` fixture (conftest.py) finds out once.
"""

import re
from pathlib import Path

import pytest
from mlir import ir

from mlirtune.api import engine_for
from mlirtune.engine.ptx import PtxEngine
from mlirtune.interfaces.bench import BenchOptions
from mlirtune.interfaces.dtype import dtype_named
from mlirtune.interfaces.errors import MlirtuneError, UsageError
from mlirtune.interfaces.gpu_program import GpuProgram
from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.target import Target
from mlirtune.ir.gpu import read_launches
from mlirtune.pipeline import DescriptorError, load_descriptor
from mlirtune.runtime import Placement
from mlirtune.runtime.cuda import device_count
from mlirtune.schedules.registry import family_named
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.targets.nvidia_gpu import GpuFacts, NvidiaGPU
from mlirtune.verify import absolute_tolerance
from mlirtune.workloads import Matmul, Mlp, Softmax
from tests.targets.conftest import NVIDIA, origin_of

FMA = re.compile(r"^\s*(fma|mad)\.rn\.f32\b", re.MULTILINE)
COMMITTED_PROGRAM = Path(__file__).parent.parent / "runtime" / "data" / "matmul_64x48x32.json"
# The tensor-core knobs where the selector takes FMAs (mma = 0; warp tiles at their defaults).
FMAS = {"mma": 0, "stages": 1, "warp_m": 64, "warp_n": 64}
MATMUL_100 = OpInfo("matmul", {"M": 100, "N": 256, "K": 64}, ("f32", "f32", "f32"))


@pytest.fixture(scope="module")
def matmul_ptx(nvptx) -> str:
    return PtxEngine().compile_to_ptx(Matmul(M=64, N=64, K=64))


def test_matmul_compiles_to_ptx_kernel(matmul_ptx):
    assert ".entry" in matmul_ptx
    assert re.search(r"^\.target sm_80$", matmul_ptx, re.MULTILINE)
    assert re.search(r"^\.version 7\.6$", matmul_ptx, re.MULTILINE)
    assert FMA.search(matmul_ptx), "the K loop should multiply-add with FMA"
    # 64x64 outputs at 4x4 per thread: one block of 16x16 threads.
    assert ".maxntid 16, 16, 1" in matmul_ptx


def test_kernel_arguments_are_noalias_bare_pointers(matmul_ptx):
    # Three bare pointers (A, B, C); noalias lets A and B load through the read-only cache.
    assert matmul_ptx.count(".param .u64 .ptr") == 3
    assert "ld.global.nc." in matmul_ptx


def test_chip_and_features_reach_the_ptx(nvptx):
    ptx = PtxEngine(NvidiaGPU("sm_90", "+ptx80")).compile_to_ptx(Matmul(M=32, N=32, K=16))
    assert re.search(r"^\.target sm_90$", ptx, re.MULTILINE)
    assert re.search(r"^\.version 8\.0$", ptx, re.MULTILINE)


def test_default_features_follow_a_newer_chip():
    # sm_90 needs PTX 7.8, so the default +ptx76 would abort inside LLVM.
    assert NvidiaGPU("sm_90").features == "+ptx78"
    assert NvidiaGPU().features == "+ptx76"


def test_chip_llvm_rejects_is_an_error_not_a_crash(nvptx):
    with pytest.raises(MlirtuneError) as caught:
        PtxEngine(NvidiaGPU("sm_0")).compile_to_ptx(Matmul(M=8, N=8, K=8))
    # The failing stage is the descriptor's nvvm-attach-target pass, named by file and line.
    assert caught.value.stage.startswith(origin_of("nvvm-attach-target") + " (pass ")
    assert re.search(
        r"lower_gpu\.yaml:\d+: stage \d+ \(pass nvvm-attach-target", caught.value.stage
    )
    assert "sm_20" in str(caught.value)


@pytest.mark.parametrize(
    ("chip", "features"),
    [
        ("gfx90a", None),  # not an NVIDIA chip
        ("sm_80", "ptx76"),  # no leading +/-: LLVM would assert
        ("sm_90a", "+ptx76"),  # below sm_90a's PTX 8.0: LLVM would abort
    ],
)
def test_bad_chip_or_features_fail_at_construction(chip, features):
    with pytest.raises(UsageError):
        NvidiaGPU(chip, features)


def test_partial_tiles_and_epilogue_compile(nvptx):
    # Tiles that divide neither M nor N: the thread forall still has a static trip count.
    tiles = {"block_m": 32, "block_n": 32, "thread_m": 4, "thread_n": 4}
    ptx = PtxEngine().compile_to_ptx(Matmul(M=100, N=60, K=30), tiles)
    assert ".entry" in ptx and FMA.search(ptx)
    ptx = PtxEngine().compile_to_ptx(Mlp(M=64, N=128, K=32))
    # bias + ReLU fused into the kernel (arith.maximumf propagates NaN: max.NaN.f32)
    assert FMA.search(ptx) and re.search(r"\bmax(\.NaN)?\.f32\b", ptx)


def test_shared_k_steps_keep_the_accumulators_in_registers(nvptx):
    """Whole tiles: A and B tiles of (64 + 64) x 64 floats in shared memory, C written once
    per output and never read back (its accumulators stay in registers across K steps)."""
    ptx = PtxEngine().compile_to_ptx(Matmul(M=128, N=128, K=128))
    shared = re.findall(r"^\s*\.shared\s.*\[(\d+)\];", ptx, re.MULTILINE)
    assert sorted(map(int, shared)) == [64 * 64 * 4, 64 * 64 * 4]
    assert "bar.sync" in ptx and FMA.search(ptx)
    assert len(re.findall(r"\bst\.global\.", ptx)) == 4 * 4  # thread_m x thread_n
    assert not re.search(r"\bld\.global\.(?!nc)", ptx), "C should never be loaded"
    # Reading global memory directly (block_k = 0): no shared memory.
    assert ".shared" not in PtxEngine().compile_to_ptx(Matmul(M=128, N=128, K=128), {"block_k": 0})


def test_shared_tiles_past_what_any_chip_gives_a_block_are_refused():
    # (512 + 512) * 64 floats: past the 227 KiB an sm_90 block may opt in to, the most of
    # any chip (each target's own limit is the constraint's, below).
    big = {"block_m": 512, "block_n": 512, "thread_m": 16, "thread_n": 16, "block_k": 64}
    with pytest.raises(UsageError, match=r"262144 bytes exceed 232448 \(constraint shared_mem"):
        PtxEngine().compile_to_ptx(Matmul(M=4096, N=4096, K=4096), big)


def test_partial_tiles_stage_shared_steps_as_scalar_loops(nvptx):
    tiles = {"block_m": 32, "block_n": 32, "thread_m": 4, "thread_n": 4, "block_k": 8}
    ptx = PtxEngine().compile_to_ptx(Matmul(M=100, N=60, K=30), tiles)
    assert ".shared" in ptx and "bar.sync" in ptx and FMA.search(ptx)


@pytest.mark.parametrize(
    ("tiles", "message"),
    [
        ({"block_m": 64, "block_n": 64, "thread_m": 1, "thread_n": 1}, "64x64 threads per block"),
        ({"block_m": 0}, "parameter block_m=0 must be a positive integer"),
        ({"block_k": 64}, "constraint k_steps"),
        ({"block_k": -1}, "parameter block_k=-1 must be an integer >= 0"),
        ({"warp_k": 2}, "unknown parameter"),
        ({"mma": 1}, r"mma=1: inputs f32 into f32 \(needs bf16 or f16 into f32\)"),
        ({"chip": "sm_90"}, "set by the target"),  # the target's, not a schedule parameter
    ],
)
def test_bad_tiles_are_usage_errors(tiles, message):
    # Refused before any IR is rewritten: the NVPTX backend is not needed to see them.
    with pytest.raises(UsageError, match=message):
        PtxEngine().compile_to_ptx(Matmul(M=64, N=64, K=64), tiles)


@pytest.mark.jit
def test_non_matmul_payloads_fail_in_the_nvidia_folder():
    # nvidia/default.yaml, never a CPU pipeline: the schedule stage names what it needs.
    engine = PtxEngine()
    with pytest.raises(MlirtuneError, match="gpu_contraction needs a matmul root op") as caught:
        engine.compile_to_ptx(Softmax(M=8, N=16))
    assert str(NVIDIA / "matmul.yaml") in str(caught.value)
    assert "reduction" in str(caught.value)


@pytest.mark.jit
def test_target_is_facts():
    target = NvidiaGPU("sm_86", index=1)
    assert isinstance(target, Target)
    assert target.name == "nvidia-gpu"
    assert target.descriptor_search_path() == ["nvidia"]
    assert target.fingerprint() == {"target": "nvidia-gpu", "chip": "sm_86", "features": "+ptx76"}
    assert target.pipeline_values() == {"chip": "sm_86", "features": "+ptx76"}
    for removed in ("engine", "lower", "select_parameters", "compile_to_ptx"):
        assert not hasattr(target, removed)


def test_gpu_contraction_selector():
    family = family_named("gpu_contraction")
    # The largest divisors of M and N up to 64, then of those up to 4: every tile is full;
    # K = 64 goes through shared memory in two steps of 32 (one step of 64 is none).
    assert family.select(MATMUL_100, NvidiaGPU("sm_86")) == {
        "block_m": 50,
        "block_n": 64,
        "thread_m": 2,
        "thread_n": 4,
        "block_k": 32,
        **FMAS,
    }
    # The largest step that leaves more than one: none for K = 8.
    shallow = OpInfo("matmul", {"M": 64, "N": 64, "K": 20}, ("f32", "f32", "f32"))
    assert family.select(shallow, NvidiaGPU())["block_k"] == 16
    assert (
        family.select(OpInfo("matmul", {"M": 8, "N": 8, "K": 8}, ("f32",) * 3), NvidiaGPU())[
            "block_k"
        ]
        == 0
    )
    # Large tiles where they still give each SM two blocks: 4096^2 on an H200's 132 SMs,
    # not 1024^2. bf16 inputs step through K 32 at a time.
    h200 = NvidiaGPU("sm_90", facts=GpuFacts(sms=132))
    square = OpInfo("matmul", {"M": 4096, "N": 4096, "K": 4096}, ("f32", "f32", "f32"))
    large = {"block_m": 128, "block_n": 64, "thread_m": 8, "thread_n": 4, "block_k": 64}
    assert family.select(square, h200) == {**large, **FMAS}
    smaller = OpInfo("matmul", {"M": 1024, "N": 1024, "K": 1024}, ("f32", "f32", "f32"))
    assert family.select(smaller, h200)["block_m"] == 64
    # Dims without small divisors would need more threads than a block has: default tiles.
    prime = OpInfo("matmul", {"M": 333, "N": 301, "K": 257}, ("f32", "f32", "f32"))
    assert family.select(prime, NvidiaGPU()) == {
        "block_m": 64,
        "block_n": 64,
        "thread_m": 4,
        "thread_n": 4,
        "block_k": 64,
        **FMAS,
    }
    with pytest.raises(UsageError):
        family.select(MATMUL_100, HostCPU())
    # A host family has no selector for the GPU either.
    with pytest.raises(UsageError):
        family_named("rowwise").select(
            OpInfo("reduction", {"ROWS": 4, "COLS": 8}, ("f32",)), NvidiaGPU()
        )


def test_gpu_contraction_constraints_and_cost():
    family, target = family_named("gpu_contraction"), NvidiaGPU()
    chosen = family.select(MATMUL_100, target)
    assert family.violations(MATMUL_100, target, chosen) == []
    too_many = {**chosen, "block_m": 64, "block_n": 64, "thread_m": 1, "thread_n": 1}
    assert family.violations(MATMUL_100, target, too_many) == ["threads_per_block"]
    outside = {**chosen, "block_m": 4, "block_n": 64, "thread_m": 8, "thread_n": 4}
    assert "thread_m_within_block_m" in family.violations(MATMUL_100, target, outside)
    assert 0 < family.cost(MATMUL_100, target, chosen) < family.cost(MATMUL_100, target, outside)
    # (128 + 128) * 64 floats: 64 KiB, past a Pascal block's 48 KiB, within what an sm_80
    # block may opt in to (dynamic shared memory). One step of all of K is no step.
    big = {**chosen, "block_m": 128, "block_n": 128, "thread_m": 8, "thread_n": 8, "block_k": 64}
    large = OpInfo("matmul", {"M": 4096, "N": 4096, "K": 4096}, ("f32", "f32", "f32"))
    assert family.violations(large, NvidiaGPU("sm_61"), big) == ["shared_memory"]
    assert family.violations(large, target, big) == []
    assert family.violations(MATMUL_100, target, {**chosen, "block_k": 64}) == ["k_steps"]
    # Shared K steps cost less than every thread reading global memory.
    tiles = {**FMAS, "block_m": 64, "block_n": 64, "thread_m": 4, "thread_n": 4}
    steps = [family.cost(large, target, {**tiles, "block_k": bk}) for bk in (0, 8, 32)]
    assert steps == sorted(steps, reverse=True)


@pytest.mark.jit
def test_engine_for_lowers_through_the_nvidia_matmul_descriptor():
    engine = engine_for(NvidiaGPU("sm_86"))
    assert isinstance(engine, PtxEngine)
    lowering = engine.plan(Matmul(M=100, N=256, K=64))
    assert lowering.descriptor.path == NVIDIA / "matmul.yaml"
    assert lowering.values == {
        "block_m": 50,
        "block_n": 64,
        "thread_m": 2,
        "thread_n": 4,
        "block_k": 32,
        **FMAS,
        "chip": "sm_86",
        "features": "+ptx76",
    }
    assert lowering.sources == {
        **dict.fromkeys(("block_m", "block_n", "thread_m", "thread_n", "block_k"), "selector"),
        **dict.fromkeys(FMAS, "selector"),
        "chip": "target",
        "features": "target",
    }
    assert lowering.config_source == "selector"
    explicit = engine.plan(Mlp(M=64, N=128, K=32), {"block_m": 32})
    assert explicit.descriptor.path == NVIDIA / "matmul.yaml"  # no nvidia/mlp.yaml
    assert (explicit.values["block_m"], explicit.sources["block_m"]) == (32, "explicit")
    assert explicit.config_source == "explicit"
    # The kernel fix-ups and the launch record run between outlining and attaching the
    # target, as step stages: the launches are still gpu.launch_func with constant sizes
    # (dynamic shared memory included).
    names = [(s.kind, s.name.split("{")[0]) for s in lowering.descriptor.stages]
    step = names.index(("step", "prepare-gpu-kernels"))
    assert names[step - 1] == ("pass", "gpu-kernel-outlining")
    assert names[step + 1] == ("step", "dynamic-shared-memory")
    assert names[step + 2] == ("step", "record-gpu-launches")
    assert names[step + 3] == ("pass", "nvvm-attach-target")
    with pytest.raises(UsageError, match="spec libraries are for CPU targets"):
        engine_for(NvidiaGPU(), specs=object())


@pytest.mark.jit
def test_observer_sees_the_schedule_then_the_ptx(nvptx):
    seen: list[tuple[str, type]] = []
    PtxEngine().lower_payload(
        Matmul(M=16, N=16, K=8), observer=lambda stage, result: seen.append((stage, type(result)))
    )
    assert [stage for stage, _ in seen] == ["schedule gpu_contraction", "ptx"]
    assert seen[-1][1] is str


@pytest.mark.skipif(device_count() > 0, reason="this host has a GPU")
def test_running_without_a_gpu_says_why():
    engine = PtxEngine()
    for call in (engine.execute, engine.benchmark):
        with pytest.raises(UsageError, match="no CUDA device 0 to run on: ") as caught:
            call(Matmul(M=8, N=8, K=8))
        assert caught.value.stage == "target"


@pytest.mark.gpu
@pytest.mark.skipif(device_count() == 0, reason="needs an NVIDIA GPU and its driver")
def test_the_engine_runs_and_times_on_the_gpu(nvptx):
    engine = PtxEngine(placements={"B": Placement.DEVICE})
    assert engine.execute(Matmul(M=100, N=60, K=30)).verification.ok
    result = engine.benchmark(Mlp(M=64, N=128, K=96), options=BenchOptions(max_time_s=0.05))
    assert result.verified
    assert result.extra["placements"] == {"A": "host", "B": "device", "bias": "host", "C": "host"}


def test_committed_program_is_a_fresh_compile(nvptx):
    """The program the runtime's tests run without MLIR is what the compiler makes now."""
    fresh = PtxEngine().compile(Matmul(M=64, N=48, K=32))
    assert fresh == GpuProgram.load(COMMITTED_PROGRAM), (
        f"regenerate {COMMITTED_PROGRAM} with PtxEngine().compile(Matmul(M=64, N=48, K=32))"
        ".save(path)"
    )


def test_launches_are_recorded_with_grid_block_and_arguments(nvptx):
    tiles = {"block_m": 32, "block_n": 64, "thread_m": 2, "thread_n": 4}
    program = PtxEngine().compile(Matmul(M=100, N=256, K=64), tiles)
    (launch,) = program.launches
    assert (launch.grid, launch.block, launch.shared_bytes) == ((4, 4, 1), (16, 16, 1), 0)
    assert sorted(launch.arguments) == [0, 1, 2]  # A, B and C, in the kernel's order
    assert launch.kernel in program.ptx and program.chip == "sm_80"
    assert program.flops == 2 * 100 * 256 * 64 and program.parameters["block_m"] == 32
    (mlp,) = PtxEngine().compile(Mlp(M=64, N=128, K=32)).launches
    assert sorted(mlp.arguments) == [0, 1, 2, 3]  # A, B, bias and C, in the kernel's order


def test_program_outputs_carry_the_verification_tolerances(nvptx):
    program = PtxEngine().compile(Matmul(M=16, N=16, K=400))
    inputs, (output,) = program.arguments[:2], program.arguments[2:]
    assert [(a.name, a.shape, a.dtype) for a in inputs] == [
        ("A", (16, 400), "float32"),
        ("B", (400, 16), "float32"),
    ]
    assert output.is_output and output.atol == absolute_tolerance(dtype_named("f32"), 400)
    assert output.rtol == dtype_named("f32").rtol and inputs[0].atol == 0.0


def test_launches_are_read_only_where_recorded():
    with (
        ir.Context(),
        pytest.raises(MlirtuneError, match="recorded no GPU launches") as caught,
    ):
        read_launches(ir.Module.parse("module {}"))
    assert caught.value.stage == "gpu-launch"


def test_unknown_step_names_file_and_line(tmp_path):
    path = tmp_path / "steps.yaml"
    path.write_text(
        "description: a step that does not exist\n"
        "stages:\n"
        "  - pass: canonicalize\n"
        "  - step: no-such-step\n"
    )
    with pytest.raises(DescriptorError, match="unknown step 'no-such-step'") as caught:
        load_descriptor(path)
    assert f"{path}:4: stage 2" in str(caught.value)
    assert "prepare-gpu-kernels" in str(caught.value)  # the known steps are listed
    path.write_text("stages:\n  - step: prepare-gpu-kernels {x=1}\n")
    with pytest.raises(DescriptorError, match=r":2: stage 1: step prepare-gpu-kernels takes no"):
        load_descriptor(path)
    path.write_text("stages:\n  - step: prepare-gpu-kernels\n")
    (stage,) = load_descriptor(path).stages
    assert (stage.kind, stage.name, stage.arguments) == ("step", "prepare-gpu-kernels", {})


def test_step_arguments_are_checked_against_the_step(tmp_path):
    path = tmp_path / "steps.yaml"
    path.write_text("stages:\n  - step: expand-exp {mode=fast}\n")
    with pytest.raises(DescriptorError, match=r"takes no argument\(s\) mode; it takes isa"):
        load_descriptor(path)
    path.write_text("params: {ISA: avx2}\nstages:\n  - step: expand-exp {isa=$ISA}\n")
    descriptor = load_descriptor(path)
    assert descriptor.params == {"ISA": "avx2"}
    assert [stage.arguments for stage in descriptor.stages] == [{"isa": "$ISA"}]
