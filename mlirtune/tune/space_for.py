"""`space_for`: the search space of a schedule family's knobs for one root op on one target.

The family gives everything: the knobs' candidate values (derived from the target's vector
width), the named z3 constraints and the cost model. No IR is looked at.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import z3

from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.schedule import Config, ScheduleFamily
from mlirtune.interfaces.target import Target
from mlirtune.schedules.registry import FAMILIES, family_named
from mlirtune.tune.space import SearchSpace


def space_for(
    op: OpInfo, family_name: str, target: Target, threads: Sequence[int] = ()
) -> SearchSpace:
    """The search space of family `family_name`'s knobs for the root op `op` on `target`;
    raises UsageError(stage="space") when the op or target is not covered, or the space is
    empty (naming the conflicting constraints). `threads`, when given, makes the family's
    THREADS knob one more searched knob with those values."""
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
    if threads:
        if "THREADS" not in {knob.name for knob in family.knobs}:
            raise UsageError(f"schedule {family.name} has no THREADS knob to search", stage="space")
        domains["THREADS"] = tuple(threads)
    knobs = {name: z3.Int(name) for name in domains}
    space = SearchSpace(
        family.name,
        domains,
        family.constraints(op, target, knobs, domains),
        partial(_cost_on_threads, family, op, target),
    )
    space.check()
    return space


def _cost_on_threads(family: ScheduleFamily, op: OpInfo, target: Target, config: Config) -> float:
    """The family's cost, which prices one core, shared by the config's THREADS cores."""
    return family.cost(op, target, config) / config.get("THREADS", 1)
