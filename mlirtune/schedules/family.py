"""What every library schedule family shares: defaults from its knobs, parameter checks,
knob domains, and the check of one config against its constraints.

A family module only adds what is its own: the transform builder, the knobs (each with its
default), the analytic selector per target kind, the constraints and the cost model.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Generic, TypeVar, cast

import z3

from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.schedule import Config, Domains, KnobValues, ScheduleFamily
from mlirtune.interfaces.target import Target

KindT = TypeVar("KindT", bound=Target)
ValuesT = TypeVar("ValuesT", bound=KnobValues)


class LibraryFamily(ScheduleFamily, Generic[ValuesT]):
    """A ScheduleFamily whose defaults, parameter checks and violations follow from its knobs
    and constraints; subclasses supply `choose`, the selector for one target. `ValuesT` is
    the family's `values_type`, the typed knob values its builder and model read."""

    def __repr__(self) -> str:
        return f"<schedule family {self.name}>"

    # --- parameters ----------------------------------------------------------------------

    def defaults(self, op: OpInfo) -> Config:
        return {knob.name: knob.default_for(op) for knob in self.knobs}

    def parameters(self, op: OpInfo, values: Config | None = None) -> Config:
        resolved = self.defaults(op)
        minimum = {knob.name: knob.minimum for knob in self.knobs}
        problem = self.invalid_choices(values or {})
        if problem:
            raise UsageError(f"schedule {self.name}: {problem[0]}", stage="schedule")
        for key, value in (values or {}).items():
            if key not in resolved:
                raise UsageError(
                    f"schedule {self.name}: unknown parameter {key!r}; "
                    f"known: {', '.join(resolved)}",
                    stage="schedule",
                )
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum[key]:
                kind = (
                    "a positive integer" if minimum[key] == 1 else f"an integer >= {minimum[key]}"
                )
                raise UsageError(
                    f"schedule {self.name}: parameter {key}={value!r} must be {kind}",
                    stage="schedule",
                )
            resolved[key] = value
        return resolved

    def knob_values(self, op: OpInfo, config: Config) -> ValuesT:
        """`config` over the defaults (a search space's configs name no THREADS), typed."""
        return cast(ValuesT, self.values_type.from_config({**self.defaults(op), **config}))

    def invalid_choices(self, values: Config) -> list[str]:
        """`KNOB=value must be one of ...: what it is` for each value of a knob with
        alternatives (a code path, an order) that is none of them."""
        return [
            f"{knob.name}={values[knob.name]} must be one of "
            f"{', '.join(map(str, knob.alternatives))} ({knob.description})"
            for knob in self.knobs
            if knob.alternatives is not None
            and knob.name in values
            and values[knob.name] not in knob.alternatives
        ]

    def selected(self) -> tuple[str, ...]:
        """Names of the knobs the selector chooses (the others keep their defaults)."""
        return tuple(knob.name for knob in self.knobs if knob.selected)

    # --- selection -----------------------------------------------------------------------

    def select(self, op: OpInfo, target: Target, fixed: Config | None = None) -> Config:
        chosen = self.choose(op, target, fixed or {})
        assert set(chosen) == set(self.selected()), (self.name, chosen)
        return chosen

    @abstractmethod
    def choose(self, op: OpInfo, target: Target, fixed: Config) -> Config:
        """The selector's values of the selected knobs, in knob order, around the `fixed`
        ones (see ScheduleFamily.select); UsageError(stage="select") for a target of a kind
        the family has no selector for."""

    def covers(self, target: Target) -> bool:
        """Whether the family has a selector and a model for `target`'s kind."""
        return target.name in self.target_kinds

    def require(self, target: Target, kind: type[KindT], stage: str) -> KindT:
        """`target` as the `kind` of target the family's model reads its facts from; a
        UsageError naming the family and the target otherwise ("select" or "space")."""
        if not isinstance(target, kind):
            what = "parameter selector" if stage == "select" else "search space"
            raise UsageError(
                f"schedule {self.name} has no {what} for target {target.name}; it covers "
                f"{', '.join(self.target_kinds)}",
                stage=stage,
            )
        return target

    # --- search space --------------------------------------------------------------------

    def domains(self, op: OpInfo, target: Target) -> Domains:
        """Every searched knob's candidate values for `op` on `target`: its own
        (`knob_domains`), and the selector's value where that is none of them (a block
        that is no octave's largest divisor: MC=372 for the 4092 whole rows of a prime
        M = 4099), so that the untuned config, the tuner's baseline, lies in the space
        and a guided search can start from its neighbours."""
        domains = self.knob_domains(op, target)
        if self.covers(target):
            for name, value in self.select(op, target).items():
                if name in domains and value not in domains[name]:
                    domains[name] = tuple(sorted((*domains[name], value)))
        return domains

    def knob_domains(self, op: OpInfo, target: Target) -> Domains:
        """Every searched knob's candidate values, derived from the target's vector width."""
        lanes = self.lanes(op, target)
        return {knob.name: knob.values(op, lanes) for knob in self.knobs if knob.searched}

    def violations(self, op: OpInfo, target: Target, config: Config) -> list[str]:
        """Names of what `config` breaks, as SearchSpace.violations reports them:
        `<NAME>_unknown` for a name that is no knob, `<KNOB>_domain` for a knob missing or
        outside its candidates, then the constraints z3 simplifies to false once the given
        values are substituted (one whose knobs lack values is left undecided)."""
        return self._broken(op, target, config, self.domains(op, target))

    def _broken(self, op: OpInfo, target: Target, config: Config, domains: Domains) -> list[str]:
        """`violations` against the candidates `domains` (a selector that checks its own
        candidates passes `knob_domains`: `domains` would ask it again)."""
        variables = {name: z3.Int(name) for name in domains}
        knobs = {knob.name for knob in self.knobs}
        broken = [f"{name}_unknown" for name in config if name not in knobs]
        values = {
            name: config[name]
            for name in domains
            if isinstance(config.get(name), int) and not isinstance(config[name], bool)
        }
        broken += [
            f"{name}_domain"
            for name, candidates in domains.items()
            if values.get(name) not in candidates
        ]
        substitutions = [(variables[name], z3.IntVal(v)) for name, v in values.items()]
        for constraint in self.constraints(op, target, variables, domains):
            if z3.is_false(z3.simplify(z3.substitute(constraint.expr, *substitutions))):
                broken.append(constraint.name)
        return broken
