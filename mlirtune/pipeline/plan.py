"""Planning a compile: the annotated payload, its descriptor and every slot value with its
source (explicit, tuned by a spec library, selector, default), before any IR is rewritten.

Engines plan before they lower, and `Workload.schedule_module` builds its transform module
from the same plan, so what a user inspects is what a compile applies.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

from mlir import ir

from mlirtune.dispatch.functions import standalone_module
from mlirtune.dispatch.partition import split_into_dispatches
from mlirtune.interfaces.errors import MlirtuneError, UsageError
from mlirtune.interfaces.lowering import Descriptor, DispatchPlan, Lowering
from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.target import Target
from mlirtune.interfaces.workload import Workload
from mlirtune.ir.context import new_context
from mlirtune.ir.inspect import defining_op, find_function
from mlirtune.ir.roots import ROOT_ATTRIBUTE, has_scans
from mlirtune.pipeline.driver import resolve_values, schedule_modules
from mlirtune.pipeline.lookup import resolve_descriptor
from mlirtune.schedules.registry import bound_family
from mlirtune.schedules.roots import annotate_roots, find_roots
from mlirtune.specs.specset import SpecSet
from mlirtune.targets.host_cpu import HostCPU


def annotated_payload(workload: Workload) -> tuple[ir.Module, list[OpInfo]]:
    """A new payload module with its entry checked and its root ops annotated (in the
    current context)."""
    module = workload.payload_module()
    find_function(module, workload.entry)
    return module, annotate_roots(module)


# The descriptor of payloads with several root ops and none named after their workload.
MULTI_ROOT = "multi_root"


def descriptor_names(workload: Workload, roots: list[OpInfo], module: ir.Module) -> list[str]:
    """Default descriptor names for a workload, most specific first: its own
    (`descriptor_name`), then its root op's kind (lookup adds "default"). A payload of
    several root ops (an imported model) falls to `multi_root`, which splits it into
    dispatches of one root each, unless a descriptor is named after the workload (a
    softmax's two row reductions are one schedule's). So does a generic root that reads
    a value element-wise ops compute (`reads_computed_input`), and a payload with a scan,
    whose loops are a dispatch apart from the ops around them (a flip, a mask)."""
    if len(roots) > 1 or reads_computed_input(module, roots) or has_scans(module):
        return [workload.descriptor_name, MULTI_ROOT]
    return [workload.descriptor_name, *(op.kind for op in roots)]


def reads_computed_input(module: ir.Module, roots: list[OpInfo]) -> bool:
    """Whether the one root is the generic family's and reads, as an input, the result of a
    linalg op other than a fill: its register tiles would each recompute that producer,
    once per tile that reads the same input (a BatchNorm1d and GELU before a 1x1 Conv1d of
    128 channels, computed for each of its 8 tiles of 16: 0.20x eager fused, 1.01-1.04x
    split)."""
    if [op.kind for op in roots] != ["generic"]:
        return False
    found = False

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal found
        if ROOT_ATTRIBUTE in op.attributes:
            producers = [defining_op(v) for v in op.opview.inputs]  # not its init
            found = any(
                p is not None and p.name.startswith("linalg.") and p.name != "linalg.fill"
                for p in producers
            )
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


def plan_payload(
    workload: Workload,
    target: Target,
    descriptor_for: Callable[[list[str]], Descriptor],
    pipeline: Descriptor | None,
    specs: SpecSet | None,
    parameters: dict[str, int] | None,
) -> tuple[ir.Module, Lowering]:
    """The annotated payload and its lowering plan (in the current context): `pipeline`,
    else the descriptor `descriptor_for` finds by name. A `dispatch` stage splits the
    payload first and plans each dispatch with the descriptor of its kind."""
    module, roots = annotated_payload(workload)
    descriptor = pipeline or descriptor_for(descriptor_names(workload, roots, module))
    if any(stage.kind == "dispatch" for stage in descriptor.stages):
        lowering = plan_dispatches(
            module, workload.entry, descriptor, descriptor_for, target, specs, parameters
        )
        return module, lowering
    return module, plan_lowering(module, roots, descriptor, target, specs, parameters)


def plan_lowering(
    module: ir.Module,
    roots: list[OpInfo],
    descriptor: Descriptor,
    target: Target,
    specs: SpecSet | None,
    parameters: dict[str, int] | None = None,
) -> Lowering:
    """Slot values for `descriptor` on the annotated `module`: `parameters` (explicit),
    then the first spec entry that matches (tuned), then the selector and the defaults.
    Spec entries' notes (e.g. stale provenance) are kept on the Lowering."""
    proposal = Lowering(descriptor, roots)
    if parameters:
        _refuse_invalid_choices(proposal, parameters)
    choice = specs.choose(module, proposal) if specs is not None else None
    tuned = choice.config if choice is not None else None
    lowering = resolve_values(descriptor, target, roots, explicit=parameters, tuned=tuned)
    lowering.spec = choice.source if choice is not None else None
    lowering.notes.extend(proposal.notes)
    return lowering


def plan_dispatches(
    module: ir.Module,
    entry: str,
    descriptor: Descriptor,
    descriptor_for: Callable[[list[str]], Descriptor],
    target: Target,
    specs: SpecSet | None,
    parameters: dict[str, int] | None,
) -> Lowering:
    """Split `entry` of `module` into dispatches (in place) and plan each as a payload of
    its own with the descriptor of its kind: spec libraries and selectors apply per
    dispatch. A dispatch no schedule family takes is lowered as it is, with a note."""
    if parameters:
        raise UsageError(
            f"schedule parameters ({', '.join(parameters)}) set one root op's schedule, and "
            f"pipeline {descriptor.name} splits this payload into dispatches of a root op "
            "each: tune them (mlirtune tune) and apply the spec library instead",
            stage="pipeline",
        )
    dispatches, notes = split_into_dispatches(module, entry)
    lowering = resolve_values(descriptor, target, [])
    lowering.notes.extend(notes)
    for dispatch in dispatches:
        standalone = standalone_module(module, dispatch.function)
        roots = [info for _, info in find_roots(standalone)]
        # The dispatch's own root names its pipeline: outlined, an op may read as another
        # kind than it did in the whole payload (a batched product's views are gone).
        kinds = [roots[0].kind] if len(roots) == 1 else [dispatch.kind]
        try:
            planned = plan_lowering(standalone, roots, descriptor_for(kinds), target, specs)
        except MlirtuneError:  # no root op of the family the kind's pipeline names
            planned = plan_lowering(standalone, roots, descriptor_for([]), target, specs)
            planned.notes.append("no schedule family takes its ops: lowered as it is")
        lowering.roots.extend(roots)
        lowering.dispatches.append(DispatchPlan(dispatch.function, dispatch.kind, planned))
    if not dispatches:
        lowering.notes.append("not split into dispatches: lowered as it is, untuned")
    return lowering


def plan_for(
    workload: Workload,
    target: Target,
    pipeline: str | Path | Descriptor | None = None,
    specs: SpecSet | None = None,
    parameters: dict[str, int] | None = None,
) -> Lowering:
    """The lowering a compile of `workload` on `target` would use (its own context; no IR
    is rewritten): `pipeline` (a descriptor, its name or YAML path; default: looked up for
    the workload), `specs` (None: no spec library) and explicit `parameters`."""
    with new_context(), ir.Location.unknown():
        return _prepared(workload, target, pipeline, specs, parameters)[1]


def _prepared(
    workload: Workload,
    target: Target,
    pipeline: str | Path | Descriptor | None,
    specs: SpecSet | None,
    parameters: dict[str, int] | None,
) -> tuple[ir.Module, Lowering]:
    """The annotated payload and its lowering plan, in the current context."""
    if pipeline is not None and not isinstance(pipeline, Descriptor):
        pipeline = resolve_descriptor(pipeline, target, [])
    lookup = functools.partial(resolve_descriptor, None, target)
    return plan_payload(workload, target, lookup, pipeline, specs, parameters)


def planned_schedule(
    workload: Workload,
    parameters: dict[str, int] | None = None,
    target: Target | None = None,
    specs: SpecSet | None = None,
    lowering: Lowering | None = None,
) -> ir.Module | None:
    """The transform module of the first schedule stage of the pipeline that lowers
    `workload` on `target` (default: this host, with its spec libraries), built in the
    current context from `lowering` where the caller planned it already; None when that
    pipeline has no schedule stage."""
    if lowering is None:
        target = target or HostCPU()
        specs = specs if specs is not None else SpecSet.for_target(target)
        _, lowering = _prepared(workload, target, None, specs, parameters)
    modules = schedule_modules(lowering)
    return modules[0] if modules else None


def _refuse_invalid_choices(proposal: Lowering, parameters: dict[str, int]) -> None:
    """A UsageError for an explicit value of a knob with alternatives (a code path, a loop
    order) that is none of them: it would mean nothing, where another size only warns."""
    try:
        family, _, slots = bound_family(proposal)
    except UsageError:  # no one library schedule: nothing to check against
        return
    knob_of = {slot: knob for knob, slot in slots.items()}
    values = {knob_of[slot]: value for slot, value in parameters.items() if slot in knob_of}
    problems = family.invalid_choices(values)
    if problems:
        raise UsageError(f"--param {problems[0]}", stage="schedule")
