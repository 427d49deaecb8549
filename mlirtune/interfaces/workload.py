"""The Workload interface: a payload of fixed size, its schedule, inputs, reference and cost.

Callers (engines, the tuner, the memory check, baselines) hold a Workload and use only what
is declared here; `mlirtune.workloads.base.PayloadWorkload` implements the machinery the
built-in workloads share (cached inputs and reference, allocation, verification).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import ClassVar, Protocol

import numpy as np
from mlir import ir

from mlirtune.interfaces.dtype import DType
from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.lowering import Lowering
from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.runtime import Buffer, Placement, Runtime
from mlirtune.interfaces.target import Target
from mlirtune.interfaces.verification import VerificationResult

OptionValue = int | str | bool | float


@dataclass(frozen=True)
class ArgSpec:
    """One payload argument, in call order. Outputs are written in place by the kernel."""

    name: str
    shape: tuple[int, ...]
    dtype: DType
    is_output: bool = False
    placement: Placement = Placement.HOST

    @property
    def elements(self) -> int:
        """Element count, exact (a Python int never overflows, unlike numpy's int64)."""
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.elements * self.dtype.itemsize


@dataclass(frozen=True)
class Complexity:
    """Work done by one execution: floating-point operations and bytes moved."""

    flops: int
    bytes_read: int
    bytes_written: int


# Integer options that are not sizes and may be zero or negative (an axis from the end).
NON_SIZE_INTS = {"seed", "axis"}
SEED_LIMIT = 2**32  # numpy's generators take unsigned seeds (the CLI's --seed is as wide)


@dataclass(frozen=True)
class Param:
    """A constructor option that the CLI accepts as KEY=VALUE."""

    name: str
    kind: type
    default: OptionValue
    help: str
    choices: tuple[OptionValue, ...] | None = None

    def parse(self, text: str, owner: str) -> OptionValue:
        """Convert a command-line string, naming the key on failure."""
        value: OptionValue
        if self.kind is int:
            try:
                value = int(text)
            except ValueError:
                raise UsageError(f"{owner}: {self.name}={text!r} is not an integer") from None
        elif self.kind is bool:
            lowered = text.lower()
            if lowered not in {"0", "1", "true", "false", "yes", "no"}:
                raise UsageError(f"{owner}: {self.name}={text!r} is not a boolean")
            value = lowered in {"1", "true", "yes"}
        else:
            value = text
        self.check(value, owner)
        return value

    def check(self, value: OptionValue, owner: str) -> None:
        """Validate an already-typed value."""
        if self.kind is int and (isinstance(value, bool) or not isinstance(value, int)):
            raise UsageError(f"{owner}: {self.name} must be an integer, got {value!r}")
        if self.kind is int and self.name not in NON_SIZE_INTS and value <= 0:
            raise UsageError(f"{owner}: {self.name} must be positive, got {value}")
        if self.name == "seed" and not 0 <= value < SEED_LIMIT:
            raise UsageError(f"{owner}: seed must be from 0 to {SEED_LIMIT - 1}, got {value}")
        if self.choices is not None and value not in self.choices:
            allowed = ", ".join(str(c) for c in self.choices)
            raise UsageError(f"{owner}: {self.name}={value!r} is not one of {allowed}")


class RunsOn(Protocol):
    """What a workload needs of the engine running it: the runtime holding its buffers
    (every Engine has one)."""

    runtime: Runtime


class Workload(ABC):
    """A kernel of fixed size: payload IR, schedule, seeded inputs, reference and complexity.

    One object is reused across thousands of executions, so implementations cache their
    inputs and reference outputs."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    parameters: ClassVar[tuple[Param, ...]] = ()
    entry: str = "payload"

    @property
    def descriptor_name(self) -> str:
        """The descriptor looked up first for this workload: its name, unless its payload
        takes another op's form (a pointwise conv built as a matmul)."""
        return self.name

    @abstractmethod
    def describe(self) -> dict[str, OptionValue]:
        """A JSON-friendly identity: workload name plus its options."""

    def compile_key(self) -> str:
        """What decides the compiled kernel besides its schedule parameters (an engine's
        cache key): the identity, `describe`, unless that does not fix the payload."""
        return repr(self.describe())

    @abstractmethod
    def arguments(self) -> list[ArgSpec]:
        """Payload arguments in call order."""

    @abstractmethod
    def payload_module(self) -> ir.Module:
        """A new module holding the entry function; needs an active MLIR context."""

    @abstractmethod
    def schedule_module(
        self,
        parameters: dict[str, int] | None = None,
        target: Target | None = None,
        lowering: Lowering | None = None,
    ) -> ir.Module | None:
        """The transform module that schedules this payload with these schedule parameters
        on `target` (default: this host): what an engine's lowering applies (None: its
        pipeline has no schedule stage of its own). `lowering`: the plan the engine made
        for them, so that it is not made twice."""

    @abstractmethod
    def reference(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """Expected outputs (in output-argument order), computed with numpy."""

    @abstractmethod
    def get_complexity(self) -> Complexity:
        """FLOPs and bytes for one execution."""

    @property
    @abstractmethod
    def root(self) -> OpInfo | None:
        """The payload's first root op (None: a payload with nothing to schedule)."""

    @property
    @abstractmethod
    def inputs(self) -> list[np.ndarray]:
        """Reproducible input arrays (input arguments only, in call order), cached."""

    @abstractmethod
    def allocate(self, engine: RunsOn) -> AbstractContextManager[list[Buffer]]:
        """A context manager that allocates every argument on the engine's runtime and
        releases them on exit."""

    @abstractmethod
    def get_input_arrays(self, engine: RunsOn) -> list[Buffer]:
        """Handles to the allocated payload arguments, in call order (inside `allocate`)."""

    @abstractmethod
    def verify(self, engine: RunsOn) -> VerificationResult:
        """Compare the allocated outputs with the reference."""

    @abstractmethod
    def requirements(self) -> list[str]:
        """Shared libraries and runtimes the engine must provide."""

    @abstractmethod
    def numpy_baseline(self) -> Callable[[], object] | None:
        """A closure computing the same result with numpy, for side-by-side timing (None
        when there is no meaningful baseline)."""

    def torch_baseline(self) -> Callable[[], object] | None:
        """A closure computing the same result with PyTorch eager on the CPU (imported
        inside it: PyTorch is optional), for side-by-side timing; None where there is none."""
        return None

    def torch_compiled_baseline(self) -> Callable[[], object] | None:
        """`torch_baseline` through torch.compile, where the workload is a PyTorch module
        (an imported model); None for the others."""
        return None

    # --- memory estimates (mlirtune.memory checks them against the budget) ---------------

    @abstractmethod
    def reference_scratch_bytes(self) -> int:
        """Peak bytes `reference` allocates besides the outputs it returns."""

    @abstractmethod
    def reference_bytes(self) -> int:
        """Bytes the reference outputs are held in, once computed."""

    @abstractmethod
    def input_scratch_bytes(self) -> int:
        """Peak bytes `make_inputs` allocates besides the inputs it returns."""

    @abstractmethod
    def baseline_bytes(self) -> int:
        """Peak bytes `numpy_baseline` and one call of its closure allocate."""

    @property
    @abstractmethod
    def kernel_scratch_bytes(self) -> int:
        """Upper bound on what the compiled kernel allocates itself."""
