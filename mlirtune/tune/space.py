"""Search spaces: the valid configs of a schedule's knobs for one root op on one target.

Each knob is a z3 Int ranging over its candidate values, and each constraint a named z3
Boolean added with `assert_and_track`, so an empty space is reported with the constraints
that conflict (the unsat core). The valid configs are enumerated once and cached: counting,
sampling and ranking work off that list, and the knobs can be exported as
`transform.tune.knob` ops for other MLIR tools.

Enumeration walks the knobs' domains depth first, checking each constraint as soon as its
knobs have values, with the constraints translated into Python predicates that follow z3's
integer semantics (milliseconds, where z3's blocking-clause enumeration takes seconds for a
few thousand configs). A constraint using an operation outside integer arithmetic and logic
falls back to z3 enumeration.
"""

from __future__ import annotations

import functools
import operator
import random
from collections.abc import Callable, Iterable

import z3
from mlir import ir
from mlir.dialects import transform
from mlir.dialects.transform import tune

from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.schedule import Config, Constraint


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
        self._predicates = [_predicate(c.expr, list(self.domains)) for c in self.constraints]

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
        point = [values.get(name) for name in self.domains]
        substitutions = [(self._variables[name], z3.IntVal(v)) for name, v in values.items()]
        for c, predicate in zip(self.constraints, self._predicates, strict=True):
            verdict = _holds(predicate, point)
            if verdict is None:  # not translated, a knob without a value, or a zero divisor
                verdict = not z3.is_false(z3.simplify(z3.substitute(c.expr, *substitutions)))
            if not verdict:
                broken.append(c.name)
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

    def neighbours(self, config: Config) -> list[Config]:
        """The configs one step from `config` along one knob's domain (the next value up,
        then down), knob by knob in declaration order; a step the constraints refuse is
        repaired by the first step along another knob that makes it valid (a longer K block
        with a shorter M block, whose product a cache bounds)."""
        found: list[Config] = []
        for step in self._steps(config):
            repaired = step if self.contains(step) else None
            if repaired is None:
                moved = next(name for name in step if step[name] != config.get(name))
                repairs = (c for c in self._steps(step) if c[moved] == step[moved])
                repaired = next((c for c in repairs if c != config and self.contains(c)), None)
            if repaired is not None and repaired not in found:
                found.append(repaired)
        return found

    def _steps(self, config: Config) -> list[Config]:
        """`config` moved one step along one knob's domain, each way, in declaration order."""
        steps = []
        for name, values in self.domains.items():
            if config.get(name) in values:
                at = values.index(config[name])
                steps += [
                    {**config, name: values[i]} for i in (at + 1, at - 1) if 0 <= i < len(values)
                ]
        return steps

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
        """Valid configs as value tuples, sorted (computed once)."""
        if self._configs is None:
            found = self._walk() if all(self._predicates) else None
            self._configs = sorted(found if found is not None else self._solve())
            self._valid = set(self._configs)
        return self._configs

    def _walk(self) -> list[tuple[int, ...]] | None:
        """Depth-first over the domains, smallest first, each constraint checked once
        its last knob has a value; None when a divisor is zero (z3 leaves x/0 unspecified,
        so z3 decides those)."""
        domains = list(self.domains.values())
        # Knobs with few values first: the constraints that use them (mostly switches, such
        # as PACK or UNIT) are checked, and prune, near the root.
        order = sorted(range(len(domains)), key=lambda knob: len(domains[knob]))
        depth_of = {knob: depth for depth, knob in enumerate(order)}
        checks: list[list[Callable]] = [[] for _ in domains]
        point: list = [None] * len(domains)  # in declaration order
        for predicate in self._predicates:
            function, used = predicate
            if not used:  # no knob: true or false for every config
                try:
                    if not function(point):
                        return []
                except ZeroDivisionError:
                    return None
                continue
            checks[max(depth_of[knob] for knob in used)].append(function)
        found: list[tuple[int, ...]] = []

        def descend(depth: int) -> None:
            knob = order[depth]
            for value in domains[knob]:
                point[knob] = value
                if all(check(point) for check in checks[depth]):
                    if depth + 1 == len(domains):
                        found.append(tuple(point))
                    else:
                        descend(depth + 1)

        try:
            descend(0) if domains else found.append(())
        except ZeroDivisionError:
            return None
        return found

    def _solve(self) -> list[tuple[int, ...]]:
        """Valid configs by z3: for each value of the first knob, models are enumerated with
        blocking clauses over the other knobs (few clauses per check)."""
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
        return found


# z3 operations `_predicate` translates, with the Python function of their operands.
_BINARY: dict[int, Callable[[int, int], int | bool]] = {
    z3.Z3_OP_LE: operator.le,
    z3.Z3_OP_LT: operator.lt,
    z3.Z3_OP_GE: operator.ge,
    z3.Z3_OP_GT: operator.gt,
    z3.Z3_OP_EQ: operator.eq,
    z3.Z3_OP_IFF: operator.eq,
    z3.Z3_OP_IDIV: lambda a, b: _div(a, b),
    z3.Z3_OP_MOD: lambda a, b: _mod(a, b),
}
_FOLDED: dict[int, Callable[[int, int], int]] = {
    z3.Z3_OP_ADD: operator.add,
    z3.Z3_OP_SUB: operator.sub,
    z3.Z3_OP_MUL: operator.mul,
}

Term = Callable[[list], int | bool]


def _mod(a: int, b: int) -> int:
    """z3's (SMT-LIB's) integer mod: never negative, whatever the signs."""
    return a % abs(b)


def _div(a: int, b: int) -> int:
    """z3's integer division, the quotient matching `_mod`: a == b * _div(a, b) + _mod(a, b)."""
    return (a - _mod(a, b)) // b


def _predicate(expr: z3.ExprRef, knobs: list[str]) -> tuple[Term, frozenset[int]] | None:
    """`expr` as a Python function of a list of knob values (indexed like `knobs`), built as
    closures over its terms, and the indices of the knobs it uses; None when it uses an
    operation not translated here. `and`/`or`/`=>` short-circuit, so a guarded division
    (`b != 0 and a % b == 0`) never divides by zero."""
    used: set[int] = set()

    def build(e: z3.ExprRef) -> Term:
        kind, args = e.decl().kind(), e.children()
        if z3.is_int_value(e):
            value = e.as_long()
            return lambda v: value
        if kind in (z3.Z3_OP_TRUE, z3.Z3_OP_FALSE):
            truth = kind == z3.Z3_OP_TRUE
            return lambda v: truth
        if kind == z3.Z3_OP_UNINTERPRETED and not args and e.sort() == z3.IntSort():
            index = knobs.index(str(e))  # ValueError: not a knob
            used.add(index)
            return lambda v: v[index]
        parts = [build(a) for a in args]
        if kind in _BINARY and len(parts) == 2:
            op, (a, b) = _BINARY[kind], parts
            return lambda v: op(a(v), b(v))
        if kind in _FOLDED and parts:
            fold, (first, *rest) = _FOLDED[kind], parts
            return lambda v: functools.reduce(fold, (p(v) for p in rest), first(v))
        if kind == z3.Z3_OP_AND:
            return lambda v: all(p(v) for p in parts)
        if kind == z3.Z3_OP_OR:
            return lambda v: any(p(v) for p in parts)
        if kind == z3.Z3_OP_IMPLIES and len(parts) == 2:
            a, b = parts
            return lambda v: not a(v) or b(v)
        if kind == z3.Z3_OP_NOT:
            return lambda v: not parts[0](v)
        if kind == z3.Z3_OP_UMINUS:
            return lambda v: -parts[0](v)
        if kind == z3.Z3_OP_DISTINCT:
            return lambda v: len({p(v) for p in parts}) == len(parts)
        if kind == z3.Z3_OP_ITE:
            c, a, b = parts
            return lambda v: a(v) if c(v) else b(v)
        raise ValueError(f"z3 operation {e.decl().name()} is not translated")

    try:
        return build(expr), frozenset(used)
    except ValueError:
        return None


def _holds(predicate: tuple[Callable, frozenset[int]] | None, point: list) -> bool | None:
    """Whether a translated constraint holds at `point`; None when it cannot say."""
    if predicate is None or any(point[i] is None for i in predicate[1]):
        return None
    try:
        return bool(predicate[0](point))
    except ZeroDivisionError:
        return None
