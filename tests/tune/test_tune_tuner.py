"""The tuning loop end to end: failure isolation, the race, resume, keying and the CLI."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import replace

import pytest

from mlirtune.cli import main
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.tune.db import TuningDB
from mlirtune.tune.evaluator import EvaluatorSettings, IsolatedEvaluator
from mlirtune.tune.problem import generate
from mlirtune.tune.strategies import config_key
from mlirtune.tune.tuner import TuneOptions, tune
from mlirtune.workloads.matmul import Matmul
from tests.faulty import faulty_engines

pytestmark = [pytest.mark.jit, pytest.mark.subprocess]

SIZE = {"M": 32, "N": 32, "K": 32}
FAST = EvaluatorSettings(workers=2, compile_timeout_s=60, run_timeout_s=3)


def _options(**kwargs) -> TuneOptions:
    return TuneOptions(**{"strategy": "exhaustive", "race_rounds": 2, "evaluator": FAST, **kwargs})


def test_bad_candidates_are_recorded_and_never_win(tmp_path):
    workload = Matmul(**SIZE)
    configs = generate(workload, HostCPU()).space.enumerate()[:6]
    faults = dict(
        zip(
            (tuple(sorted(c.items())) for c in configs[1:4]),
            ("segfault", "hang", "wrong_result"),
            strict=True,
        )
    )
    problem = generate(workload, HostCPU())
    faulty = replace(FAST, engine=faulty_engines(faults))
    with TuningDB(tmp_path / "t.db") as db:
        report = tune(problem, _options(budget=6, evaluator=faulty), db)
        stored = {r.status for r in db.records(problem.key) if r.role == "candidate"}
    assert report.failed_by_status == {"crash": 1, "timeout": 1, "wrong_result": 1}
    assert stored == {"ok", "crash", "timeout", "wrong_result"}
    assert len(report.evaluated) == 6
    faulty = [dict(k) for k in faults]
    assert report.best not in faulty
    assert report.to_json()["best_gflops"] > 0


def test_resume_measures_nothing_twice(tmp_path):
    workload = Matmul(**SIZE)
    problem = generate(workload, HostCPU())
    with TuningDB(tmp_path / "t.db") as db:
        first = tune(problem, _options(budget=3), db)
        second = tune(problem, _options(budget=5), db)
        candidates = [r for r in db.records(problem.key) if r.role == "candidate"]
    assert first.resumed == 0 and second.resumed == 3
    assert len(candidates) == 5
    assert len({json.dumps(r.params, sort_keys=True) for r in candidates}) == 5


def test_records_of_another_target_are_not_reused(tmp_path):
    workload = Matmul(**SIZE)
    with TuningDB(tmp_path / "t.db") as db:
        tune(generate(workload, HostCPU()), _options(budget=2), db)
        host = HostCPU()  # the other target differs from whatever host this runs on
        other = generate(workload, HostCPU(l2_bytes=host.features.l2_bytes // 2))
        report = tune(other, _options(budget=2), db)
    assert report.resumed == 0


def test_cli_json_report(tmp_path, capsys):
    code = main(["tune", "matmul", "M=32", "N=32", "K=32", "--budget", "3", "--strategy",
                 "random", "--db", str(tmp_path / "t.db"), "--json"])  # fmt: skip
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    for field in ("best_params", "best_gflops", "baseline_gflops", "speedup_vs_baseline",
                  "evaluated", "failed_by_status", "space_size"):  # fmt: skip
        assert field in report
    assert report["evaluated"] == 3
    assert report["space_size"] >= 3
    assert report["best_gflops"] > 0 and report["baseline_gflops"] > 0
    assert main(["db", "list", "--db", str(tmp_path / "t.db")]) == 0
    listing = capsys.readouterr().out
    assert "matmul" in listing and "M=32" in listing


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--budget", "0"], "--budget must be a positive number"),
        (["--budget", "2", "--strategy", "annealing"], "unknown strategy 'annealing'"),
        ([], "give a budget"),
        (["--budget", "2", "--time-limit", "-1"], "--time-limit must be positive"),
    ],
)
def test_cli_bad_input(tmp_path, capsys, argv, message):
    code = main(["tune", "matmul", "M=32", "N=32", "K=32", "--db", str(tmp_path / "t.db"), *argv])
    assert code == 2
    assert message in capsys.readouterr().err


def test_cli_unreadable_db(tmp_path, capsys):
    bad = tmp_path / "not-a.db"
    bad.write_text("this is not sqlite")
    code = main(["tune", "matmul", "M=32", "N=32", "K=32", "--budget", "2", "--db", str(bad)])
    assert code == 2
    assert str(bad) in capsys.readouterr().err


def test_kill_mid_run_then_resume(tmp_path):
    """SIGKILL the tuner once some candidates are stored; the same command then resumes:
    nothing stored is measured again and nothing is lost. The orphaned workers exit and
    remove the scratch folder the dead tuner left."""
    db_path = tmp_path / "t.db"
    scratch_root = tmp_path / "tmp"
    scratch_root.mkdir()
    command = [sys.executable, "-m", "mlirtune", "tune", "matmul", "M=32", "N=32", "K=32",
               "--budget", "8", "--strategy", "exhaustive", "--db", str(db_path),
               "--json"]  # fmt: skip
    environment = {**os.environ, "TMPDIR": str(scratch_root)}
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=environment
    )
    stored_at_kill = 0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        stored_at_kill = _candidates(db_path)
        if stored_at_kill >= 3:
            break
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    stored_at_kill = _candidates(db_path)
    assert 0 < stored_at_kill < 8
    assert list(scratch_root.glob("mlirtune-tune-*")), "the tuner's scratch folder was not there"
    deadline = time.monotonic() + 60
    while list(scratch_root.glob("mlirtune-tune-*")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not list(scratch_root.glob("mlirtune-tune-*"))
    rerun = subprocess.run(command, capture_output=True, text=True, timeout=300, check=True)
    report = json.loads(rerun.stdout)
    assert report["resumed"] == stored_at_kill
    assert report["evaluated"] == 8
    assert _candidates(db_path) == 8


def _candidates(db_path) -> int:
    if not db_path.exists():
        return 0
    try:
        with sqlite3.connect(db_path) as connection:
            return connection.execute(
                "SELECT COUNT(*) FROM records WHERE role = 'candidate'"
            ).fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def test_cli_empty_space_names_the_conflict(tmp_path, capsys, monkeypatch):
    from mlirtune import targets

    monkeypatch.setitem(targets.TARGETS, "host", lambda: HostCPU(vector_registers=2))
    code = main(["tune", "matmul", "M=32", "N=32", "K=32", "--budget", "2",
                 "--db", str(tmp_path / "t.db")])  # fmt: skip
    assert code == 2
    error = capsys.readouterr().err
    assert "[space]" in error and "register_budget" in error


def test_race_rounds_are_split_over_two_worker_processes(tmp_path, monkeypatch):
    races = IsolatedEvaluator.races
    calls = []

    def spy(self, configs, rounds, worker_indices, **kwargs):
        pids = [self._workers[i].process.pid for i in worker_indices if self._workers[i]]
        result = races(self, configs, rounds, worker_indices, **kwargs)
        calls.append((list(worker_indices), rounds, pids, result))
        return result

    monkeypatch.setattr(IsolatedEvaluator, "races", spy)
    problem = generate(Matmul(**SIZE), HostCPU())
    with TuningDB(tmp_path / "t.db") as db:
        report = tune(problem, _options(budget=4, race_rounds=3), db)
    ((indices, rounds, pids, parts),) = calls  # both processes race at once
    assert indices == [0, 1] and len(set(pids)) == 2  # two processes
    assert rounds == 2  # ceil(3 / 2) each
    assert len(report.race) == len(parts[0])
    # The baseline (first contender) is judged on the rounds of both processes, in order.
    both = [s for part in parts for samples in part[0] for s in samples]
    assert report.race[config_key(problem.baseline)] == both
    assert 1 <= sum(len(part[0]) for part in parts) <= 4


@pytest.fixture
def issued(monkeypatch) -> list[dict[str, int]]:
    """The configs the evaluator pulls, in the order it pulls them: its outcomes come
    back in completion order, which parallel compiles may shuffle."""
    evaluate = IsolatedEvaluator.evaluate
    pulled_configs: list[dict[str, int]] = []

    def spy(self, next_config, on_result, cutoff=None):
        def pulled():
            config = next_config()
            if config is not None:
                pulled_configs.append(config)
            return config

        return evaluate(self, pulled, on_result, cutoff)

    monkeypatch.setattr(IsolatedEvaluator, "evaluate", spy)
    return pulled_configs


def test_baseline_is_timed_first_and_last_within_the_search(tmp_path, issued):
    """The baseline is the first and the last job of the search's stream of evaluations
    (timed while other workers compile candidates) and both measurements are stored."""
    problem = generate(Matmul(**SIZE), HostCPU())
    with TuningDB(tmp_path / "t.db") as db:
        report = tune(problem, _options(budget=3), db)
        roles = [r.role for r in db.records(problem.key)]
    baseline = problem.slot_values(problem.baseline)
    assert len(issued) == 5 and issued[0] == issued[-1] == baseline
    assert all(c != baseline for c in issued[1:-1])
    assert roles.count("baseline") == 2 and roles.count("candidate") == 3
    assert report.baseline_first.ok and report.baseline_last.ok
    assert report.baseline_first is not report.baseline_last


def test_guided_search_starts_at_the_baselines_neighbours(tmp_path, issued):
    problem = generate(Matmul(**SIZE), HostCPU())
    neighbours = problem.space.neighbours(problem.baseline)
    with TuningDB(tmp_path / "t.db") as db:
        report = tune(problem, _options(strategy="model", budget=len(neighbours)), db)
    assert issued[1:-1] == [problem.slot_values(c) for c in neighbours]
    assert len(report.evaluated) == len(neighbours)
    issued.clear()
    with TuningDB(tmp_path / "e.db") as db:
        tune(problem, _options(budget=2), db)
    assert issued[1:-1] == [problem.slot_values(c) for c in problem.space.enumerate()[:2]]
