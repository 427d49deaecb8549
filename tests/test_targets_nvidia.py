"""The compile-only NVIDIA GPU target: matmul payloads lowered to PTX, no GPU needed.

Every test needs LLVM's NVPTX backend in the MLIR wheel (the PTX comes from it); where it
is missing they skip with that reason, which the `nvptx` fixture finds out once.
"""

import re

import pytest

from mlirtune.errors import MlirtuneError, UsageError
from mlirtune.ir.roots import OpInfo
from mlirtune.targets.base import Target
from mlirtune.targets.nvidia_gpu import NvidiaGPU
from mlirtune.workloads import Matmul, Mlp

FMA = re.compile(r"^\s*(fma|mad)\.rn\.f32\b", re.MULTILINE)


@pytest.fixture(scope="module")
def nvptx() -> None:
    """Skip when the wheel's LLVM lacks the NVPTX backend (serialization says so)."""
    try:
        NvidiaGPU().compile_to_ptx(Matmul(M=8, N=8, K=8))
    except MlirtuneError as error:
        if error.stage == "gpu-serialize" and "NVPTX" in str(error):
            pytest.skip(f"NVPTX backend not built into this MLIR wheel: {error}")
        raise


@pytest.fixture(scope="module")
def matmul_ptx(nvptx) -> str:
    return NvidiaGPU().compile_to_ptx(Matmul(M=64, N=64, K=64))


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
    ptx = NvidiaGPU("sm_90", "+ptx80").compile_to_ptx(Matmul(M=32, N=32, K=16))
    assert re.search(r"^\.target sm_90$", ptx, re.MULTILINE)
    assert re.search(r"^\.version 8\.0$", ptx, re.MULTILINE)


def test_default_features_follow_a_newer_chip():
    # sm_90 needs PTX 7.8, so the default +ptx76 would abort inside LLVM.
    assert NvidiaGPU("sm_90").features == "+ptx78"
    assert NvidiaGPU().features == "+ptx76"


def test_chip_llvm_rejects_is_an_error_not_a_crash(nvptx):
    with pytest.raises(MlirtuneError) as caught:
        NvidiaGPU("sm_0").compile_to_ptx(Matmul(M=8, N=8, K=8))
    assert caught.value.stage == "gpu-target"
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
    ptx = NvidiaGPU().compile_to_ptx(Matmul(M=100, N=60, K=30), tiles)
    assert ".entry" in ptx and FMA.search(ptx)
    ptx = NvidiaGPU().compile_to_ptx(Mlp(M=64, N=128, K=32))
    # bias + ReLU fused into the kernel (arith.maximumf propagates NaN: max.NaN.f32)
    assert FMA.search(ptx) and re.search(r"\bmax(\.NaN)?\.f32\b", ptx)


@pytest.mark.parametrize(
    "tiles",
    [
        {"block_m": 64, "block_n": 64, "thread_m": 1, "thread_n": 1},  # 4096 threads
        {"block_m": 0},
        {"warp_m": 2},
    ],
)
def test_bad_tiles_are_usage_errors(tiles):
    with pytest.raises(UsageError):
        NvidiaGPU().compile_to_ptx(Matmul(M=64, N=64, K=64), tiles)


def test_target_interface():
    target = NvidiaGPU("sm_86", index=1)
    assert isinstance(target, Target)
    assert target.name == "nvidia-gpu"
    assert target.descriptor_search_path() == ["nvidia", "generic"]
    assert target.fingerprint() == {"target": "nvidia-gpu", "chip": "sm_86", "features": "+ptx76"}
    matmul = OpInfo("matmul", {"M": 100, "N": 256, "K": 64}, ("f32", "f32", "f32"))
    assert target.select_parameters("contraction", matmul) == {
        "block_m": 50,
        "block_n": 64,
        "thread_m": 2,
        "thread_n": 4,
    }
    with pytest.raises(UsageError):
        target.select_parameters("rowwise", OpInfo("reduction", {"ROWS": 4, "COLS": 8}, ("f32",)))
