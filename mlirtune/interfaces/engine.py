"""The Engine interface: one way to lower, execute and benchmark any workload."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from mlir import ir

from mlirtune.interfaces.bench import BenchOptions, BenchResult
from mlirtune.interfaces.lowering import Lowering
from mlirtune.interfaces.runtime import Runtime
from mlirtune.interfaces.verification import VerificationResult
from mlirtune.interfaces.workload import Workload

# observer(stage, result): the module after a schedule stage or the whole lowering, or the
# text of a final artifact (e.g. "ptx").
Observer = Callable[[str, ir.Module | str], None]


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
    def plan(
        self, workload: Workload, schedule_parameters: dict[str, int] | None = None
    ) -> Lowering:
        """The pipeline `lower_payload` would run and every slot value with its source
        (explicit, a spec entry, the selector, a default), without lowering anything."""

    def broken_constraints(self, lowering: Lowering) -> list[str]:
        """The constraints of the schedule family that a planned config breaks (explicit
        parameters may); none where the engine checks none."""
        return []

    @abstractmethod
    def lower_payload(
        self,
        workload: Workload,
        schedule_parameters: dict[str, int] | None = None,
        *,
        observer: Observer | None = None,
        print_after_all: bool = False,
    ) -> ir.Module:
        """The payload lowered by the schedule with these parameters; `observer` sees each
        stage's result, `print_after_all` prints the IR after every pass."""

    @abstractmethod
    def execute(
        self,
        workload: Workload,
        schedule_parameters: dict[str, int] | None = None,
        check_correctness: bool = True,
    ) -> ExecutionResult:
        """Lower, allocate, run once, optionally verify, then deallocate."""

    @abstractmethod
    def benchmark(
        self,
        workload: Workload,
        schedule_parameters: dict[str, int] | None = None,
        check_correctness: bool = True,
        options: BenchOptions | None = None,
        timing_slot: AbstractContextManager[object] | None = None,
    ) -> BenchResult:
        """Verify once (not a sample), then time the kernel in a native loop, on the same
        buffers. `timing_slot` is entered after the verification and held while timing: a
        caller that needs a resource only to time (the tuner's benchmark core) takes it
        there."""
