"""The composition level: the engine that runs each kind of target.

Targets are facts and engines are machinery; neither knows the other's concrete classes.
This module (with the CLI above it) is where they meet.
"""

from __future__ import annotations

from pathlib import Path

from mlirtune.engine.mlir_jit import MlirJitEngine
from mlirtune.engine.ptx import PtxEngine
from mlirtune.interfaces.engine import Engine
from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.lowering import Descriptor
from mlirtune.interfaces.target import Target
from mlirtune.specs.specset import SpecSet
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.targets.nvidia_gpu import NvidiaGPU


def engine_for(
    target: Target,
    pipeline: str | Path | Descriptor | None = None,
    *,
    specs: SpecSet | None = None,
    use_specs: bool = True,
) -> Engine:
    """The engine that lowers with `target`'s pipelines (or `pipeline`) and runs on it:
    the MLIR JIT for the host, the PTX engine (running on a CUDA device) for NVIDIA GPUs.
    `specs`/`use_specs` choose the spec libraries applied (host only)."""
    if isinstance(target, HostCPU):
        return MlirJitEngine(target=target, pipeline=pipeline, specs=specs, use_specs=use_specs)
    if isinstance(target, NvidiaGPU):
        if specs is not None:
            raise UsageError("spec libraries are for CPU targets; drop --spec", stage="target")
        return PtxEngine(target=target, pipeline=pipeline)
    raise UsageError(f"no engine for target {target.name}", stage="target")
