"""Run a descriptor on a payload: fill slots, then apply each pass, schedule and step stage.

Slot values come from these sources, strongest first: slots the target fills itself (e.g.
an NVIDIA chip name), values the caller gives explicitly, a tuned config, the descriptor's
flow (the schedule family's selector for the target), a value the descriptor itself sets,
and the default of the family knob a slot is bound to. The driver records which source
filled each slot.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from mlir import ir

from mlirtune.contain import compiling
from mlirtune.contain.forked import run_forked
from mlirtune.contain.stages import contained
from mlirtune.dispatch.functions import replace_function, standalone_module
from mlirtune.interfaces.engine import Observer
from mlirtune.interfaces.errors import MlirtuneError, UsageError
from mlirtune.interfaces.lowering import Descriptor, Lowering, Stage
from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.schedule import ScheduleFamily
from mlirtune.interfaces.target import Target
from mlirtune.ir.context import parse_module, run_passes, verify_lowered
from mlirtune.ir.inspect import largest_vector
from mlirtune.ir.interpret import interpret
from mlirtune.ir.tensorize import tensorize_roots
from mlirtune.pipeline.descriptor import DescriptorError, resolve_stage
from mlirtune.pipeline.steps import step_named
from mlirtune.schedules.builder import ENTRY_POINT
from mlirtune.schedules.registry import family_named

# Elements of the largest vector a scheduled dispatch may hold (a 64 x 64 register block).
LARGEST_VECTOR = 4096

Flow = Callable[[Descriptor, Target, list[OpInfo], dict[str, Any]], dict[str, int]]


def select_flow(
    descriptor: Descriptor, target: Target, roots: list[OpInfo], explicit: dict[str, Any]
) -> dict[str, int]:
    """Ask every library schedule stage's family to select its knobs for `target`, around
    the `explicit` slot values its knobs are bound to, and map the chosen values onto the
    slots those knobs are bound to."""
    chosen: dict[str, int] = {}
    for stage in descriptor.stages:
        if stage.kind != "schedule" or stage.name.endswith(".mlir"):
            continue
        family = _library_family(stage)
        op = root_for(family.root_kinds, roots, stage)
        slots = {key: value[1:] for key, value in stage.arguments.items() if _is_slot(value)}
        fixed = {key: explicit[slot] for key, slot in slots.items() if slot in explicit}
        chosen.update(_bound(stage, family.select(op, target, fixed)))
    return chosen


def family_defaults(descriptor: Descriptor, roots: list[OpInfo]) -> dict[str, int]:
    """The defaults of the family knobs that library schedule stages bind to slots, by slot;
    a stage without a root op of its family's kinds gives none (it fails when applied)."""
    defaults: dict[str, int] = {}
    for stage in descriptor.stages:
        if stage.kind != "schedule" or stage.name.endswith(".mlir"):
            continue
        family = _library_family(stage)
        op = next((op for op in roots if op.kind in family.root_kinds), None)
        if op is not None:
            defaults.update(_bound(stage, family.defaults(op)))
    return defaults


def _bound(stage: Stage, knob_values: dict[str, int]) -> dict[str, int]:
    """`knob_values` of the knobs `stage` binds to a slot, keyed by that slot."""
    return {
        value[1:]: knob_values[key]
        for key, value in stage.arguments.items()
        if _is_slot(value) and key in knob_values
    }


def _is_slot(value: object) -> bool:
    """Whether a stage argument is bound to a pipeline slot (`$NAME`)."""
    return isinstance(value, str) and value.startswith("$")


FLOWS: dict[str, Flow] = {"select": select_flow}


def resolve_values(
    descriptor: Descriptor,
    target: Target,
    roots: list[OpInfo],
    explicit: dict[str, Any] | None = None,
    tuned: dict[str, Any] | None = None,
) -> Lowering:
    """Fill every slot of `descriptor` from its sources, strongest last: the family
    defaults, the descriptor's own values, the selector (`flow: select`, unless a tuned
    config is given: that is complete), a tuned config, explicit values, and the slots the
    target fills itself, where those did not set a value it accepts."""
    lowering = Lowering(descriptor, roots)
    unknown = sorted(set(explicit or {}) - set(descriptor.params))
    if unknown:
        raise UsageError(
            f"{descriptor.path.name}: unknown parameter(s) {', '.join(unknown)}; "
            f"this pipeline's parameters are {', '.join(descriptor.params) or 'none'}",
            stage="pipeline",
        )
    owned = target.pipeline_values()
    # A config may restate a target's value (a tuned config holds every slot), or take one
    # the target accepts (fewer threads than it has), nothing else.
    clash = sorted(
        k for k, v in (explicit or {}).items() if k in owned and not target.accepts(k, v)
    )
    if clash:
        raise UsageError(
            f"{', '.join(clash)}: set by the target ({target!r}), not by schedule parameters",
            stage="pipeline",
        )
    layers = [("default", family_defaults(descriptor, roots)), ("descriptor", descriptor.params)]
    if descriptor.flow is not None and descriptor.flow not in FLOWS:
        raise DescriptorError(
            f"{descriptor.path}: unknown flow {descriptor.flow!r}; known: {', '.join(FLOWS)}"
        )
    if descriptor.flow is not None and not tuned:
        # A tuned config is one point of the space, measured with its other knobs at their
        # defaults: the selector does not fill the knobs it leaves out (e.g. a knob added
        # to the family after the entry was tuned).
        selected = FLOWS[descriptor.flow](descriptor, target, roots, explicit or {})
        layers.append(("selector", selected))
    layers += [("tuned", tuned or {}), ("explicit", explicit or {})]
    chosen = {**(tuned or {}), **(explicit or {})}
    kept = {k for k, v in chosen.items() if k in owned and target.accepts(k, v)}
    layers.append(("target", {k: v for k, v in owned.items() if k not in kept}))
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
    schedule: Callable[[], ir.Module | None] | None = None,
    schedules: bool = True,
) -> None:
    """Apply every stage of the descriptor to `module` in place; `observer` sees the module
    after each schedule stage and at the end. `after_schedules` runs once the last schedule
    stage is done (e.g. to add functions that schedules must not see). `schedule` gives the
    first schedule stage's transform module, asked when that stage runs (an engine asks
    the workload: Workload.schedule_module); the stages build the others. `schedules=False`
    skips the library's schedule stages (the untuned path, e.g. after one failed). Where
    passes skip their verifier (COMPILE_CHECKS), the lowered module is verified once at the
    end."""
    given = [schedule] if schedule is not None else []
    stages = lowering.descriptor.stages
    last_schedule = _last_stage(stages, ("schedule", "dispatch"))
    if after_schedules and last_schedule < 0:
        after_schedules(module)
    with compiling("lower"):
        generic_path = _bring_roots_to_tensors(module, lowering) or not schedules
        for index, stage in enumerate(stages):
            if not (generic_path and _needs_tensors(stage)):  # else its memref roots fail it
                if stage.kind == "schedule" and not stage.name.endswith(".mlir"):
                    # Before its slots: a family with no root here has no defaults for them.
                    root_for(_library_family(stage).root_kinds, lowering.roots, stage)
                with compiling(stage.label):
                    resolved = resolve_stage(stage, lowering.values)
                    built = given.pop(0)() if given and stage.kind == "schedule" else None
                    _run_stage(module, resolved, lowering, observer, print_after_all, built)
            if after_schedules and index == last_schedule:
                after_schedules(module)
        verify_lowered(module)
    if observer:
        observer("lowering", module)


def _run_stage(
    module: ir.Module,
    resolved: Stage,
    lowering: Lowering,
    observer: Observer | None,
    print_after_all: bool,
    schedule: ir.Module | None = None,
) -> None:
    """Apply one stage (its slots filled) to `module` in place; a schedule stage applies
    `schedule` where given, else the module its family builds."""
    if resolved.kind == "pass":
        pipeline = f"builtin.module({resolved.name})"
        run_passes(module, pipeline, stage=resolved.label, print_after_all=print_after_all)
    elif resolved.kind == "step":
        step_named(resolved.name)(module, **resolved.arguments)
    elif resolved.kind == "dispatch":
        _schedule_dispatches(module, lowering, observer)
    else:
        schedule = schedule or _schedule_module(resolved, lowering.roots)
        # A library schedule that vectorizes an op whole has failed (a transform file is
        # the user's to run as written: its compile is contained like any other). One
        # that aborts or runs too long has failed too, where the process can survive it.
        library = not resolved.name.endswith(".mlir")
        if library and contained():
            apply_schedule_forked(module, schedule, resolved.label)
        else:
            apply_schedule(module, schedule, resolved.label)
        if library and (elements := largest_vector(module)) > LARGEST_VECTOR:
            raise MlirtuneError(
                f"{resolved.label}: the schedule left an op untiled (a vector of {elements} "
                "elements, which would unroll past any compile time)",
                stage="schedule",
            )
        if observer:
            observer(f"schedule {resolved.name}", module)


def schedule_modules(lowering: Lowering) -> list[ir.Module]:
    """The transform module of every schedule stage (each dispatch's, for a split
    payload), built with the lowering's slot values (in the current context), exactly as
    `run_pipeline` applies them."""
    own = [
        _schedule_module(resolve_stage(stage, lowering.values), lowering.roots)
        for stage in lowering.descriptor.stages
        if stage.kind == "schedule"
    ]
    return own + [m for d in lowering.dispatches for m in schedule_modules(d.lowering)]


def _schedule_dispatches(module: ir.Module, lowering: Lowering, observer: Observer | None) -> None:
    """Run each dispatch's pipeline up to its last schedule stage on the dispatch as a
    payload of its own, and put the result back. A schedule that fails leaves that
    dispatch as it was, with a note (it is lowered untuned; the whole is still verified)."""
    for dispatch in lowering.dispatches:
        standalone = standalone_module(module, dispatch.function)
        plan = dispatch.lowering
        stages = plan.descriptor.stages[: _last_stage(plan.descriptor.stages, ("schedule",)) + 1]
        scheduling = replace(plan, descriptor=replace(plan.descriptor, stages=stages))
        try:
            run_pipeline(standalone, scheduling)
        except MlirtuneError as error:
            plan.notes.append(schedule_failure_note(error))
            dispatch.schedule_failed = True
            continue
        if (elements := largest_vector(standalone)) > LARGEST_VECTOR:
            plan.notes.append(
                f"its schedule left an op untiled (a vector of {elements} elements): "
                "lowered untuned"
            )
            dispatch.schedule_failed = True
            continue
        replace_function(module, dispatch.function, standalone)
    if observer:
        observer("dispatches scheduled", module)


def schedule_failure_note(error: MlirtuneError, outcome: str = "lowered untuned") -> str:
    """The note of a payload whose schedule failed: where it failed and MLIR's first
    diagnostic, on one line, then what was done instead (`outcome`)."""
    lines = [line.strip() for line in str(error.args[0]).splitlines() if line.strip()]
    return f"its schedule failed ({' '.join(lines[:2])}): {outcome}"


def _last_stage(stages: list[Stage], kinds: tuple[str, ...]) -> int:
    """Index of the last stage of one of `kinds`, -1 when there is none."""
    return max((i for i, s in enumerate(stages) if s.kind in kinds), default=-1)


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
    family = _library_family(stage)
    for key, value in stage.arguments.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise DescriptorError(
                f"{stage.origin}: schedule {stage.name} parameter {key}={value!r} has a bad "
                "value type; expected an integer"
            )
    op = root_for(family.root_kinds, roots, stage)
    return family.build(op, family.parameters(op, stage.arguments))


def _library_family(stage: Stage) -> ScheduleFamily:
    """The schedule family a stage names; an unknown name is an error naming the stage."""
    try:
        return family_named(stage.name)
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


def apply_schedule_forked(payload: ir.Module, schedule: ir.Module, where: str) -> None:
    """`apply_schedule` in a forked child (mlirtune.contain.forked), its result moved into
    `payload`: an abort or a schedule past its time share is a schedule error."""

    def scheduled() -> bytes:
        apply_schedule(payload, schedule, where)
        buffer = io.BytesIO()
        payload.operation.write_bytecode(buffer)
        return buffer.getvalue()

    result = ir.Module.parse(run_forked(scheduled, "schedule", where))
    body = payload.body
    for op in list(body.operations):
        op.erase()
    for op in list(result.body.operations):
        op.detach_from_parent()
        body.append(op)
    for name in result.operation.attributes:
        payload.operation.attributes[name] = result.operation.attributes[name]


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
