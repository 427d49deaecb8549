"""Search spaces: the valid configs of a schedule's knobs for one root op on one target.

Each knob is a z3 Int ranging over its candidate values, and each constraint a named z3
Boolean added with `assert_and_track`, so an empty space is reported with the constraints
that conflict (the unsat core). The valid configs are enumerated once with blocking clauses
and cached: counting, sampling and ranking work off that list, and the knobs can be exported
as `transform.tune.knob` ops for other MLIR tools.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import z3
from mlir import ir
from mlir.dialects import transform
from mlir.dialects.transform import tune

from mlirtune.errors import UsageError

Config = dict[str, int]


@dataclass(frozen=True)
class Constraint:
    """A condition every valid config meets: `expr` is a z3 Boolean over the knobs' Ints;
    `description` says what it is and why, for reports and error messages."""

    name: str
    description: str
    expr: z3.BoolRef


class SearchSpace:
    """The configs of `domains` (knob -> candidate values) that meet every constraint.

    `fixed` holds schedule parameters that are not tuned; `cost_model` estimates seconds per
    call for a config (fixed parameters included), lower being better.
    """

    def __init__(
        self,
        schedule: str,
        domains: dict[str, tuple[int, ...]],
        constraints: Iterable[Constraint],
        cost_model: Callable[[Config], float],
        fixed: dict[str, int] | None = None,
    ) -> None:
        self.schedule = schedule
        self.domains = {name: tuple(sorted(set(values))) for name, values in domains.items()}
        self.fixed = dict(fixed or {})
        self.constraints = tuple(constraints)
        self._cost_model = cost_model
        self._variables = {name: z3.Int(name) for name in self.domains}
        self._configs: list[tuple[int, ...]] | None = None
        self._valid: set[tuple[int, ...]] = set()

    def __repr__(self) -> str:
        return f"SearchSpace({self.schedule}, {len(self.domains)} knobs)"

    # --- validity ------------------------------------------------------------------------

    def check(self) -> None:
        """Raise UsageError(stage="space") when no config is valid, naming the knobs without
        candidates or the conflicting constraints (a minimised unsat core)."""
        empty = [name for name, values in self.domains.items() if not values]
        if empty:
            raise UsageError(
                f"schedule {self.schedule}: knob(s) {', '.join(empty)} have no candidate values",
                stage="space",
            )
        solver = self._solver()
        solver.set("core.minimize", True)
        verdict = solver.check()
        if verdict == z3.sat:
            return
        if verdict == z3.unsat:
            core = {str(name) for name in solver.unsat_core()}
            conflicting = [c for c in self.constraints if c.name in core]
            details = "; ".join(f"{c.name}: {c.description}" for c in conflicting)
            raise UsageError(
                f"schedule {self.schedule}: empty search space, no config satisfies "
                f"{', '.join(c.name for c in conflicting)} together ({details})",
                stage="space",
            )
        raise UsageError(
            f"schedule {self.schedule}: z3 could not decide the search space "
            f"({solver.reason_unknown()})",
            stage="space",
        )

    def contains(self, config: Config) -> bool:
        """Whether `config` is a valid config of this space."""
        return not self.violations(config)

    def violations(self, config: Config) -> list[str]:
        """Names of the constraints `config` breaks; `<KNOB>_domain` for a knob missing or
        outside its candidates, `<NAME>_unknown` for a name that is no knob or fixed
        parameter, `<NAME>_fixed` for a fixed parameter given another value."""
        broken = [f"{name}_unknown" for name in config if name not in self.domains | self.fixed]
        broken += [
            f"{name}_fixed"
            for name, value in self.fixed.items()
            if name in config and config[name] != value
        ]
        values = {
            name: config[name]
            for name in self.domains
            if isinstance(config.get(name), int) and not isinstance(config[name], bool)
        }
        broken += [
            f"{name}_domain"
            for name, candidates in self.domains.items()
            if values.get(name) not in candidates
        ]
        if not broken and self._key(config) in self._valid:
            return []
        substitutions = [(self._variables[name], z3.IntVal(v)) for name, v in values.items()]
        broken += [
            c.name
            for c in self.constraints
            if z3.is_false(z3.simplify(z3.substitute(c.expr, *substitutions)))
        ]
        return broken

    def describe(self) -> list[tuple[str, str]]:
        """(name, description) of every constraint, in declaration order."""
        return [(c.name, c.description) for c in self.constraints]

    # --- configs -------------------------------------------------------------------------

    def enumerate(self) -> list[Config]:
        """Every valid config, ordered by knob values in declaration order (computed once)."""
        return [dict(zip(self.domains, values, strict=True)) for values in self._all()]

    def count(self) -> int:
        """How many valid configs there are."""
        return len(self._all())

    def sample(self, n: int, seed: int, exclude: Iterable[Config] = ()) -> list[Config]:
        """Up to `n` distinct valid configs not in `exclude`: a prefix of the enumeration
        shuffled with `seed`, so the same seed gives the same configs in the same order."""
        skip = {self._key(config) for config in exclude}
        order = list(self._all())
        random.Random(seed).shuffle(order)
        picked = [values for values in order if values not in skip][: max(0, n)]
        return [dict(zip(self.domains, values, strict=True)) for values in picked]

    def cost(self, config: Config) -> float:
        """The cost model's estimate of seconds per call for `config` (lower is better)."""
        missing = [name for name in self.domains if name not in config]
        if missing:
            raise UsageError(
                f"schedule {self.schedule}: cost needs values for {', '.join(missing)}",
                stage="space",
            )
        return float(self._cost_model({**self.fixed, **config}))

    # --- export --------------------------------------------------------------------------

    def to_transform_module(self) -> ir.Module:
        """A transform module whose named sequence `@<schedule>_knobs` holds one
        `transform.tune.knob` per knob, its options being the values that appear in at least
        one valid config; the constraints' descriptions are attached to the sequence as
        `mlirtune.constraints`. Needs an active MLIR context."""
        configs = self._all()
        options = {
            name: sorted({values[i] for values in configs}) for i, name in enumerate(self.domains)
        }
        with ir.Location.name(f"{self.schedule}:knobs"):
            module = ir.Module.create()
            module.operation.attributes["transform.with_named_sequence"] = ir.UnitAttr.get()
            with ir.InsertionPoint(module.body):
                sequence = transform.NamedSequenceOp(
                    f"{self.schedule}_knobs",
                    [transform.AnyOpType.get()],
                    [],
                    arg_attrs=[{"transform.readonly": ir.UnitAttr.get()}],
                )
            sequence.operation.attributes["mlirtune.constraints"] = ir.DictAttr.get(
                {c.name: ir.StringAttr.get(c.description) for c in self.constraints}
            )
            param = transform.ParamType.get(ir.IntegerType.get_signless(64))
            with ir.InsertionPoint(sequence.body):
                for name, values in options.items():
                    tune.KnobOp(param, name, values)
                transform.YieldOp([])
        return module

    # --- internals -----------------------------------------------------------------------

    def _key(self, config: Config) -> tuple:
        return tuple(config.get(name) for name in self.domains)

    def _solver(self) -> z3.Solver:
        """Domains as plain assertions, constraints tracked by name for unsat cores."""
        solver = z3.Solver()
        for name, values in self.domains.items():
            solver.add(z3.Or([self._variables[name] == v for v in values]))
        for c in self.constraints:
            solver.assert_and_track(c.expr, c.name)
        return solver

    def _all(self) -> list[tuple[int, ...]]:
        """Valid configs as value tuples: for each value of the first knob, models are
        enumerated with blocking clauses over the other knobs (few clauses per check)."""
        if self._configs is not None:
            return self._configs
        solver = self._solver()
        first, *rest = (self._variables[name] for name in self.domains)
        found: list[tuple[int, ...]] = []
        for value in self.domains[str(first)]:
            solver.push()
            solver.add(first == value)
            while (verdict := solver.check()) == z3.sat:
                model = solver.model()
                others = tuple(model.eval(v, model_completion=True).as_long() for v in rest)
                found.append((value, *others))
                blocked = [v != x for v, x in zip(rest, others, strict=True)]
                solver.add(z3.Or(blocked) if blocked else z3.BoolVal(False))
            solver.pop()
            if verdict == z3.unknown:
                raise UsageError(
                    f"schedule {self.schedule}: z3 could not enumerate the search space "
                    f"({solver.reason_unknown()})",
                    stage="space",
                )
        self._configs = sorted(found)
        self._valid = set(self._configs)
        return self._configs
