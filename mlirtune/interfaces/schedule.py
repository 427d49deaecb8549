"""The ScheduleFamily interface: one owner for everything about one kind of schedule.

A family owns its transform builder, its knobs with their defaults, the analytic parameter
selector per target kind, the z3 constraints on its knobs and its cost model. Pipeline
descriptors only bind its knobs to slots (`schedule: contraction {MR=$MR ...}`); targets
only supply facts. Adding a family means adding one module (or folder) and registering it
in mlirtune.schedules.registry.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import ClassVar, Self

import z3
from mlir import ir

from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.target import Target

Config = dict[str, int]
KnobVariables = dict[str, z3.ArithRef]
Domains = dict[str, tuple[int, ...]]
# derive(op, lanes): candidate values of a knob for `op`, `lanes` elements per vector.
Derivation = Callable[[OpInfo, int], Sequence[int]]


@dataclass(frozen=True)
class Knob:
    """A schedule parameter: its default, and how its candidate values follow from the root
    op and the target's vector width. `default` may depend on the op (e.g. its element
    size). `selected` says whether target selectors choose it (else the default stands);
    `minimum` is its smallest meaningful value (1 for sizes; 0 for a choice such as "no
    packing"). `searched=False` keeps it out of search spaces: its value comes from the
    target when a pipeline is lowered (Target.pipeline_values, e.g. THREADS).
    `alternatives` lists every value of a knob that names a code path or an order rather
    than a size: any other value means nothing, and is refused wherever it comes from."""

    name: str
    description: str
    default: int | Callable[[OpInfo], int]
    derive: Derivation
    selected: bool = True
    minimum: int = 1
    searched: bool = True
    alternatives: tuple[int, ...] | None = None

    def default_for(self, op: OpInfo) -> int:
        return self.default(op) if callable(self.default) else self.default

    def values(self, op: OpInfo, lanes: int) -> tuple[int, ...]:
        """Candidate values for `op` with `lanes` elements per vector, ascending, unique."""
        return tuple(sorted({int(v) for v in self.derive(op, lanes) if v >= self.minimum}))


@dataclass(frozen=True)
class KnobValues:
    """A family's knob values, typed: a frozen subclass per family with one int field per
    knob, named as the knob in lower case (`mr` for MR), so that a schedule reads
    `knobs.mr`. A Config (name -> value) stays the external form, for the tuner, spec
    libraries, descriptors and --param: `from_config` and `to_config` convert."""

    # Knob names are the fields' names upper-cased, unless the family names its knobs in
    # lower case itself (gpu_contraction's block_m).
    upper_case_names: ClassVar[bool] = True

    @classmethod
    def knob_name(cls, field: str) -> str:
        return field.upper() if cls.upper_case_names else field

    @classmethod
    def from_config(cls, config: Mapping[str, int]) -> Self:
        """The values of `config`, which names every knob and nothing else."""
        names = {cls.knob_name(f.name): f.name for f in fields(cls)}
        missing = [name for name in names if name not in config]
        unknown = [name for name in config if name not in names]
        if missing or unknown:
            problems = [f"missing {', '.join(missing)}"] if missing else []
            problems += [f"unknown {', '.join(unknown)}"] if unknown else []
            raise UsageError(
                f"{cls.__name__}: knob values {'; '.join(problems)} (knobs: {', '.join(names)})",
                stage="schedule",
            )
        return cls(**{field: config[name] for name, field in names.items()})

    def to_config(self) -> Config:
        """The values by knob name, in knob order."""
        return {self.knob_name(f.name): getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class Constraint:
    """A condition every valid config meets: `expr` is a z3 Boolean over the knobs' Ints;
    `description` says what it is and why, for reports and error messages."""

    name: str
    description: str
    expr: z3.BoolRef


Step = Callable[..., None]  # an IR rewrite: (module, **a descriptor stage's arguments)


class ScheduleFamily(ABC):
    """A parameterised schedule and everything that decides its parameters."""

    name: ClassVar[str]
    description: ClassVar[str]
    root_kinds: ClassVar[tuple[str, ...]]  # OpInfo kinds it schedules
    target_kinds: ClassVar[tuple[str, ...]]  # Target names its selector and model cover
    knobs: ClassVar[tuple[Knob, ...]]
    # The typed form of the knobs' values: one field per knob, in knob order.
    values_type: ClassVar[type[KnobValues]]
    # The family's own IR rewrites that no upstream pass performs, by the step name a
    # descriptor runs them under (`step: NAME {key=value}`).
    steps: ClassVar[Mapping[str, Step]] = {}
    # The root kinds whose ops this family recognises (`recognise`): each kind has one
    # owner, though other families may schedule it too (`root_kinds`).
    owns: ClassVar[tuple[str, ...]] = ()
    # Names (prefixes) of the ops this family alone describes: no other family is asked
    # about them, even where this one finds an op of them no root (an unsupported pool).
    claims: ClassVar[tuple[str, ...]] = ()

    def recognise(
        self, op: ir.Operation, loops: list[int], dtypes: tuple[str, ...]
    ) -> OpInfo | None:
        """The description of `op` (a static linalg op, its loop sizes and element types
        read) where it is a root op of a kind this family owns; None otherwise."""
        return None

    def root_flops(self, op: OpInfo) -> int:
        """FLOPs of one root op of a kind this family owns: 2 per multiply-add of a
        contraction or convolution, one per element read by the others."""
        return op.dims.get("ROWS", 1) * op.dims.get("COLS", 1)

    def summed_terms(self, op: OpInfo) -> int:
        """Terms each output element of such a root sums (K of a contraction, a row of a
        reduction): it scales the verification tolerance."""
        return op.dims.get("COLS", 1)

    @abstractmethod
    def defaults(self, op: OpInfo) -> Config:
        """Every knob's default for `op`."""

    @abstractmethod
    def parameters(self, op: OpInfo, values: Config | None = None) -> Config:
        """Defaults overlaid with `values`; unknown names or non-positive values fail."""

    @abstractmethod
    def build(self, op: OpInfo, parameters: Config) -> ir.Module:
        """The transform module (`__transform_main`) scheduling the root op `op`."""

    @abstractmethod
    def select(self, op: OpInfo, target: Target, fixed: Config | None = None) -> Config:
        """The analytic choice of the selected knobs for `op` on `target`. `fixed`: knob
        values the caller sets (e.g. --param); where the selector chooses between paths (a
        micro-kernel, say), it takes the one they name and chooses the rest for it."""

    @abstractmethod
    def lanes(self, op: OpInfo, target: Target) -> int:
        """Elements of `op`'s compute type per vector register (or per thread) of `target`."""

    @abstractmethod
    def constraints(
        self, op: OpInfo, target: Target, knobs: KnobVariables, domains: Domains
    ) -> list[Constraint]:
        """Named conditions on `knobs` (one z3 Int per knob ranging over `domains`)."""

    @abstractmethod
    def cost(self, op: OpInfo, target: Target, config: Config) -> float:
        """Estimated seconds per call of the kernel scheduled with `config`."""

    @abstractmethod
    def violations(self, op: OpInfo, target: Target, config: Config) -> list[str]:
        """Names of the constraints (and knob domains) `config` breaks on `target`."""
