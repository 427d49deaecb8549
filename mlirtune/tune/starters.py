"""Where a search starts: the configs that spec-library entries give a tuning problem.

Two kinds of entries are worth measuring first: the one a compile would apply here (for
`--starter-spec`), and the matching entries tuned on another CPU class, which compiles do
not apply on this host (see mlirtune.specs.specset) but which are good first guesses for it.
A tuned entry's config is complete, as a compile reads it: the knobs it leaves out keep
their defaults (`tuned_config`).
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir

from mlirtune.ir.context import new_context
from mlirtune.pipeline.driver import resolve_values
from mlirtune.pipeline.plan import annotated_payload, plan_for
from mlirtune.specs.specset import SpecSet, foreign_class
from mlirtune.tune.problem import Config, TuningProblem


@dataclass(frozen=True)
class Starter:
    """A config to evaluate first, and the spec entry it comes from."""

    config: Config  # knob values, as the tuning problem's space takes them
    label: str  # "<library>:<entry>"
    tuned_on: str | None = None  # the other CPU class it was tuned on; None: it applies here


def tuned_config(problem: TuningProblem, slot_values: dict[str, int]) -> Config:
    """The knob config a compile gets from a tuned config (slot values, possibly partial)."""
    lowering = problem.lowering
    resolved = resolve_values(
        lowering.descriptor, problem.target, lowering.roots, tuned=slot_values
    )
    return problem.config_of({slot: resolved.values[slot] for slot in problem.slots.values()})


def applied_starter(problem: TuningProblem, specs: SpecSet) -> Starter | None:
    """The config the entry of `specs` that a compile would apply gives `problem`, if any."""
    lowering = plan_for(problem.workload, problem.target, problem.pipeline, specs)
    if lowering.spec is None:
        return None
    slot_values = {slot: lowering.values[slot] for slot in problem.slots.values()}
    return Starter(problem.config_of(slot_values), lowering.spec.removeprefix("spec:"))


def foreign_starters(problem: TuningProblem, specs: SpecSet) -> list[Starter]:
    """The configs of the entries of `specs` tuned on another CPU class that match
    `problem`'s workload and pipeline, in the libraries' order (one per distinct config)."""
    with new_context(), ir.Location.unknown():
        payload, _ = annotated_payload(problem.workload)
        entries = specs.foreign_entries(payload, problem.lowering.descriptor.name)
    starters: list[Starter] = []
    for origin in entries:
        if origin.entry.config is None:  # hand-written: its action sets no constant config
            continue
        config = tuned_config(problem, origin.entry.config)
        if all(config != s.config for s in starters):
            tuned_on = foreign_class(origin.entry, problem.target)
            starters.append(Starter(config, origin.label, tuned_on))
    return starters
