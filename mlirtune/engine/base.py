"""The Engine interface: one way to lower, execute and benchmark any workload."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mlir import ir

from mlirtune.runtime import Runtime
from mlirtune.verify import VerificationResult

if TYPE_CHECKING:
    from mlirtune.bench.harness import BenchOptions
    from mlirtune.bench.result import BenchResult
    from mlirtune.workload import Workload


@dataclass(frozen=True)
class ExecutionResult:
    """One untimed execution and, if requested, its verification."""

    workload: dict[str, Any]
    parameters: dict[str, Any]
    verification: VerificationResult | None
    extra: dict[str, Any] = field(default_factory=dict)  # provenance: pipeline, notes, ...


class Engine(ABC):
    """Lowers a workload with a parameterised schedule and runs it on `runtime`."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    @abstractmethod
    def lower_payload(
        self, workload: Workload, schedule_parameters: dict[str, Any] | None = None
    ) -> ir.Module:
        """The payload lowered by the schedule with these parameters."""

    @abstractmethod
    def execute(
        self,
        workload: Workload,
        schedule_parameters: dict[str, Any] | None = None,
        check_correctness: bool = True,
    ) -> ExecutionResult:
        """Lower, allocate, run once, optionally verify, then deallocate."""

    @abstractmethod
    def benchmark(
        self,
        workload: Workload,
        schedule_parameters: dict[str, Any] | None = None,
        check_correctness: bool = True,
        options: BenchOptions | None = None,
    ) -> BenchResult:
        """Verify once (untimed), then time the kernel in a native loop."""
