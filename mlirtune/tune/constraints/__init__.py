"""Constraint generators, one per (schedule, target kind), and `space_for`, which builds the
search space of a schedule's knobs for one root op on one target.

A generator needs no IR: the root op's description (kind, dims, dtypes) and the target's
features decide the knobs' candidates, the constraints and the cost model.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import z3

from mlirtune.errors import UsageError
from mlirtune.ir.roots import OpInfo
from mlirtune.schedules.library import schedule_named
from mlirtune.tune.constraints.base import ConstraintGenerator
from mlirtune.tune.constraints.contraction import ContractionOnHost, PackedContractionOnHost
from mlirtune.tune.constraints.convolution import ConvolutionOnHost
from mlirtune.tune.constraints.vector_tiles import ElementwiseOnHost, RowwiseOnHost
from mlirtune.tune.space import SearchSpace

__all__ = ["GENERATORS", "ConstraintGenerator", "space_for"]

GENERATORS: dict[tuple[str, str], ConstraintGenerator] = {
    (g.schedule, g.target): g
    for g in (
        ContractionOnHost(),
        PackedContractionOnHost(),
        ConvolutionOnHost(),
        RowwiseOnHost(),
        ElementwiseOnHost(),
    )
}


def space_for(op: OpInfo, schedule: str, target: Any) -> SearchSpace:
    """The search space of `schedule`'s knobs for the root op `op` on `target`; raises
    UsageError(stage="space") when the op or target is not covered, or the space is empty
    (naming the conflicting constraints)."""
    entry = schedule_named(schedule)
    if op.kind not in entry.root_kinds:
        raise UsageError(
            f"schedule {schedule} works on {', '.join(entry.root_kinds)} roots, not {op.kind}",
            stage="space",
        )
    target_name = getattr(target, "name", type(target).__name__)
    generator = GENERATORS.get((schedule, target_name))
    if generator is None:
        known = ", ".join(f"{s} on {t}" for s, t in GENERATORS)
        raise UsageError(
            f"no search space for schedule {schedule} on target {target_name}; known: {known}",
            stage="space",
        )
    lanes = generator.lanes(op, target)
    domains = {knob.name: knob.values(op, lanes) for knob in entry.knobs}
    knobs = {name: z3.Int(name) for name in domains}
    space = SearchSpace(
        schedule,
        domains,
        generator.constraints(op, target, knobs, domains),
        partial(generator.cost, op, target),
    )
    space.check()
    return space
