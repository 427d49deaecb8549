"""Pipeline value types: a descriptor's stages, and what one lowering of a payload used.

A Descriptor is a validated, include-expanded YAML pipeline (mlirtune.pipeline loads it);
a Lowering records the slot values a compile used, where each came from, and notes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from mlirtune.interfaces.op import OpInfo

SLOT = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
ParamValue = int | str | bool | None
# A schedule stage's argument: an integer, or a `$slot` until the slot is filled.
Argument = int | str | bool


@dataclass(frozen=True)
class Stage:
    """One pass, schedule, step or dispatch stage; `origin` is `file:line: stage N` for errors."""

    kind: str
    name: str
    arguments: dict[str, Argument]
    origin: str
    base_dir: Path

    @property
    def label(self) -> str:
        """`origin (kind name)`: where the stage is and what it runs, for errors."""
        return f"{self.origin} ({self.kind} {self.name})"

    def slots(self) -> set[str]:
        """Slot names this stage reads."""
        text = self.name if self.kind == "pass" else " ".join(map(str, self.arguments.values()))
        return set(SLOT.findall(text))


@dataclass(frozen=True)
class Descriptor:
    """A validated, include-expanded pipeline."""

    path: Path
    description: str
    flow: str | None
    params: dict[str, ParamValue]
    stages: list[Stage] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def has_schedule_stage(self) -> bool:
        """Whether a schedule (a family's, or a transform file) tiles what it lowers."""
        return any(stage.kind == "schedule" for stage in self.stages)


@dataclass(frozen=True)
class MemrefRoot:
    """A root op that was written on memrefs and what became of it."""

    op_name: str
    location: str
    kind: str
    tensorized: bool
    reason: str = ""  # why it stayed on memrefs

    def to_json(self) -> dict[str, str | bool]:
        return {
            "op": self.op_name,
            "location": self.location,
            "kind": self.kind,
            "tensorized": self.tensorized,
            "reason": self.reason,
        }


@dataclass
class DispatchPlan:
    """One dispatch of a split payload: its function, the kind that picked its pipeline,
    and the plan of that pipeline on the dispatch as a payload of its own."""

    function: str
    kind: str
    lowering: Lowering
    schedule_failed: bool = False  # set when its schedule fails to apply (see its notes)

    @property
    def scheduled(self) -> bool:
        """Whether a schedule family tiles it (else it is lowered as it is, untuned)."""
        return self.lowering.descriptor.has_schedule_stage and not self.schedule_failed

    def to_json(self) -> dict[str, object]:
        return {
            "function": self.function,
            "kind": self.kind,
            "pipeline": self.lowering.descriptor.name,
            "scheduled": self.scheduled,
            "config_source": self.lowering.config_source,
            "parameters": dict(self.lowering.values),
            "notes": list(self.lowering.notes),
        }


@dataclass
class Lowering:
    """What a pipeline run used: slot values and where each came from."""

    descriptor: Descriptor
    roots: list[OpInfo]
    values: dict[str, ParamValue] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    spec: str | None = None  # "spec:<library>:<entry>" when a spec entry gave the tuned values
    # What the user should know about how this payload was lowered, one sentence each
    # (e.g. a shipped spec entry tuned on another CPU); shown by run/bench, in --json.
    notes: list[str] = field(default_factory=list)
    # Root ops written on memrefs: brought to tensors for the schedules, or (when that
    # cannot be done) kept, with the schedule stages skipped (the generic path).
    memref_roots: list[MemrefRoot] = field(default_factory=list)
    # A payload split into dispatches (a `dispatch` stage): each one's own lowering plan.
    dispatches: list[DispatchPlan] = field(default_factory=list)
    # Set when the schedule the engine chose failed to apply and the payload was lowered
    # again without it (see its notes).
    schedule_failed: bool = False

    @property
    def config_source(self) -> str:
        """Where the config came from, strongest first: explicit values (any `--param`),
        a spec entry, the family's selector, values the descriptor sets, or else the
        family's knob defaults; `untuned` when its schedule failed and none applied."""
        if self.schedule_failed:
            return "untuned"
        sources = set(self.sources.values())
        if "explicit" in sources:
            return "explicit"
        if self.spec and "tuned" in sources:
            return self.spec
        for source in ("selector", "descriptor"):
            if source in sources:
                return source
        return "default"
