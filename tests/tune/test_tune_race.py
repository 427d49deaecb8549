"""The final race's verdict, judged on scripted rounds (no compile, no timing)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from mlirtune.cli.tune_report import print_report
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.tune.outcome import Outcome
from mlirtune.tune.problem import Config, generate
from mlirtune.tune.results import Candidate, TuneReport
from mlirtune.tune.tuner import TuneOptions, race_finalists, verdict_of
from mlirtune.workloads.matmul import Matmul


@dataclass
class ScriptedRaces:
    """An evaluator whose race rounds are given: per worker, per config, per round, the
    samples (the baseline first, as race_finalists sends it)."""

    parts: list[list[list[list[float]]]]
    worker_count: int = 2

    def races(self, configs, rounds, worker_indices, *, until_settled=False):
        return self.parts


class NoDB:
    def record(self, *args, **kwargs) -> None:
        pass


@pytest.fixture(scope="module")
def problem():
    return generate(Matmul(M=64, N=64, K=64), HostCPU())


def _finalists(problem, count: int) -> list[Config]:
    configs = [c for c in problem.space.enumerate() if c != problem.baseline]
    return configs[:count]


def _race(problem, finalists: list[Config], round_seconds: list[list[float]]):
    """Race `finalists` where config i (the baseline first) takes round_seconds[i][r] in
    round r, the rounds split over two workers."""
    half = len(round_seconds[0]) // 2
    parts = [[[[s] for s in seconds[:half]] for seconds in round_seconds]]
    parts.append([[[s] for s in seconds[half:]] for seconds in round_seconds])
    ranked = [Candidate(c, Outcome("ok", samples=(1.0,), flops=1.0)) for c in finalists]
    options = TuneOptions(finalists=len(finalists), race_rounds=len(round_seconds[0]))
    return race_finalists(problem, ScriptedRaces(parts), NoDB(), ranked, options)


ROUNDS_WITH_A_SLOWER_WINNER = [
    [1.00, 1.00, 1.00, 1.00],  # the baseline
    [0.97, 0.98, 0.97, 0.98],  # won every round
    [0.90, 0.90, 0.90, 1.01],  # the fastest median, but lost the last round
    [1.10, 1.10, 1.10, 1.10],
]


def test_the_fastest_finalist_that_won_every_round_wins(problem):
    steady, faster_but_lost_once, slower = _finalists(problem, 3)
    race, winner = _race(
        problem, [steady, faster_but_lost_once, slower], ROUNDS_WITH_A_SLOWER_WINNER
    )
    assert winner == steady
    assert len(race) == 4


def test_the_report_shows_the_winner_not_the_fastest_median(problem, capsys):
    finalists = _finalists(problem, 3)
    race, winner = _race(problem, finalists, ROUNDS_WITH_A_SLOWER_WINNER)
    baseline = Outcome("ok", samples=(1.0, 1.0), flops=1.0)
    report = TuneReport(
        problem=problem,
        strategy="exhaustive",
        evaluated=[Candidate(c, Outcome("ok", samples=(1.0,), flops=1.0)) for c in finalists],
        resumed=0,
        baseline_first=baseline,
        baseline_last=baseline,
        race=race,
        winner=winner,
        verdict=verdict_of(problem, race, winner, baseline),
        warnings=[],
    )
    print_report(report, problem.target)
    shown = {line.split()[0]: line.split()[1:] for line in capsys.readouterr().out.splitlines()}
    assert shown["best:"] == [f"{k}={v}" for k, v in problem.slot_values(finalists[0]).items()]


def test_of_several_finalists_that_won_every_round_the_fastest_wins(problem):
    first, second = _finalists(problem, 2)
    _, winner = _race(
        problem,
        [first, second],
        [[1.0, 1.0], [0.95, 0.99], [0.90, 0.97]],
    )
    assert winner == second


def test_the_baseline_stands_when_every_finalist_lost_a_round(problem):
    first, second = _finalists(problem, 2)
    _, winner = _race(
        problem,
        [first, second],
        [[1.0, 1.0, 1.0, 1.0], [0.9, 0.9, 1.0, 0.9], [0.8, 1.2, 0.8, 0.8]],
    )
    assert winner is None  # a tie is no win
