"""The MLIR JIT engine: transform interpreter -> LLVM dialect -> in-process ExecutionEngine."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from mlir import ir
from mlir.dialects.transform import interpreter
from mlir.execution_engine import ExecutionEngine
from mlir.runtime import get_ranked_memref_descriptor

from mlirtune.bench.harness import BenchOptions, run_benchmark
from mlirtune.bench.result import BenchResult
from mlirtune.bench.timer import TIMER_ENTRY, add_timer
from mlirtune.engine.base import Engine, ExecutionResult
from mlirtune.engine.lowering import host_pipeline
from mlirtune.errors import MlirtuneError, UsageError, VerificationError
from mlirtune.ir.context import new_context, run_passes
from mlirtune.ir.inspect import find_function
from mlirtune.runtime import Buffer, HostRuntime, Runtime
from mlirtune.schedules.builder import ENTRY_POINT

Observer = Callable[[str, ir.Module], None]


@dataclass
class CompiledKernel:
    """A JIT-compiled payload plus its timer entry point."""

    engine: ExecutionEngine
    entry: str
    module: ir.Module

    def call(self, buffers: list[Buffer]) -> None:
        """Run the entry function once on `buffers`."""
        self.engine.invoke(self.entry, *_memref_pointers(buffers))

    def time(self, buffers: list[Buffer], iterations: int, samples: int) -> np.ndarray:
        """Nanoseconds for `iterations` calls, `samples` times, measured natively."""
        out = np.zeros(samples, dtype=np.int64)
        args = [
            *_memref_pointers(buffers),
            ctypes.pointer(ctypes.c_int64(iterations)),
            _pointer_to_descriptor(out),
        ]
        self.engine.invoke(TIMER_ENTRY, *args)
        return out


class MlirJitEngine(Engine):
    """Lowers with the workload's transform schedule and runs through MLIR's ExecutionEngine."""

    def __init__(self, runtime: Runtime | None = None, opt_level: int = 3) -> None:
        super().__init__(runtime or HostRuntime())
        if not isinstance(self.runtime, HostRuntime):
            raise MlirtuneError("the MLIR JIT engine runs on the host runtime only")
        self.opt_level = opt_level
        self._cache: dict[str, CompiledKernel] = {}

    # --- lowering ------------------------------------------------------------------------

    def lower_payload(
        self,
        workload,
        schedule_parameters: dict[str, Any] | None = None,
        *,
        observer: Observer | None = None,
        print_after_all: bool = False,
    ) -> ir.Module:
        return self._lower(workload, schedule_parameters, False, observer, print_after_all)

    def _lower(self, workload, parameters, with_timer, observer=None, print_after_all=False):
        with new_context(), ir.Location.unknown():
            module = workload.payload_module()
            find_function(module, workload.entry)
            schedule = workload.schedule_module(parameters)
            if schedule is not None:
                apply_schedule(module, schedule)
            if observer:
                observer("schedule", module)
            if with_timer:
                add_timer(module, workload.entry)
            run_passes(module, host_pipeline(), stage="lower", print_after_all=print_after_all)
            if observer:
                observer("lower", module)
            return module

    def compile(self, workload, schedule_parameters=None) -> CompiledKernel:
        """Lower and JIT once per (workload, parameters); later calls hit the cache."""
        parameters = workload.resolve_parameters(schedule_parameters)
        key = repr((workload.describe(), sorted(parameters.items())))
        if key not in self._cache:
            module = self._lower(workload, parameters, with_timer=True)
            libraries = sorted(set(workload.requirements()) | set(self.runtime.requirements()))
            try:
                engine = ExecutionEngine(module, opt_level=self.opt_level, shared_libs=libraries)
                # Code is materialised lazily; look the entry points up now so that
                # unresolved symbols fail here, as a JIT error, not at the first call.
                for name in (workload.entry, TIMER_ENTRY):
                    engine.lookup(name)
            except RuntimeError as error:
                raise MlirtuneError(
                    f"JIT compilation failed: {error} (LLVM's reason is printed above)",
                    stage="jit",
                ) from None
            self._cache[key] = CompiledKernel(engine, workload.entry, module)
        return self._cache[key]

    # --- running -------------------------------------------------------------------------

    def execute(self, workload, schedule_parameters=None, check_correctness=True):
        kernel = self.compile(workload, schedule_parameters)
        with workload.allocate(self) as buffers:
            kernel.call(buffers)
            self.runtime.synchronize()
            verification = workload.verify(self) if check_correctness else None
        return ExecutionResult(
            workload.describe(), workload.resolve_parameters(schedule_parameters), verification
        )

    def benchmark(
        self,
        workload,
        schedule_parameters=None,
        check_correctness=True,
        options: BenchOptions | None = None,
    ) -> BenchResult:
        kernel = self.compile(workload, schedule_parameters)
        options = options or BenchOptions()
        with workload.allocate(self) as buffers:
            verification = None
            if check_correctness:  # once, untimed, before any timing
                kernel.call(buffers)
                verification = workload.verify(self)
                if not verification.ok and not verification.skipped:
                    raise VerificationError(verification.summary(), stage="verify")
            samples_ns = run_benchmark(
                lambda iterations, count: kernel.time(buffers, iterations, count), options
            )
        return BenchResult.from_samples(
            workload=workload.describe(),
            parameters=workload.resolve_parameters(schedule_parameters),
            seconds=samples_ns,
            complexity=workload.get_complexity(),
            verified=bool(verification and verification.ok and not verification.skipped),
        )


def apply_schedule(payload: ir.Module, schedule: ir.Module) -> None:
    """Run the schedule's entry sequence on `payload` with the transform interpreter."""
    entry = next(
        (
            op
            for op in schedule.body.operations
            if op.operation.name == "transform.named_sequence"
            and ir.StringAttr(op.attributes["sym_name"]).value == ENTRY_POINT
        ),
        None,
    )
    if entry is None:
        raise UsageError(f"schedule has no @{ENTRY_POINT} named sequence", stage="schedule")
    try:
        interpreter.apply_named_sequence(payload, entry, schedule)
    except (ValueError, ir.MLIRError) as error:
        raise MlirtuneError(f"schedule failed to apply: {error}", stage="schedule") from None


def _pointer_to_descriptor(array: np.ndarray):
    # ctypes has no bf16: pass the storage as an unsigned integer array of the same width.
    if array.dtype.kind not in "biuf" or array.dtype.name == "bfloat16":
        array = array.view(f"u{array.dtype.itemsize}")
    return ctypes.pointer(ctypes.pointer(get_ranked_memref_descriptor(array)))


def _memref_pointers(buffers: list[Buffer]) -> list:
    return [_pointer_to_descriptor(buffer.host) for buffer in buffers]
