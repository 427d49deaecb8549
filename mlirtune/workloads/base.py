"""PayloadWorkload: the machinery built-in workloads share.

A payload built in Python, seeded numpy inputs and a numpy reference, both computed once and
cached on the object; allocation on the engine's runtime, verification, memory estimates and
the schedule module of the pipeline that lowers it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cached_property
from typing import Any

import numpy as np
from mlir import ir
from threadpoolctl import threadpool_limits

from mlirtune.interfaces.dtype import DType, dtype_named
from mlirtune.interfaces.errors import MlirtuneError, UsageError
from mlirtune.interfaces.lowering import Lowering
from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.runtime import Buffer
from mlirtune.interfaces.target import Target
from mlirtune.interfaces.verification import VerificationResult
from mlirtune.interfaces.workload import OptionValue, Param, RunsOn, Workload
from mlirtune.ir.context import new_context
from mlirtune.memory import payload_scratch_bytes
from mlirtune.pipeline.plan import planned_schedule
from mlirtune.schedules.roots import find_roots
from mlirtune.toolchain import runner_library
from mlirtune.verify import compare

# Options every built-in workload shares.
SEED_PARAM = Param("seed", int, 0, "input RNG seed")
FLOAT_DTYPE_PARAM = Param("dtype", str, "f32", "element type", ("f32", "f64"))


class PayloadWorkload(Workload):
    """A Workload whose subclasses define `arguments`, `payload_module`, `reference` and
    `get_complexity`; everything else is derived from those."""

    # A digest of the IR text the workload was made from, where its options do not fix
    # that IR (an imported module is named by its class, a dispatch by its function).
    ir_digest: str = ""

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
    def from_strings(cls, pairs: dict[str, str]) -> PayloadWorkload:
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
        for cached in ("roots", "inputs", "reference_outputs"):
            state.pop(cached, None)
        state["_buffers"] = None
        return state

    def describe(self) -> dict[str, OptionValue]:
        """A JSON-friendly identity: workload name plus its options."""
        return {"name": self.name, **self.options}

    def compile_key(self) -> str:
        """The identity, and the IR's digest where the options do not fix it: two modules
        of one class name compile apart."""
        return f"{super().compile_key()} {self.ir_digest}".rstrip()

    @cached_property
    def roots(self) -> list[OpInfo]:
        """The payload's root ops in program order, inspected once through the bindings."""
        with new_context(), ir.Location.unknown():
            return [info for _, info in find_roots(self.payload_module())]

    @property
    def root(self) -> OpInfo | None:
        """The payload's first root op."""
        return self.roots[0] if self.roots else None

    def schedule_module(
        self,
        parameters: dict[str, int] | None = None,
        target: Target | None = None,
        lowering: Lowering | None = None,
    ) -> ir.Module | None:
        """See Workload.schedule_module (needs an active context; mlirtune.pipeline.plan)."""
        return planned_schedule(self, parameters, target, lowering=lowering)

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

    def reference_bytes(self) -> int:
        """Generic: every output as float64 (the reference is computed in float64)."""
        return 8 * sum(spec.elements for spec in self.arguments() if spec.is_output)

    def input_scratch_bytes(self) -> int:
        """Generic: each input is drawn as float64 before it is cast (`make_inputs`)."""
        return 8 * max((s.elements for s in self.arguments() if not s.is_output), default=0)

    def baseline_bytes(self) -> int:
        """Peak bytes `numpy_baseline` and one call of its closure allocate besides the
        cached inputs. Generic: every output in its dtype twice (result and temporary)."""
        return 2 * sum(spec.nbytes for spec in self.arguments() if spec.is_output)

    @cached_property
    def kernel_scratch_bytes(self) -> int:
        """Upper bound on what the compiled kernel allocates itself, read from the payload."""
        with new_context(), ir.Location.unknown():
            return payload_scratch_bytes(self.payload_module())

    def requirements(self) -> list[str]:
        """Shared libraries and runtimes the engine must provide."""
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
        """Seeded random inputs in [-1, 1), integers over their whole range; override for
        inputs with structure."""
        rng = np.random.default_rng(self.seed)
        return [
            _random(rng, spec.shape, spec.dtype) for spec in self.arguments() if not spec.is_output
        ]

    @cached_property
    def inputs(self) -> list[np.ndarray]:
        """Cached, reproducible input arrays (input arguments only, in call order)."""
        return self.make_inputs()

    @cached_property
    def reference_outputs(self) -> list[np.ndarray]:
        """Cached reference outputs, computed on one BLAS thread: OpenBLAS's threads spin for
        about 0.1 s after a call, and took a core from the parallel kernel timed next (a
        two-thread convolution's first samples ran 4x slower)."""
        with threadpool_limits(limits=1):
            return self.reference(self.inputs)

    @contextmanager
    def allocate(self, engine: RunsOn) -> Iterator[list[Buffer]]:
        """Allocate every argument on the engine's runtime; outputs start as NaN (-1 for
        integers) so a kernel that skips writing them fails verification (filled from a
        broadcast value, so no output-sized array is needed besides the buffer)."""
        runtime = engine.runtime
        inputs = iter(self.inputs)
        buffers = []
        try:
            for spec in self.arguments():
                initial = (
                    np.broadcast_to(
                        np.array(spec.dtype.unwritten, dtype=spec.dtype.numpy), spec.shape
                    )
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

    def get_input_arrays(self, engine: RunsOn) -> list[Buffer]:
        """Handles to the allocated payload arguments, in call order (inside `allocate`)."""
        if self._buffers is None:
            raise MlirtuneError(f"{self.name}: get_input_arrays called outside allocate()")
        return self._buffers

    def verify(self, engine: RunsOn) -> VerificationResult:
        """Compare the allocated outputs with the cached reference."""
        buffers = self.get_input_arrays(engine)
        specs = self.arguments()
        outputs = [
            (spec, engine.runtime.to_host(buf))
            for spec, buf in zip(specs, buffers, strict=True)
            if spec.is_output
        ]
        return compare(outputs, self.reference_outputs, self.accumulation_length())


def _random(rng: np.random.Generator, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
    """Seeded values of `dtype`: uniform in [-1, 1), or integers over the type's range."""
    if dtype.is_integer:
        bounds = np.iinfo(dtype.numpy)
        return rng.integers(bounds.min, bounds.max, size=shape, dtype=dtype.numpy, endpoint=True)
    return rng.uniform(-1.0, 1.0, size=shape).astype(dtype.numpy)
