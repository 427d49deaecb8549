"""Run a descriptor on a payload: fill slots, then apply each pass and schedule stage.

Slot values come from four sources, strongest first: values the caller gives explicitly,
a tuned config, the descriptor's flow (the target's parameter selector), and the
descriptor's defaults. The driver records which source filled each slot.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlir import ir

from mlirtune.errors import MlirtuneError, UsageError
from mlirtune.ir.context import parse_module, run_passes
from mlirtune.ir.interpret import interpret
from mlirtune.ir.roots import OpInfo
from mlirtune.ir.tensorize import MemrefRoot, tensorize_roots
from mlirtune.pipeline.descriptor import Descriptor, DescriptorError, Stage, resolve_stage
from mlirtune.schedules.builder import ENTRY_POINT
from mlirtune.schedules.library import ScheduleEntry, schedule_named
from mlirtune.targets.base import Target

Observer = Callable[[str, ir.Module], None]
Flow = Callable[[Descriptor, Target, list[OpInfo]], dict[str, int]]


@dataclass
class Lowering:
    """What a pipeline run used: slot values and where each came from."""

    descriptor: Descriptor
    roots: list[OpInfo]
    values: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    spec: str | None = None  # "spec:<library>:<entry>" when a spec entry gave the tuned values
    # What the user should know about how this payload was lowered, one sentence each
    # (e.g. a shipped spec entry tuned on another CPU); shown by run/bench, in --json.
    notes: list[str] = field(default_factory=list)
    # Root ops written on memrefs: brought to tensors for the schedules, or (when that
    # cannot be done) kept, with the schedule stages skipped (the generic path).
    memref_roots: list[MemrefRoot] = field(default_factory=list)

    @property
    def config_source(self) -> str:
        """Where the config came from, strongest first: explicit values (any `--param`),
        a spec entry, the parameter selector, or the descriptor's defaults."""
        sources = set(self.sources.values())
        if "explicit" in sources:
            return "explicit"
        if self.spec and "tuned" in sources:
            return self.spec
        return "selector" if "selector" in sources else "descriptor"


def select_flow(descriptor: Descriptor, target: Target, roots: list[OpInfo]) -> dict[str, int]:
    """Ask the target's parameter selector for every schedule stage and map the chosen
    schedule parameters onto the slots those parameters are bound to."""
    chosen: dict[str, int] = {}
    for stage in descriptor.stages:
        if stage.kind != "schedule" or stage.name.endswith(".mlir"):
            continue
        entry = _library_entry(stage)
        op = root_for(entry.root_kinds, roots, stage)
        selected = target.select_parameters(entry.name, op)
        for key, value in stage.arguments.items():
            if isinstance(value, str) and value.startswith("$") and key in selected:
                chosen[value[1:]] = selected[key]
    return chosen


FLOWS: dict[str, Flow] = {"select": select_flow}


def resolve_values(
    descriptor: Descriptor,
    target: Target,
    roots: list[OpInfo],
    explicit: dict[str, Any] | None = None,
    tuned: dict[str, Any] | None = None,
) -> Lowering:
    """Fill every slot of `descriptor` from the four sources, strongest last."""
    lowering = Lowering(descriptor, roots)
    unknown = sorted(set(explicit or {}) - set(descriptor.params))
    if unknown:
        raise UsageError(
            f"{descriptor.path.name}: unknown parameter(s) {', '.join(unknown)}; "
            f"this pipeline's parameters are {', '.join(descriptor.params) or 'none'}",
            stage="pipeline",
        )
    layers = [("descriptor", descriptor.params)]
    if descriptor.flow is not None:
        if descriptor.flow not in FLOWS:
            raise DescriptorError(
                f"{descriptor.path}: unknown flow {descriptor.flow!r}; known: {', '.join(FLOWS)}"
            )
        layers.append(("selector", FLOWS[descriptor.flow](descriptor, target, roots)))
    layers += [("tuned", tuned or {}), ("explicit", explicit or {})]
    for source, values in layers:
        for key, value in values.items():
            if value is not None and key in descriptor.params:
                lowering.values[key] = value
                lowering.sources[key] = source
    return lowering


def run_pipeline(
    module: ir.Module,
    lowering: Lowering,
    *,
    observer: Observer | None = None,
    print_after_all: bool = False,
    after_schedules: Callable[[ir.Module], None] | None = None,
) -> None:
    """Apply every stage of the descriptor to `module` in place; `observer` sees the module
    after each schedule stage and at the end. `after_schedules` runs once the last schedule
    stage is done (e.g. to add functions that schedules must not see)."""
    stages = lowering.descriptor.stages
    last_schedule = max((i for i, s in enumerate(stages) if s.kind == "schedule"), default=-1)
    if after_schedules and last_schedule < 0:
        after_schedules(module)
    generic_path = _bring_roots_to_tensors(module, lowering)
    for index, stage in enumerate(stages):
        if generic_path and _needs_tensors(stage):
            pass  # skipped: the payload's memref root ops would fail it
        elif (resolved := resolve_stage(stage, lowering.values)).kind == "pass":
            run_passes(
                module,
                f"builtin.module({resolved.name})",
                stage=resolved.origin,
                print_after_all=print_after_all,
            )
        else:
            apply_schedule(module, _schedule_module(resolved, lowering.roots), resolved.origin)
            if observer:
                observer(f"schedule {resolved.name}", module)
        if after_schedules and index == last_schedule:
            after_schedules(module)
    if observer:
        observer("lowering", module)


def _needs_tensors(stage: Stage) -> bool:
    """Library schedules tile with fusion and split reductions: they need tensor ops. A
    user's `.mlir` schedule gets the payload as written."""
    return stage.kind == "schedule" and not stage.name.endswith(".mlir")


def _bring_roots_to_tensors(module: ir.Module, lowering: Lowering) -> bool:
    """Rebuild memref root ops on tensors when a stage needs them; record what happened on
    `lowering`. True when they must stay on memrefs (the schedule stages are skipped)."""
    if not any(_needs_tensors(s) for s in lowering.descriptor.stages):
        return False
    lowering.memref_roots = tensorize_roots(module)
    for root in lowering.memref_roots:
        where = f"{root.op_name} ({root.kind}) at {root.location} is written on memrefs"
        if root.tensorized:
            note = f"{where}: brought to tensors for the schedule"
        else:
            note = (
                f"{where} and cannot be brought to tensors ({root.reason}): schedule stages "
                "skipped, lowered with the generic path"
            )
        if note not in lowering.notes:
            lowering.notes.append(note)
    return any(not r.tensorized for r in lowering.memref_roots)


def _schedule_module(stage: Stage, roots: list[OpInfo]) -> ir.Module:
    if stage.name.endswith(".mlir"):
        return parse_module(Path(stage.base_dir) / stage.name)
    entry = _library_entry(stage)
    for key, value in stage.arguments.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise DescriptorError(
                f"{stage.origin}: schedule {stage.name} parameter {key}={value!r} has a bad "
                "value type; expected an integer"
            )
    op = root_for(entry.root_kinds, roots, stage)
    return entry.build(op, entry.parameters(op, stage.arguments))


def _library_entry(stage: Stage) -> ScheduleEntry:
    """The library schedule a stage names; an unknown name is an error naming the stage."""
    try:
        return schedule_named(stage.name)
    except UsageError as error:
        raise DescriptorError(f"{stage.origin}: {error.args[0]}") from None


def root_for(kinds: tuple[str, ...], roots: list[OpInfo], stage: Stage) -> OpInfo:
    """The first root op a schedule can handle; an error names the stage otherwise."""
    for op in roots:
        if op.kind in kinds:
            return op
    found = ", ".join(op.kind for op in roots) or "none"
    raise MlirtuneError(
        f"{stage.origin}: schedule {stage.name} needs a {' or '.join(kinds)} root op; "
        f"the payload has: {found}",
        stage="schedule",
    )


def apply_schedule(payload: ir.Module, schedule: ir.Module, where: str = "") -> None:
    """Run the schedule's `__transform_main` on `payload` with the transform interpreter;
    a failure's error carries the interpreter's diagnostics, prefixed with `where`."""
    entry = next(
        (
            op
            for op in schedule.body.operations
            if op.operation.name == "transform.named_sequence"
            and ir.StringAttr(op.attributes["sym_name"]).value == ENTRY_POINT
        ),
        None,
    )
    if entry is None:
        raise UsageError(f"schedule has no @{ENTRY_POINT} named sequence", stage="schedule")
    interpret(payload, schedule, ENTRY_POINT, where)
