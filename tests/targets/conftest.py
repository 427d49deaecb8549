"""Fixtures of the NVIDIA target's tests: whether this MLIR wheel can make PTX at all."""

import pytest

from mlirtune.engine.ptx import PtxEngine
from mlirtune.interfaces.errors import MlirtuneError
from mlirtune.pipeline import load_descriptor
from mlirtune.pipeline.lookup import PACKAGED
from mlirtune.workloads import Matmul

NVIDIA = PACKAGED / "nvidia"


def origin_of(pass_prefix: str) -> str:
    """The origin (file:line: stage N) of the lower_gpu.yaml pass starting `pass_prefix`."""
    stages = load_descriptor(NVIDIA / "lower_gpu.yaml").stages
    return next(s.origin for s in stages if s.name.startswith(pass_prefix))


@pytest.fixture(scope="module")
def nvptx() -> None:
    """Skip when the wheel's LLVM lacks the NVPTX backend (serialization says so)."""
    try:
        PtxEngine().compile_to_ptx(Matmul(M=8, N=8, K=8))
    except MlirtuneError as error:
        serialize = (origin_of("gpu-module-to-binary"), "gpu-serialize")
        if (error.stage or "").startswith(serialize) and "NVPTX" in str(error):
            pytest.skip(f"NVPTX backend not built into this MLIR wheel: {error}")
        raise
