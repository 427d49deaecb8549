"""Search strategies behind one ask/tell interface.

A strategy proposes configs of a SearchSpace (`ask`) and hears how each did (`tell`). The
tuner owns the budget, the database and the evaluation; a strategy only decides what to try
next, so any of them can drive a live search or a replay over stored results.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Any, ClassVar

from mlirtune.interfaces.errors import UsageError
from mlirtune.tune.outcome import Outcome
from mlirtune.tune.space import SearchSpace

Config = dict[str, int]


def config_key(config: Config) -> tuple[tuple[str, int], ...]:
    """A hashable identity for a config."""
    return tuple(sorted(config.items()))


class Strategy(ABC):
    """Proposes configs of `space`; reproducible for a given `seed`."""

    name: ClassVar[str]
    description: ClassVar[str]
    # Whether the tuner evaluates the baseline's neighbours before the first ask (the
    # guided strategies); the exhaustive and random orders are references, kept as they are.
    neighbours_first: ClassVar[bool] = True

    def __init__(self, space: SearchSpace, seed: int = 0) -> None:
        self.space = space
        self.seed = seed

    @abstractmethod
    def ask(self) -> Config | None:
        """The next config to evaluate, or None when the strategy has nothing left."""

    def tell(self, config: Config, outcome: Outcome) -> None:  # noqa: B027 - optional hook
        """Learn from the outcome of a config this strategy proposed."""


class _Ordered(Strategy):
    """Walks a fixed order of the space's configs."""

    def __init__(self, space: SearchSpace, seed: int = 0) -> None:
        super().__init__(space, seed)
        self._order: Iterator[Config] | None = None

    def ask(self) -> Config | None:
        if self._order is None:
            self._order = iter(self.order())
        return next(self._order, None)

    @abstractmethod
    def order(self) -> list[Config]:
        """Every config, in the order to try them."""


class Exhaustive(_Ordered):
    name = "exhaustive"
    description = "every config of the space, in enumeration order"
    neighbours_first = False

    def order(self) -> list[Config]:
        return self.space.enumerate()


class RandomSearch(_Ordered):
    name = "random"
    description = "unique configs in a seeded random order"
    neighbours_first = False

    def order(self) -> list[Config]:
        return self.space.sample(self.space.count(), seed=self.seed)


class ModelRanked(_Ordered):
    name = "model"
    description = "configs ranked by the target's analytic cost model, best first"

    def order(self) -> list[Config]:
        configs = self.space.enumerate()
        return sorted(configs, key=lambda c: (self.space.cost(c), config_key(c)))


class Tpe(Strategy):
    """Optuna's TPE sampler over the knobs' domains. Configs outside the constrained space
    are told to Optuna as infeasible (a positive trial constraint) without being run, so the
    sampler learns where the valid region is; repeats get the known value at once."""

    name = "tpe"
    description = "Optuna's Tree-structured Parzen Estimator, constraint-aware"
    # Optuna proposals per ask before repairing the last one into the nearest valid config
    # not yet seen: TPE proposes many invalid configs (and, late in a search, repeats), and
    # each proposal costs more as its trial history grows.
    MAX_PROPOSALS = 3

    def __init__(self, space: SearchSpace, seed: int = 0) -> None:
        super().__init__(space, seed)
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._optuna = optuna
        sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=10, multivariate=True)
        self._study = optuna.create_study(direction="maximize", sampler=sampler)
        self._pending: dict[tuple, list[Any]] = {}
        self._known: dict[tuple, float] = {}
        self._fallback = random.Random(seed)

    def ask(self) -> Config | None:
        if len(self._known) + len(self._pending) >= self.space.count():
            return None
        config: Config = {}
        for _ in range(self.MAX_PROPOSALS):
            trial = self._study.ask()
            config = {
                name: trial.suggest_categorical(name, list(values))
                for name, values in self.space.domains.items()
            }
            key = config_key(config)
            violations = self.space.violations(config)
            trial.set_constraint("violations", float(len(violations)))
            if violations:
                self._study.tell(trial, 0.0)
            elif key in self._known:
                self._study.tell(trial, self._known[key])
            elif key in self._pending:  # already running: told together when it finishes
                self._pending[key].append(trial)
            else:
                self._pending.setdefault(key, []).append(trial)
                return config
        return self._nearest_unseen(config)

    def tell(self, config: Config, outcome: Outcome) -> None:
        key = config_key(config)
        value = outcome.gflops or 0.0
        self._known[key] = value
        for trial in self._pending.pop(key, []):
            self._study.tell(trial, value)

    def _nearest_unseen(self, proposal: Config) -> Config | None:
        """The valid config neither evaluated nor pending that differs from `proposal` in the
        fewest knobs (ties broken by the seeded generator)."""
        seen = set(self._known) | set(self._pending)
        left = [c for c in self.space.enumerate() if config_key(c) not in seen]
        if not left:
            return None
        distance = [sum(c[k] != proposal.get(k) for k in c) for c in left]
        closest = min(distance)
        nearest = [c for c, d in zip(left, distance, strict=True) if d == closest]
        config = self._fallback.choice(nearest)
        self._pending.setdefault(config_key(config), [])
        return config


STRATEGIES: dict[str, type[Strategy]] = {
    cls.name: cls for cls in (Exhaustive, RandomSearch, Tpe, ModelRanked)
}


def strategy_class(name: str) -> type[Strategy]:
    """The strategy called `name`, or a UsageError listing them."""
    try:
        return STRATEGIES[name]
    except KeyError:
        raise UsageError(
            f"unknown strategy {name!r}; choose one of {', '.join(STRATEGIES)}", stage="tune"
        ) from None
