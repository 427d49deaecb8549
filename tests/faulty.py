"""A host target whose engine misbehaves on chosen configs, to test tuning isolation.

The faults are real: a native segfault (a read of address 0 through ctypes), a loop that
never ends, and an output overwritten after the kernel ran, so verification fails.
Workers unpickle this target, so it lives in an importable module.
"""

from __future__ import annotations

import ctypes

from mlirtune.engine.base import ExecutionResult
from mlirtune.engine.mlir_jit import MlirJitEngine
from mlirtune.targets.host_cpu import HostCPU


class FaultyEngine(MlirJitEngine):
    def __init__(self, faults: dict[tuple, str], **kwargs) -> None:
        super().__init__(**kwargs)
        self.faults = faults

    def execute(self, workload, schedule_parameters=None, check_correctness=True):
        fault = self.faults.get(tuple(sorted((schedule_parameters or {}).items())))
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


class FaultyHost(HostCPU):
    """HostCPU whose engine injects `faults`: {sorted config items: fault name}."""

    def __init__(self, faults: dict[tuple, str]) -> None:
        super().__init__()
        self.faults = faults

    def engine(self, pipeline=None, **options):
        return FaultyEngine(self.faults, target=self, pipeline=pipeline, **options)
