"""Each search strategy on a small space: valid, unique, reproducible proposals."""

from __future__ import annotations

import pytest

from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.op import OpInfo
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.tune.outcome import Outcome
from mlirtune.tune.space_for import space_for
from mlirtune.tune.strategies import STRATEGIES, ModelRanked, config_key, strategy_class

OP = OpInfo("matmul", {"M": 16, "N": 32, "K": 16}, ("f32", "f32", "f32"))


@pytest.fixture(scope="module")
def space():
    return space_for(OP, "contraction", HostCPU(isa="avx512"))


def _objective(config) -> Outcome:
    """A synthetic GFLOP/s with one best config: large register tiles, KU=2."""
    score = config["MR"] * config["NR"] + 10 * (config["KU"] == 2) + config["MC"] / 64
    return Outcome("ok", samples=(1.0 / score,), flops=1e9)


def _drain(strategy, limit=None) -> list[dict]:
    proposed = []
    while limit is None or len(proposed) < limit:
        config = strategy.ask()
        if config is None:
            break
        strategy.tell(config, _objective(config))
        proposed.append(config)
    return proposed


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_proposals_are_valid_unique_and_cover_the_space(space, name):
    proposed = _drain(strategy_class(name)(space, seed=1))
    keys = [config_key(c) for c in proposed]
    assert len(keys) == len(set(keys)) == space.count()
    assert all(space.contains(c) for c in proposed)


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_a_seed_reproduces_the_sequence(space, name):
    first = _drain(strategy_class(name)(space, seed=3), limit=15)
    again = _drain(strategy_class(name)(space, seed=3), limit=15)
    assert first == again


def test_random_orders_differ_between_seeds(space):
    one = _drain(strategy_class("random")(space, seed=1), limit=10)
    two = _drain(strategy_class("random")(space, seed=2), limit=10)
    assert one != two


def test_model_measures_the_cheapest_configs_first(space):
    proposed = _drain(ModelRanked(space), limit=10)
    costs = [space.cost(c) for c in proposed]
    assert costs == sorted(costs)
    assert costs[0] == min(space.cost(c) for c in space.enumerate())


def test_tpe_proposals_follow_what_it_is_told(space):
    """Same seed, opposite feedback: the first proposal agrees, the later ones do not (the
    sampler's model replaces random start-up trials, infeasible proposals included)."""

    def run(sign: float) -> list[dict]:
        strategy = strategy_class("tpe")(space, seed=0)
        proposed = []
        for _ in range(25):
            config = strategy.ask()
            gflops = _objective(config).gflops
            value = gflops if sign > 0 else 1e4 / gflops
            strategy.tell(config, Outcome("ok", samples=(1.0 / value,), flops=1e9))
            proposed.append(config)
        return proposed

    rewarded, punished = run(1.0), run(-1.0)
    assert rewarded[0] == punished[0]
    assert rewarded != punished


def test_unknown_strategy_lists_the_known_ones():
    with pytest.raises(UsageError, match="exhaustive, random, tpe, model"):
        strategy_class("annealing")
