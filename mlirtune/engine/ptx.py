"""The NVIDIA engine: a payload lowered through the target's descriptors to PTX, then run
on a CUDA device where one exists.

It plans like the host engine (descriptor lookup along `nvidia/`, slot values with their
sources) and runs the same driver; `nvidia/matmul.yaml` applies the `gpu_contraction`
schedule and `nvidia/lower_gpu.yaml` outlines, lowers and serializes the kernel with
`gpu-module-to-binary{format=isa}`, whose PTX text needs neither ptxas nor a GPU. The PTX
and the launches recorded during lowering make a GpuProgram, which the CUDA runtime
(mlirtune.runtime.cuda) loads and times; the same program saved to a file runs on a GPU
machine without MLIR (`python -m mlirtune.cli.gpu_run`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path

import numpy as np
from mlir import ir

from mlirtune.bench.harness import run_benchmark
from mlirtune.bench.result import bench_result
from mlirtune.engine.planned import DescriptorEngine
from mlirtune.interfaces.bench import BenchOptions, BenchResult
from mlirtune.interfaces.engine import ExecutionResult, Observer
from mlirtune.interfaces.errors import UsageError, VerificationError
from mlirtune.interfaces.gpu_program import GpuProgram, ProgramArgument
from mlirtune.interfaces.lowering import Descriptor
from mlirtune.interfaces.runtime import Buffer, Placement, Runtime
from mlirtune.interfaces.workload import Workload
from mlirtune.ir.context import new_context
from mlirtune.ir.gpu import extract_ptx, read_launches
from mlirtune.pipeline import run_pipeline
from mlirtune.runtime.cuda import CudaDevice, LoadedProgram, cuda_unavailable, device_count
from mlirtune.targets.nvidia_gpu import NvidiaGPU
from mlirtune.verify import absolute_tolerance
from mlirtune.workloads.base import PayloadWorkload


class NoDevice(Runtime):
    """The runtime slot of a PtxEngine on a host without the target's GPU: compiling
    works, and anything that needs the device says why there is none."""

    kind = NvidiaGPU.name

    def __init__(self, target: NvidiaGPU, reason: str) -> None:
        super().__init__(target.index)
        self.reason = reason

    def error(self) -> UsageError:
        return UsageError(
            f"no CUDA device {self.index} to run on: {self.reason}; `mlirtune opt --target "
            "nvidia-gpu` still prints the PTX",
            stage="target",
        )

    def allocate(self, name: str, initial: np.ndarray, placement: Placement) -> Buffer:
        raise self.error()

    def release(self, buffer: Buffer) -> None:
        raise self.error()

    def to_host(self, buffer: Buffer) -> np.ndarray:
        raise self.error()


class PtxEngine(DescriptorEngine):
    """Lowers through the NVIDIA descriptors to PTX, and runs on GPU `target.index`."""

    def __init__(
        self,
        target: NvidiaGPU | None = None,
        pipeline: str | Path | Descriptor | None = None,
        placements: Mapping[str, Placement] | None = None,
    ) -> None:
        """`pipeline`: a descriptor, its name or YAML path (default: looked up for each
        workload along the target's `nvidia/` folder). Spec libraries are for CPU targets,
        so none is applied. `placements` override where arguments live when timing
        starts, by name (the workloads declare the host)."""
        target = target or NvidiaGPU()
        count = device_count()
        runtime: Runtime = (
            CudaDevice(target.index, placements)
            if target.index < count
            else NoDevice(target, cuda_unavailable() or f"this host has {count} GPU(s)")
        )
        super().__init__(runtime, target, pipeline)

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
        return self.compile(workload, schedule_parameters).ptx

    def compile(
        self, workload: Workload, schedule_parameters: dict[str, int] | None = None
    ) -> GpuProgram:
        """The program that runs `workload` with these (or the selector's) tiles: its PTX,
        launches and arguments; `save` it to run it where there is a GPU but no MLIR."""
        return self._lower(workload, schedule_parameters, None, False)[0]

    def _lower(
        self,
        workload: Workload,
        parameters: dict[str, int] | None,
        observer: Observer | None,
        print_after_all: bool,
    ) -> tuple[GpuProgram, ir.Module]:
        def stages(stage: str, result: ir.Module | str) -> None:
            if observer and stage != "lowering":
                observer(stage, result)

        with new_context(), ir.Location.unknown():
            module, lowering = self.prepare(workload, parameters)
            run_pipeline(
                module,
                lowering,
                observer=stages,
                print_after_all=print_after_all,
                schedule=lambda: workload.schedule_module(parameters, self.target, lowering),
            )
            ptx = extract_ptx(module)
            if observer:
                observer("ptx", ptx)
            program = GpuProgram(
                chip=self.target.chip,
                ptx=ptx,
                launches=read_launches(module),
                arguments=program_arguments(workload),
                workload=workload.describe(),
                parameters=dict(lowering.values),
                flops=workload.get_complexity().flops,
            )
            return program, module

    # --- running -------------------------------------------------------------------------

    @contextmanager
    def _loaded(
        self, workload: Workload, parameters: dict[str, int] | None
    ) -> Iterator[tuple[GpuProgram, LoadedProgram, list[Buffer]]]:
        """The compiled program loaded on the device, with the workload's buffers there."""
        device = self.runtime
        if isinstance(device, NoDevice):
            raise device.error()
        assert isinstance(device, CudaDevice)
        program = self.compile(workload, parameters)
        with device.load(program) as loaded, workload.allocate(self) as buffers:
            yield program, loaded, buffers

    def execute(
        self,
        workload: Workload,
        schedule_parameters: dict[str, int] | None = None,
        check_correctness: bool = True,
    ) -> ExecutionResult:
        with self._loaded(workload, schedule_parameters) as (program, loaded, buffers):
            loaded.launch(buffers)
            verification = workload.verify(self) if check_correctness else None
        return ExecutionResult(
            workload.describe(), program.parameters, verification, self._provenance(buffers)
        )

    def benchmark(
        self,
        workload: Workload,
        schedule_parameters: dict[str, int] | None = None,
        check_correctness: bool = True,
        options: BenchOptions | None = None,
        timing_slot: AbstractContextManager[object] | None = None,
    ) -> BenchResult:
        """Verify once, then time graphs of back-to-back calls between CUDA events."""
        options = options or BenchOptions()
        with self._loaded(workload, schedule_parameters) as (program, loaded, buffers):
            verification = None
            if check_correctness:
                loaded.launch(buffers)
                verification = workload.verify(self)
                if not verification.ok and not verification.skipped:
                    raise VerificationError(verification.summary(), stage="verify")
            with timing_slot or nullcontext():
                seconds = run_benchmark(loaded.timer(buffers), options)
        return bench_result(
            workload=workload.describe(),
            parameters=program.parameters,
            seconds=seconds,
            complexity=workload.get_complexity(),
            verified=bool(verification and verification.ok and not verification.skipped),
            extra=self._provenance(buffers),
        )

    def _provenance(self, buffers: list[Buffer]) -> dict[str, object]:
        """The target, the GPU that ran, and where each argument lay when timing started."""
        device = self.runtime
        assert isinstance(device, CudaDevice)
        return {
            "target": self.target.name,
            "chip": self.target.chip,
            **device.fingerprint(),
            "placements": {buffer.name: str(buffer.placement) for buffer in buffers},
        }


def program_arguments(workload: Workload) -> tuple[ProgramArgument, ...]:
    """The workload's arguments with the tolerances its verification would apply."""
    length = workload.accumulation_length() if isinstance(workload, PayloadWorkload) else 1
    return tuple(
        ProgramArgument(
            name=spec.name,
            shape=tuple(spec.shape),
            dtype=np.dtype(spec.dtype.numpy).name,
            is_output=spec.is_output,
            atol=absolute_tolerance(spec.dtype, length) if spec.is_output else 0.0,
            rtol=spec.dtype.rtol if spec.is_output else 0.0,
        )
        for spec in workload.arguments()
    )


def program_data(workload: Workload) -> dict[str, np.ndarray]:
    """The workload's inputs and its reference outputs by argument name: what a runner
    without MLIR verifies a saved program with (mlirtune.runtime.gpu_run). The outputs are
    in their own type, not the float64 of the reference: that would double what travels
    to a GPU machine (a 2048^3 bf16 matmul: 48 MiB instead of 32) for digits far below
    the tolerance."""
    specs = workload.arguments()
    inputs = [spec for spec in specs if not spec.is_output]
    outputs = [spec for spec in specs if spec.is_output]
    references = workload.reference(workload.inputs)
    return {
        **{spec.name: array for spec, array in zip(inputs, workload.inputs, strict=True)},
        **{
            spec.name: np.asarray(array).astype(spec.dtype.numpy)
            for spec, array in zip(outputs, references, strict=True)
        },
    }
