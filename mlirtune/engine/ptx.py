"""The compile-only NVIDIA engine: a payload lowered through the target's descriptors to PTX.

It plans like the host engine (descriptor lookup along `nvidia/`, slot values with their
sources) and runs the same driver; `nvidia/matmul.yaml` applies the `gpu_contraction`
schedule and `nvidia/lower_gpu.yaml` outlines, lowers and serializes the kernel with
`gpu-module-to-binary{format=isa}`, whose PTX text needs neither ptxas nor a GPU. There is
no GPU runtime yet, so nothing here runs a kernel.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path

import numpy as np
from mlir import ir

from mlirtune.engine.planned import DescriptorEngine
from mlirtune.interfaces.bench import BenchOptions, BenchResult
from mlirtune.interfaces.engine import ExecutionResult, Observer
from mlirtune.interfaces.errors import MlirtuneError
from mlirtune.interfaces.lowering import Descriptor
from mlirtune.interfaces.runtime import Buffer, Placement, Runtime
from mlirtune.interfaces.workload import Workload
from mlirtune.ir.context import new_context
from mlirtune.ir.gpu import extract_ptx
from mlirtune.pipeline import run_pipeline
from mlirtune.targets.nvidia_gpu import NvidiaGPU


def compile_only(target: NvidiaGPU) -> MlirtuneError:
    """The error for anything that would run a kernel on `target`."""
    return MlirtuneError(
        f"{target.name} is compile-only for now; use `mlirtune opt --target {target.name}` "
        "to see the PTX",
        stage="target",
    )


class CompileOnlyRuntime(Runtime):
    """The runtime slot of a PtxEngine: a device that cannot hold buffers yet."""

    kind = NvidiaGPU.name

    def __init__(self, target: NvidiaGPU) -> None:
        super().__init__(target.index)
        self.target = target

    def allocate(self, name: str, initial: np.ndarray, placement: Placement) -> Buffer:
        raise compile_only(self.target)

    def release(self, buffer: Buffer) -> None:
        raise compile_only(self.target)

    def to_host(self, buffer: Buffer) -> np.ndarray:
        raise compile_only(self.target)


class PtxEngine(DescriptorEngine):
    """Lowers through the NVIDIA descriptors to PTX; execute and benchmark refuse."""

    def __init__(
        self,
        target: NvidiaGPU | None = None,
        pipeline: str | Path | Descriptor | None = None,
    ) -> None:
        """`pipeline`: a descriptor, its name or YAML path (default: looked up for each
        workload along the target's `nvidia/` folder). Spec libraries are for CPU targets,
        so none is applied."""
        target = target or NvidiaGPU()
        super().__init__(CompileOnlyRuntime(target), target, pipeline)

    # --- lowering ------------------------------------------------------------------------

    def lower_payload(
        self,
        workload: Workload,
        schedule_parameters: dict[str, int] | None = None,
        *,
        observer: Observer | None = None,
        print_after_all: bool = False,
    ) -> ir.Module:
        """The payload lowered to the host side plus a `gpu.binary` holding the PTX.
        `observer` sees the module after the schedule stage, then ("ptx", text); the final
        module is not shown, since its `gpu.binary` only repeats that text."""
        return self._lower(workload, schedule_parameters, observer, print_after_all)[1]

    def compile_to_ptx(
        self, workload: Workload, schedule_parameters: dict[str, int] | None = None
    ) -> str:
        """The PTX text of `workload`'s kernels; `schedule_parameters` override the
        selector's tiles (block_m, block_n, thread_m, thread_n)."""
        return self._lower(workload, schedule_parameters, None, False)[0]

    def _lower(
        self,
        workload: Workload,
        parameters: dict[str, int] | None,
        observer: Observer | None,
        print_after_all: bool,
    ) -> tuple[str, ir.Module]:
        def stages(stage: str, result: ir.Module | str) -> None:
            if observer and stage != "lowering":
                observer(stage, result)

        with new_context(), ir.Location.unknown():
            module, lowering = self.prepare(workload, parameters)
            run_pipeline(module, lowering, observer=stages, print_after_all=print_after_all)
            ptx = extract_ptx(module)
            if observer:
                observer("ptx", ptx)
            return ptx, module

    # --- running -------------------------------------------------------------------------

    def execute(
        self,
        workload: Workload,
        schedule_parameters: dict[str, int] | None = None,
        check_correctness: bool = True,
    ) -> ExecutionResult:
        raise compile_only(self.target)

    def benchmark(
        self,
        workload: Workload,
        schedule_parameters: dict[str, int] | None = None,
        check_correctness: bool = True,
        options: BenchOptions | None = None,
        timing_slot: AbstractContextManager[object] | None = None,
    ) -> BenchResult:
        raise compile_only(self.target)
