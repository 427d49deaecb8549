"""Isolated evaluation: a crash, a hang, a wrong result or a compile error costs one
candidate, is recorded with its status, and the worker is replaced."""

from __future__ import annotations

from dataclasses import replace

import pytest

from mlirtune.interfaces.errors import MlirtuneError
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.tune.evaluator import EvaluatorSettings, IsolatedEvaluator
from mlirtune.tune.worker import RACE_BENCH, settled
from mlirtune.workloads.matmul import Matmul
from tests.faulty import faulty_engines, no_engine

GOOD = {"MC": 32, "NC": 32, "KC": 32, "MR": 4, "NR": 16, "KU": 1}
SETTINGS = EvaluatorSettings(workers=2, compile_timeout_s=60, run_timeout_s=3)


def _variant(**changes) -> dict[str, int]:
    return {**GOOD, **changes}


@pytest.fixture(scope="module")
def workload():
    return Matmul(M=32, N=32, K=32)


@pytest.mark.jit
@pytest.mark.subprocess
def test_good_config_is_ok_with_samples(workload):
    with IsolatedEvaluator(workload, HostCPU(), settings=SETTINGS) as evaluator:
        (outcome,) = evaluator.evaluate_all([GOOD])
    assert outcome.status == "ok", outcome.detail
    assert len(outcome.samples) >= SETTINGS.bench_options.min_samples
    assert outcome.gflops > 0


@pytest.mark.jit
@pytest.mark.subprocess
def test_workers_run_this_mlirtune_whatever_the_working_directory(workload, tmp_path, monkeypatch):
    for shadow in ("mlirtune", "numpy"):  # another checkout; a module named like numpy
        (tmp_path / shadow).mkdir()
        (tmp_path / shadow / "__init__.py").write_text(f"raise SystemExit('the {shadow} here')")
    monkeypatch.chdir(tmp_path)
    with IsolatedEvaluator(workload, HostCPU(), settings=SETTINGS) as evaluator:
        (outcome,) = evaluator.evaluate_all([GOOD])
    assert outcome.status == "ok", outcome.detail


@pytest.mark.jit
@pytest.mark.subprocess
def test_workers_started_ahead_serve_the_first_requests(workload):
    with IsolatedEvaluator(workload, HostCPU(), settings=SETTINGS) as evaluator:
        evaluator.start_workers()
        processes = [worker.process for worker in evaluator._workers]
        assert len(processes) == SETTINGS.workers and None not in processes
        outcomes = evaluator.evaluate_all([GOOD, _variant(KC=16)])
        assert [worker.process for worker in evaluator._workers] == processes  # none restarted
    assert [o.status for o in outcomes] == ["ok", "ok"], [o.detail for o in outcomes]


@pytest.mark.jit
@pytest.mark.subprocess
def test_each_failure_is_isolated_and_classified(workload):
    segfault, hang, wrong = _variant(MR=2), _variant(MR=8), _variant(NR=32)
    broken = _variant(MR=0)  # the schedule rejects it: a compile error
    faults = {
        tuple(sorted(segfault.items())): "segfault",
        tuple(sorted(hang.items())): "hang",
        tuple(sorted(wrong.items())): "wrong_result",
    }
    configs = [segfault, GOOD, hang, wrong, broken, GOOD]
    with IsolatedEvaluator(
        workload, HostCPU(), settings=replace(SETTINGS, engine=faulty_engines(faults))
    ) as evaluator:
        outcomes = evaluator.evaluate_all(configs)
    statuses = [o.status for o in outcomes]
    assert statuses == ["crash", "ok", "timeout", "wrong_result", "compile_error", "ok"]
    assert "SIGSEGV" in outcomes[0].detail
    assert "timeout" in outcomes[2].detail
    assert outcomes[3].detail.startswith("verification FAILED") and "C[0, 0]" in outcomes[3].detail
    assert "MR" in outcomes[4].detail


@pytest.mark.jit
@pytest.mark.subprocess
def test_race_interleaves_configs_in_one_worker(workload):
    configs = [GOOD, _variant(MR=8)]
    with IsolatedEvaluator(workload, HostCPU(), settings=SETTINGS) as evaluator:
        samples = evaluator.race(configs, rounds=3)
    assert len(samples) == 2
    assert all(len(rounds) == 3 for rounds in samples)
    assert all(len(r) >= RACE_BENCH.min_samples for rounds in samples for r in rounds)


def test_settled_once_every_finalist_lost_a_round():
    base = [[1.0, 1.0, 1.0], [2.0, 2.0]]  # samples per round: round medians 1.0 and 2.0
    assert not settled([base, [[0.9], [1.9]]])  # won every round so far
    assert settled([base, [[0.9], [2.0]]])  # a tie is no win
    assert not settled([base, [[0.9], [2.5]], [[0.5], [1.5]]])  # the second is unbeaten
    assert settled([base, [[1.1], [1.9]], [[0.5], [2.1]]])
    assert not settled([[], []])  # no round yet


@pytest.mark.jit
@pytest.mark.subprocess
def test_races_run_in_two_workers_and_stop_once_settled(workload):
    slow = _variant(MR=1, NR=1)  # about 25x slower than GOOD: loses its first round
    with IsolatedEvaluator(workload, HostCPU(), settings=SETTINGS) as evaluator:
        short = evaluator.races([GOOD, slow], 3, [0, 1], until_settled=True)
        full = evaluator.races([GOOD, slow], 2, [0, 1])
        pids = {w.process.pid for w in evaluator._workers}
    assert len(pids) == 2
    assert [len(samples) for part in full for samples in part] == [2, 2, 2, 2]
    # The worker first on the benchmark core stops after one round; the other is told to
    # stop, or stops after its own first round.
    rounds = sorted(len(part[0]) for part in short)
    assert rounds in ([0, 1], [1, 1])
    assert all(len(part[0]) == len(part[1]) for part in short)


@pytest.mark.jit
@pytest.mark.subprocess
def test_a_worker_that_cannot_start_is_an_error_not_a_crashed_candidate(workload):
    settings = replace(SETTINGS, engine=no_engine)
    evaluator = IsolatedEvaluator(workload, HostCPU(), settings=settings)
    with evaluator, pytest.raises(MlirtuneError, match=r"(?s)failed to start.*no engine on this"):
        evaluator.evaluate_all([GOOD, GOOD])
