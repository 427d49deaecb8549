"""The Workload interface: a payload of fixed size, its schedule, inputs, reference and cost.

One workload object is reused across thousands of executions, so its seeded inputs and its
reference outputs are computed once and cached on the object.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from mlir import ir

from mlirtune.errors import MlirtuneError, UsageError
from mlirtune.ir.dtypes import DType, dtype_named
from mlirtune.runtime import Buffer, Placement
from mlirtune.verify import VerificationResult, compare

if TYPE_CHECKING:
    from mlirtune.engine.base import Engine
    from mlirtune.ir.roots import OpInfo
    from mlirtune.schedules.library import ScheduleEntry


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


@dataclass(frozen=True)
class Param:
    """A constructor option that the CLI accepts as KEY=VALUE."""

    name: str
    kind: type
    default: Any
    help: str
    choices: tuple[Any, ...] | None = None

    def parse(self, text: str, owner: str) -> Any:
        """Convert a command-line string, naming the key on failure."""
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

    def check(self, value: Any, owner: str) -> None:
        """Validate an already-typed value."""
        if self.kind is int and (isinstance(value, bool) or not isinstance(value, int)):
            raise UsageError(f"{owner}: {self.name} must be an integer, got {value!r}")
        if self.kind is int and self.name not in NON_SIZE_INTS and value <= 0:
            raise UsageError(f"{owner}: {self.name} must be positive, got {value}")
        if self.choices is not None and value not in self.choices:
            allowed = ", ".join(str(c) for c in self.choices)
            raise UsageError(f"{owner}: {self.name}={value!r} is not one of {allowed}")


# Integer options that are not sizes and may be zero.
NON_SIZE_INTS = {"seed"}

# Options every built-in workload shares.
SEED_PARAM = Param("seed", int, 0, "input RNG seed")
FLOAT_DTYPE_PARAM = Param("dtype", str, "f32", "element type", ("f32", "f64"))


class Workload(ABC):
    """A kernel of fixed size: payload IR, schedule, seeded inputs, reference and complexity."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    parameters: ClassVar[tuple[Param, ...]] = ()
    entry: str = "payload"

    def __init__(self, **options: Any) -> None:
        known = {p.name: p for p in self.parameters}
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise UsageError(
                f"{self.name}: unknown option(s) {', '.join(unknown)}; "
                f"known: {', '.join(known) or 'none'}"
            )
        self.options = {p.name: options.get(p.name, p.default) for p in self.parameters}
        for param in self.parameters:
            param.check(self.options[param.name], self.name)
        self._buffers: list[Buffer] | None = None

    @classmethod
    def from_strings(cls, pairs: dict[str, str]) -> Workload:
        """Build from command-line KEY=VALUE strings, parsing each by its declared type."""
        known = {p.name: p for p in cls.parameters}
        parsed = {}
        for key, text in pairs.items():
            if key not in known:
                raise UsageError(
                    f"{cls.name}: unknown key {key!r}; known: {', '.join(known) or 'none'}"
                )
            parsed[key] = known[key].parse(text, cls.name)
        return cls(**parsed)

    def __getstate__(self) -> dict[str, Any]:
        """Pickle the options only: cached inputs, reference and IR facts are rebuilt on
        demand, so sending a workload to a worker process stays cheap."""
        state = dict(self.__dict__)
        for cached in ("root", "inputs", "reference_outputs"):
            state.pop(cached, None)
        state["_buffers"] = None
        return state

    def describe(self) -> dict[str, Any]:
        """A JSON-friendly identity: workload name plus its options."""
        return {"name": self.name, **self.options}

    # --- what each workload defines -------------------------------------------------------

    @abstractmethod
    def arguments(self) -> list[ArgSpec]:
        """Payload arguments in call order."""

    @abstractmethod
    def payload_module(self) -> ir.Module:
        """A new module holding the entry function; needs an active MLIR context."""

    @abstractmethod
    def reference(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """Expected outputs (in output-argument order), computed with numpy."""

    @abstractmethod
    def get_complexity(self) -> Complexity:
        """FLOPs and bytes for one execution."""

    @cached_property
    def root(self) -> OpInfo | None:
        """The payload's first root op, inspected once through the bindings."""
        from mlirtune.ir.context import new_context
        from mlirtune.ir.roots import find_roots

        with new_context(), ir.Location.unknown():
            roots = find_roots(self.payload_module())
        return roots[0][1] if roots else None

    def schedule_entry(self) -> ScheduleEntry | None:
        """The library schedule for this payload's root op (None: nothing to schedule)."""
        from mlirtune.schedules.library import SCHEDULES

        if self.root is None:
            return None
        return next((e for e in SCHEDULES.values() if self.root.kind in e.root_kinds), None)

    def default_schedule_parameters(self) -> dict[str, int]:
        """The library defaults of this workload's schedule."""
        entry = self.schedule_entry()
        return entry.defaults(self.root) if entry else {}

    def resolve_parameters(self, parameters: dict[str, Any] | None) -> dict[str, Any]:
        """Defaults overlaid with `parameters`; an unknown name is an error naming it."""
        entry = self.schedule_entry()
        if entry is None:
            if parameters:
                raise UsageError(f"{self.name} has no schedule parameters", stage="schedule")
            return {}
        return entry.parameters(self.root, parameters)

    def schedule_module(self, parameters: dict[str, Any] | None = None) -> ir.Module | None:
        """A new transform module for `parameters`; the payload must have its root ops
        annotated (mlirtune.ir.roots.annotate_roots), as every pipeline does first."""
        entry = self.schedule_entry()
        return entry.build(self.root, self.resolve_parameters(parameters)) if entry else None

    def numpy_baseline(self) -> Callable[[], object] | None:
        """A closure computing the same result with numpy in the workload's dtype, for
        side-by-side timing (None when there is no meaningful baseline)."""
        return None

    def accumulation_length(self) -> int:
        """Terms summed per output element; scales the absolute verification tolerance."""
        return 1

    # --- memory estimates (mlirtune.memory checks them against the budget) ---------------

    def reference_scratch_bytes(self) -> int:
        """Peak bytes `reference` allocates besides the outputs it returns. Generic: a float64
        copy of every input and one float64 temporary per output element."""
        return 8 * sum(spec.elements for spec in self.arguments())

    def baseline_bytes(self) -> int:
        """Peak bytes `numpy_baseline` and one call of its closure allocate besides the
        cached inputs. Generic: every output in its dtype twice (result and temporary)."""
        return 2 * sum(spec.nbytes for spec in self.arguments() if spec.is_output)

    @cached_property
    def kernel_scratch_bytes(self) -> int:
        """Upper bound on what the compiled kernel allocates itself, read from the payload."""
        from mlirtune.ir.context import new_context
        from mlirtune.memory import payload_scratch_bytes

        with new_context(), ir.Location.unknown():
            return payload_scratch_bytes(self.payload_module())

    def requirements(self) -> list[str]:
        """Shared libraries and runtimes the engine must provide."""
        from mlirtune.toolchain import runner_library

        return [runner_library("mlir_c_runner_utils")]

    # --- shared machinery -----------------------------------------------------------------

    @property
    def dtype(self) -> DType:
        """The element type named by the `dtype` option (built-in workloads all have one)."""
        return dtype_named(self.options["dtype"])

    @property
    def seed(self) -> int:
        return int(self.options.get("seed", 0))

    def make_inputs(self) -> list[np.ndarray]:
        """Seeded random inputs in [-1, 1); override for inputs with structure."""
        rng = np.random.default_rng(self.seed)
        return [
            rng.uniform(-1.0, 1.0, size=spec.shape).astype(spec.dtype.numpy)
            for spec in self.arguments()
            if not spec.is_output
        ]

    @cached_property
    def inputs(self) -> list[np.ndarray]:
        """Cached, reproducible input arrays (input arguments only, in call order)."""
        return self.make_inputs()

    @cached_property
    def reference_outputs(self) -> list[np.ndarray]:
        """Cached reference outputs."""
        return self.reference(self.inputs)

    @contextmanager
    def allocate(self, engine: Engine) -> Iterator[list[Buffer]]:
        """Allocate every argument on the engine's runtime; outputs start as NaN so a kernel
        that skips writing them fails verification (filled from a broadcast NaN, so no
        output-sized array is needed besides the buffer)."""
        runtime = engine.runtime
        inputs = iter(self.inputs)
        buffers = []
        try:
            for spec in self.arguments():
                initial = (
                    np.broadcast_to(np.array(np.nan, dtype=spec.dtype.numpy), spec.shape)
                    if spec.is_output
                    else next(inputs)
                )
                buffers.append(runtime.allocate(spec.name, initial, spec.placement))
            self._buffers = buffers
            yield buffers
        finally:
            self._buffers = None
            for buffer in buffers:
                runtime.release(buffer)

    def get_input_arrays(self, engine: Engine) -> list[Buffer]:
        """Handles to the allocated payload arguments, in call order (inside `allocate`)."""
        if self._buffers is None:
            raise MlirtuneError(f"{self.name}: get_input_arrays called outside allocate()")
        return self._buffers

    def verify(self, engine: Engine) -> VerificationResult:
        """Compare the allocated outputs with the cached reference."""
        buffers = self.get_input_arrays(engine)
        specs = self.arguments()
        outputs = [
            (spec, engine.runtime.to_host(buf))
            for spec, buf in zip(specs, buffers, strict=True)
            if spec.is_output
        ]
        return compare(outputs, self.reference_outputs, self.accumulation_length())
