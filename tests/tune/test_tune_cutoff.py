"""The search's early timing cutoff: what the tuner asks the evaluator to cut short."""

from __future__ import annotations

from dataclasses import replace

import pytest

from mlirtune.interfaces.errors import UsageError
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.tune.db import TuningDB
from mlirtune.tune.evaluator import EvaluatorSettings, IsolatedEvaluator
from mlirtune.tune.problem import generate
from mlirtune.tune.tuner import TuneOptions, tune
from mlirtune.workloads.matmul import Matmul

pytestmark = [pytest.mark.jit, pytest.mark.subprocess]

FAST = EvaluatorSettings(workers=2, compile_timeout_s=60, run_timeout_s=3)


@pytest.fixture
def cutoffs(monkeypatch):
    """(config, cutoff asked as it was handed out, fastest median reported before it)."""
    evaluate = IsolatedEvaluator.evaluate
    seen: list[tuple[dict, float | None, float | None]] = []

    def spy(self, next_config, on_result, cutoff=None):
        medians: list[float] = []

        def reported(config, outcome):
            if outcome.ok:
                medians.append(outcome.median_s)
            on_result(config, outcome)

        def asked(config):
            limit = cutoff(config) if cutoff else None
            seen.append((config, limit, min(medians) if medians else None))
            return limit

        return evaluate(self, next_config, reported, asked)

    monkeypatch.setattr(IsolatedEvaluator, "evaluate", spy)
    return seen


def _tune(tmp_path, **options):
    problem = generate(Matmul(M=32, N=32, K=32), HostCPU())
    settings = TuneOptions(strategy="exhaustive", budget=5, race_rounds=2, evaluator=FAST)
    with TuningDB(tmp_path / "t.db") as db:
        tune(problem, replace(settings, **options), db)
    return problem.slot_values(problem.baseline)


def test_candidates_are_cut_off_past_the_fastest_median_so_far(tmp_path, cutoffs):
    baseline = _tune(tmp_path, cutoff_factor=1.5)
    assert cutoffs[0][0] == cutoffs[-1][0] == baseline
    assert cutoffs[0][1] is None and cutoffs[-1][1] is None  # the baseline: in full
    candidates = cutoffs[1:-1]
    assert len(candidates) == 5
    for _, limit, fastest in candidates:
        assert limit == (None if fastest is None else pytest.approx(1.5 * fastest))
    assert any(limit is not None for _, limit, _ in candidates)


def test_no_cutoff_factor_times_every_candidate_in_full(tmp_path, cutoffs):
    _tune(tmp_path, cutoff_factor=None)
    assert len(cutoffs) == 7 and all(limit is None for _, limit, _ in cutoffs)


def test_a_cutoff_factor_below_one_is_refused():
    with pytest.raises(UsageError, match="cutoff_factor must be at least 1"):
        TuneOptions(budget=1, cutoff_factor=0.9).check()
