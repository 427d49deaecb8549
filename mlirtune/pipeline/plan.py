"""Planning a compile: the annotated payload, its descriptor and every slot value with its
source (explicit, tuned by a spec library, selector, default), before any IR is rewritten.

Engines plan before they lower, and `Workload.schedule_module` builds its transform module
from the same plan, so what a user inspects is what a compile applies.
"""

from __future__ import annotations

from pathlib import Path

from mlir import ir

from mlirtune.interfaces.lowering import Descriptor, Lowering
from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.target import Target
from mlirtune.interfaces.workload import Workload
from mlirtune.ir.context import new_context
from mlirtune.ir.inspect import find_function
from mlirtune.ir.roots import annotate_roots
from mlirtune.pipeline.driver import resolve_values, schedule_modules
from mlirtune.pipeline.lookup import resolve_descriptor
from mlirtune.specs.specset import SpecSet
from mlirtune.targets.host_cpu import HostCPU


def annotated_payload(workload: Workload) -> tuple[ir.Module, list[OpInfo]]:
    """A new payload module with its entry checked and its root ops annotated (in the
    current context)."""
    module = workload.payload_module()
    find_function(module, workload.entry)
    return module, annotate_roots(module)


def descriptor_names(workload: Workload, roots: list[OpInfo]) -> list[str]:
    """Default descriptor names for a workload, most specific first: its own name, then its
    root op's kind (lookup adds "default"). A payload of several root ops (an imported model)
    takes no root's pipeline: a family's schedule tiles its one root, so they run through
    the default lowering, untuned, unless a descriptor is named after the workload."""
    return [workload.name, *(op.kind for op in roots if len(roots) == 1)]


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
    choice = specs.choose(module, proposal) if specs is not None else None
    tuned = choice.config if choice is not None else None
    lowering = resolve_values(descriptor, target, roots, explicit=parameters, tuned=tuned)
    lowering.spec = choice.source if choice is not None else None
    lowering.notes.extend(proposal.notes)
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
    module, roots = annotated_payload(workload)
    if not isinstance(pipeline, Descriptor):
        pipeline = resolve_descriptor(pipeline, target, descriptor_names(workload, roots))
    return module, plan_lowering(module, roots, pipeline, target, specs, parameters)


def planned_schedule(
    workload: Workload,
    parameters: dict[str, int] | None = None,
    target: Target | None = None,
    specs: SpecSet | None = None,
) -> ir.Module | None:
    """The transform module of the first schedule stage of the pipeline that lowers
    `workload` on `target` (default: this host, with its spec libraries), built in the
    current context; None when that pipeline has no schedule stage."""
    target = target or HostCPU()
    specs = specs if specs is not None else SpecSet.for_target(target)
    _, lowering = _prepared(workload, target, None, specs, parameters)
    modules = schedule_modules(lowering)
    return modules[0] if modules else None
