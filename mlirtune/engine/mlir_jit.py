"""The MLIR JIT engine: transform interpreter -> LLVM dialect -> in-process ExecutionEngine."""

from __future__ import annotations

import ctypes
import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from mlir import ir
from mlir.execution_engine import ExecutionEngine
from mlir.runtime import get_ranked_memref_descriptor

from mlirtune.bench.harness import NativeTimer, verify_then_time
from mlirtune.bench.result import bench_result
from mlirtune.bench.timer import TIMER_ENTRY, add_timer
from mlirtune.contain import compiling, running
from mlirtune.contain.stages import cxx_reason
from mlirtune.engine.planned import DescriptorEngine
from mlirtune.interfaces.bench import BenchOptions, BenchResult
from mlirtune.interfaces.engine import ExecutionResult, Observer
from mlirtune.interfaces.errors import MlirtuneError
from mlirtune.interfaces.lowering import Descriptor, Lowering
from mlirtune.interfaces.workload import Workload
from mlirtune.ir.context import new_context
from mlirtune.ir.inspect import uses_amx_tiles
from mlirtune.memory import check_memory
from mlirtune.pipeline import run_pipeline
from mlirtune.pipeline.driver import schedule_failure_note
from mlirtune.pipeline.plan import MULTI_ROOT, plan_payload
from mlirtune.runtime import Buffer, HostRuntime, Runtime
from mlirtune.runtime.openmp import load_openmp, release_threads
from mlirtune.specs.specset import SpecSet
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.targets.tile_state import amx_refusal


@dataclass
class CompiledKernel:
    """A JIT-compiled payload plus its timer entry point."""

    engine: ExecutionEngine
    entry: str
    module: ir.Module
    lowering: Lowering

    def provenance(self) -> dict[str, Any]:
        """Which pipeline ran and where each parameter value came from."""
        return {
            "pipeline": str(self.lowering.descriptor.path),
            "parameter_sources": dict(self.lowering.sources),
            "config_source": self.lowering.config_source,
            "notes": list(self.lowering.notes),
            "memref_roots": [root.to_json() for root in self.lowering.memref_roots],
            "dispatches": [dispatch.to_json() for dispatch in self.lowering.dispatches],
        }

    def call(self, buffers: list[Buffer]) -> None:
        """Run the entry function once on `buffers` (the timer is the module's only way in:
        see mlirtune.bench.timer)."""
        self.timer(buffers)(1, 1)

    def timer(self, buffers: list[Buffer]) -> NativeTimer:
        """The native timer over `buffers`: (iterations, samples) -> nanoseconds per sample.
        The entry point, the operands' descriptors and each sample count's packed arguments
        are made once, not per call: building them took about 0.6 ms a call, which the
        benchmark core spent between samples."""
        entry = self.engine.lookup(TIMER_ENTRY)
        operands = [_pointer_to_descriptor(buffer.host) for buffer in buffers]
        iterations = ctypes.c_int64()
        calls: dict[int, tuple[np.ndarray, ctypes.Array]] = {}

        def time(count: int, samples: int) -> np.ndarray:
            if samples not in calls:
                out = np.zeros(samples, dtype=np.int64)
                arguments = [*operands, ctypes.pointer(iterations), _pointer_to_descriptor(out)]
                calls[samples] = (out, _packed(arguments))
            out, packed = calls[samples]
            iterations.value = count
            entry(packed)
            return out.copy()

        return time


class MlirJitEngine(DescriptorEngine):
    """Lowers through the target's pipeline descriptor and runs with MLIR's ExecutionEngine."""

    def __init__(
        self,
        runtime: Runtime | None = None,
        *,
        target: HostCPU | None = None,
        pipeline: str | Path | Descriptor | None = None,
        opt_level: int = 3,
        specs: SpecSet | None = None,
        use_specs: bool = True,
    ) -> None:
        """`specs`: the tuning-spec libraries to apply (default: the configured ones and
        the target's shipped defaults, loaded on first use); `use_specs=False` applies none,
        so the parameter selector decides (as the tuner's baseline does)."""
        super().__init__(runtime or HostRuntime(), target or HostCPU(), pipeline)
        if not isinstance(self.runtime, HostRuntime):
            raise MlirtuneError("the MLIR JIT engine runs on the host runtime only")
        self.opt_level = opt_level
        self.use_specs = use_specs
        self._specs = specs
        self._cache: dict[str, CompiledKernel] = {}

    # --- lowering ------------------------------------------------------------------------

    def lower_payload(
        self,
        workload: Workload,
        schedule_parameters: dict[str, int] | None = None,
        *,
        observer: Observer | None = None,
        print_after_all: bool = False,
    ) -> ir.Module:
        module, _ = self._lower(workload, schedule_parameters, False, observer, print_after_all)
        return module

    @property
    def specs(self) -> SpecSet | None:
        """The spec libraries this engine applies (None when disabled)."""
        if not self.use_specs:
            return None
        if self._specs is None:
            self._specs = SpecSet.for_target(self.target)
        return self._specs

    def _lower(
        self,
        workload: Workload,
        parameters: dict[str, int] | None,
        with_timer: bool,
        observer: Observer | None = None,
        print_after_all: bool = False,
    ) -> tuple[ir.Module, Lowering]:
        with new_context(), ir.Location.unknown():
            module, lowering = self.prepare(workload, parameters)
            timer = (lambda m: add_timer(m, workload.entry)) if with_timer else None
            try:
                run_pipeline(
                    module,
                    lowering,
                    observer=observer,
                    print_after_all=print_after_all,
                    after_schedules=timer,
                    schedule=lambda: workload.schedule_module(parameters, self.target, lowering),
                )
            except MlirtuneError as error:
                if error.stage != "schedule" or parameters or self.pipeline is not None:
                    raise self.explained(error, lowering) from None
                # A schedule the engine chose itself (its pipeline, the selector's or a
                # spec's config) is never the user's problem: the payload drops to the next
                # path that works, with a note. A pipeline, schedule file or parameters the
                # user gave fail as theirs.
                module, lowering = self._fall_back(workload, lowering, error, timer, observer)
            set_target_features(module, self.target.llvm_target_features())
            return module, lowering

    def _fall_back(
        self,
        workload: Workload,
        failed: Lowering,
        error: MlirtuneError,
        timer: Callable[[ir.Module], None] | None,
        observer: Observer | None = None,
    ) -> tuple[ir.Module, Lowering]:
        """Lower `workload` again after its schedule failed: split into dispatches, each
        scheduled by its own family (an epilogue the root's schedule could not take goes
        to a dispatch of its own), or where that fails too, whole and untuned."""
        if failed.descriptor.name != MULTI_ROOT:
            split = self._default([MULTI_ROOT])
            module, lowering = plan_payload(
                workload, self.target, self._default, split, self.specs, None
            )
            if lowering.dispatches:
                lowering.notes.append(schedule_failure_note(error, "split into dispatches"))
                try:
                    run_pipeline(module, lowering, observer=observer, after_schedules=timer)
                    return module, lowering
                except MlirtuneError:
                    pass
        module, lowering = self.prepare(workload, None)
        lowering.notes.append(schedule_failure_note(error))
        lowering.schedule_failed = True
        run_pipeline(module, lowering, observer=observer, after_schedules=timer, schedules=False)
        return module, lowering

    def compile(
        self, workload: Workload, schedule_parameters: dict[str, int] | None = None
    ) -> CompiledKernel:
        """Lower and JIT once per (workload, parameters); later calls hit the cache."""
        key = repr((workload.compile_key(), sorted((schedule_parameters or {}).items())))
        if key not in self._cache:
            module, lowering = self._lower(workload, schedule_parameters, with_timer=True)
            libraries = set(workload.requirements()) | set(self.runtime.requirements())
            if lowering.values.get("THREADS", 1) > 1:  # OpenMP loops
                libraries.add(load_openmp())
            if uses_amx_tiles(module):
                refusal = amx_refusal()  # asked once; a tile op without the grant faults
                if refusal:
                    raise MlirtuneError(
                        f"{refusal}: this kernel uses AMX tiles (e.g. UNIT=2 of the "
                        "contraction schedule), which this process may not",
                        stage="jit",
                    )
            try:
                with compiling("jit"):
                    engine = ExecutionEngine(
                        module, opt_level=self.opt_level, shared_libs=sorted(libraries)
                    )
                    # Code is materialised lazily; look the entry point up now so that
                    # unresolved symbols fail here, as a JIT error, not at the first call.
                    engine.lookup(TIMER_ENTRY)
            except RuntimeError as error:
                reason = cxx_reason()
                said = "LLVM's reason is printed above" if reason is None else reason
                raise MlirtuneError(
                    f"JIT compilation failed: {error} ({said or 'LLVM gave no reason'})",
                    stage="jit",
                ) from None
            self._cache[key] = CompiledKernel(engine, workload.entry, module, lowering)
        return self._cache[key]

    def clear_cache(self) -> None:
        """Drop every compiled kernel (and its JIT'd code), e.g. between tuning candidates."""
        self._cache.clear()

    # --- running -------------------------------------------------------------------------

    def execute(
        self,
        workload: Workload,
        schedule_parameters: dict[str, int] | None = None,
        check_correctness: bool = True,
    ) -> ExecutionResult:
        check_memory(workload, "run", verify=check_correctness)  # before anything is allocated
        kernel = self.compile(workload, schedule_parameters)
        with workload.allocate(self) as buffers:
            with running("run"):
                kernel.call(buffers)
            self.runtime.synchronize()
            release_threads()
            verification = workload.verify(self) if check_correctness else None
        return ExecutionResult(
            workload.describe(), dict(kernel.lowering.values), verification, kernel.provenance()
        )

    def benchmark(
        self,
        workload: Workload,
        schedule_parameters: dict[str, int] | None = None,
        check_correctness: bool = True,
        options: BenchOptions | None = None,
        timing_slot: AbstractContextManager[object] | None = None,
    ) -> BenchResult:
        check_memory(workload, "benchmark", verify=check_correctness)
        kernel = self.compile(workload, schedule_parameters)
        options = options or BenchOptions()
        with workload.allocate(self) as buffers:
            verify = (lambda: workload.verify(self)) if check_correctness else None
            seconds, verification = verify_then_time(
                kernel.timer(buffers), verify, options, timing_slot
            )
            release_threads()  # what is timed next gets the cores to itself
        return bench_result(
            workload=workload.describe(),
            parameters=kernel.lowering.values,
            seconds=seconds,
            complexity=workload.get_complexity(),
            verified=bool(verification and verification.ok and not verification.skipped),
            extra={"target": self.target.name, **kernel.provenance()},
        )


def set_target_features(module: ir.Module, features: list[str]) -> None:
    """Give every LLVM function with a body the target features `features` (LLVM compiles
    each function for its own features, so the JIT honours them)."""
    if not features:
        return
    attribute = ir.Attribute.parse(f"#llvm.target_features<{json.dumps(features)}>")

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "llvm.func" and op.regions[0].blocks:
            op.attributes["target_features"] = attribute
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)


def _pointer_to_descriptor(array: np.ndarray):
    # ctypes has no bf16: pass the storage as an unsigned integer array of the same width.
    if array.dtype.kind not in "biuf" or array.dtype.name == "bfloat16":
        array = array.view(f"u{array.dtype.itemsize}")
    return ctypes.pointer(ctypes.pointer(get_ranked_memref_descriptor(array)))


def _packed(arguments: list) -> ctypes.Array:
    """The argument array of a C-interface call: each argument as a void pointer."""
    return (ctypes.c_void_p * len(arguments))(*(ctypes.cast(a, ctypes.c_void_p) for a in arguments))
