"""A JIT engine that misbehaves on chosen configs, to test tuning isolation.

The faults are real: a native segfault (a read of address 0 through ctypes), a loop that
never ends, and an output overwritten after the kernel ran, so verification fails.
Workers unpickle the engine factory, so it lives in an importable module.
"""

from __future__ import annotations

import ctypes
import functools

from mlirtune.engine.mlir_jit import MlirJitEngine
from mlirtune.interfaces.engine import ExecutionResult
from mlirtune.interfaces.errors import VerificationError
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.tune.worker import EngineFactory

Faults = dict[tuple, str]  # {sorted config items: "segfault" | "hang" | "wrong_result"}


class FaultyEngine(MlirJitEngine):
    def __init__(self, faults: Faults, **kwargs) -> None:
        super().__init__(**kwargs)
        self.faults = faults

    def benchmark(self, workload, schedule_parameters=None, check_correctness=True, **options):
        """A faulty config's verification run fails as `execute`'s does (and then refuses,
        as the engine's own does), before any timing."""
        if check_correctness and self._fault(schedule_parameters):
            verification = self.execute(workload, schedule_parameters).verification
            raise VerificationError(verification.summary(), stage="verify")
        return super().benchmark(workload, schedule_parameters, check_correctness, **options)

    def _fault(self, schedule_parameters) -> str | None:
        return self.faults.get(tuple(sorted((schedule_parameters or {}).items())))

    def execute(self, workload, schedule_parameters=None, check_correctness=True):
        fault = self._fault(schedule_parameters)
        if fault == "segfault":
            ctypes.string_at(0)
        if fault == "hang":
            while True:
                pass
        if fault != "wrong_result":
            return super().execute(workload, schedule_parameters, check_correctness)
        kernel = self.compile(workload, schedule_parameters)
        with workload.allocate(self) as buffers:
            kernel.call(buffers)
            buffers[-1].host[0, 0] += 1.0
            verification = workload.verify(self)
        return ExecutionResult(workload.describe(), dict(kernel.lowering.values), verification)


def _faulty_engine(
    faults: Faults, target: HostCPU, pipeline: str | None = None, **options
) -> FaultyEngine:
    return FaultyEngine(faults, target=target, pipeline=pipeline, **options)


def faulty_engines(faults: Faults) -> EngineFactory:
    """An EvaluatorSettings.engine whose engines inject `faults` (picklable)."""
    return functools.partial(_faulty_engine, faults)


def no_engine(target: HostCPU, pipeline: str | None = None, **options) -> FaultyEngine:
    """An EvaluatorSettings.engine that cannot make an engine: workers die while starting."""
    raise RuntimeError("no engine on this host")
