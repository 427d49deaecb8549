"""`space_for`: the search space of a schedule family's knobs for one root op on one target.

The family gives everything: the knobs' candidate values (derived from the target's vector
width), the named z3 constraints and the cost model. No IR is looked at.
"""

from __future__ import annotations

from functools import partial

import z3

from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.target import Target
from mlirtune.schedules.registry import FAMILIES, family_named
from mlirtune.tune.space import SearchSpace


def space_for(op: OpInfo, family_name: str, target: Target) -> SearchSpace:
    """The search space of family `family_name`'s knobs for the root op `op` on `target`;
    raises UsageError(stage="space") when the op or target is not covered, or the space is
    empty (naming the conflicting constraints)."""
    family = family_named(family_name)
    if op.kind not in family.root_kinds:
        raise UsageError(
            f"schedule {family.name} works on {', '.join(family.root_kinds)} roots, not {op.kind}",
            stage="space",
        )
    if target.name not in family.target_kinds:
        known = ", ".join(
            f"{f.name} on {kind}" for f in FAMILIES.values() for kind in f.target_kinds
        )
        raise UsageError(
            f"no search space for schedule {family.name} on target {target.name}; known: {known}",
            stage="space",
        )
    domains = family.domains(op, target)
    knobs = {name: z3.Int(name) for name in domains}
    space = SearchSpace(
        family.name,
        domains,
        family.constraints(op, target, knobs, domains),
        partial(family.cost, op, target),
    )
    space.check()
    return space
