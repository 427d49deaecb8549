"""Isolated evaluation: a crash, a hang, a wrong result or a compile error costs one
candidate, is recorded with its status, and the worker is replaced."""

from __future__ import annotations

import pytest

from mlirtune.tune.evaluator import EvaluatorSettings, IsolatedEvaluator
from mlirtune.tune.worker import RACE_BENCH
from mlirtune.workloads.matmul import Matmul
from tests.faulty import FaultyHost

GOOD = {"MC": 32, "NC": 32, "KC": 32, "MR": 4, "NR": 16, "KU": 1}
SETTINGS = EvaluatorSettings(workers=2, compile_timeout_s=60, run_timeout_s=3)


def _variant(**changes) -> dict[str, int]:
    return {**GOOD, **changes}


@pytest.fixture(scope="module")
def workload():
    return Matmul(M=32, N=32, K=32)


def test_good_config_is_ok_with_samples(workload):
    with IsolatedEvaluator(workload, FaultyHost({}), settings=SETTINGS) as evaluator:
        (outcome,) = evaluator.evaluate_all([GOOD])
    assert outcome.status == "ok", outcome.detail
    assert len(outcome.samples) >= SETTINGS.bench_options.min_samples
    assert outcome.gflops > 0


def test_each_failure_is_isolated_and_classified(workload):
    segfault, hang, wrong = _variant(MR=2), _variant(MR=8), _variant(NR=32)
    broken = _variant(MR=0)  # the schedule rejects it: a compile error
    faults = {
        tuple(sorted(segfault.items())): "segfault",
        tuple(sorted(hang.items())): "hang",
        tuple(sorted(wrong.items())): "wrong_result",
    }
    configs = [segfault, GOOD, hang, wrong, broken, GOOD]
    with IsolatedEvaluator(workload, FaultyHost(faults), settings=SETTINGS) as evaluator:
        outcomes = evaluator.evaluate_all(configs)
    statuses = [o.status for o in outcomes]
    assert statuses == ["crash", "ok", "timeout", "wrong_result", "compile_error", "ok"]
    assert "SIGSEGV" in outcomes[0].detail
    assert "timeout" in outcomes[2].detail
    assert outcomes[3].detail.startswith("verification FAILED") and "C[0, 0]" in outcomes[3].detail
    assert "MR" in outcomes[4].detail


def test_race_interleaves_configs_in_one_worker(workload):
    configs = [GOOD, _variant(MR=8)]
    with IsolatedEvaluator(workload, FaultyHost({}), settings=SETTINGS) as evaluator:
        samples = evaluator.race(configs, rounds=3)
    assert len(samples) == 2
    assert all(len(rounds) == 3 for rounds in samples)
    assert all(len(r) >= RACE_BENCH.min_samples for rounds in samples for r in rounds)
