"""Tuning on a Ray cluster: two simulated nodes on this machine, of two CPU classes.

The head node is this CPU under the class `wide`; the second runs with its kernels
restricted to SSE (MLIRTUNE_ISA in its environment), under the class `narrow`, so the two
have different fingerprints as two kinds of machine would. Each node has one CPU, so one
candidate actor. The cluster is shared by the module's tests and shut down after them,
whatever happens.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from mlirtune.cli import main
from mlirtune.fleet.cluster import CLASS_LABEL
from mlirtune.fleet.evaluator import FleetEvaluator
from mlirtune.fleet.run import tune_per_class
from mlirtune.ir.context import new_context
from mlirtune.specs.library import SpecLibrary
from mlirtune.specs.sources import fetch
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.tune.db import TuningDB
from mlirtune.tune.evaluator import EvaluatorSettings
from mlirtune.tune.problem import generate
from mlirtune.tune.strategies import config_key
from mlirtune.tune.tuner import TuneOptions, tune
from mlirtune.workloads.matmul import Matmul

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

pytestmark = [pytest.mark.jit, pytest.mark.subprocess]

SIZE = {"M": 32, "N": 32, "K": 32}
FAST = EvaluatorSettings(compile_timeout_s=60, run_timeout_s=5)
SMALL_NODE = {"num_cpus": 1, "object_store_memory": 80 << 20, "include_dashboard": False}


@pytest.fixture(scope="module")
def cluster():
    fleet = Cluster(
        initialize_head=True, head_node_args={**SMALL_NODE, "labels": {CLASS_LABEL: "wide"}}
    )
    try:
        fleet.add_node(
            **SMALL_NODE, labels={CLASS_LABEL: "narrow"}, env_vars={"MLIRTUNE_ISA": "sse"}
        )
        fleet.wait_for_nodes()
        ray.init(address=fleet.address, logging_level="ERROR", log_to_driver=False)
        yield fleet
    finally:
        ray.shutdown()
        fleet.shutdown()


def _options(**kwargs) -> TuneOptions:
    return TuneOptions(**{"strategy": "exhaustive", "race_rounds": 2, "evaluator": FAST, **kwargs})


def test_a_fleet_tune_evaluates_what_a_local_one_does(cluster, tmp_path):
    problem = generate(Matmul(**SIZE), HostCPU())
    reports = {}
    for where in ("local", "fleet"):
        options = _options(budget=4, ray=cluster.address if where == "fleet" else None)
        with TuningDB(tmp_path / f"{where}.db") as db:
            reports[where] = tune(problem, options, db)
    configs = {w: sorted(config_key(c.config) for c in r.evaluated) for w, r in reports.items()}
    assert configs["fleet"] == configs["local"] and len(configs["local"]) == 4
    assert all(c.outcome.ok for r in reports.values() for c in r.evaluated)
    assert reports["fleet"].baseline_first.ok and reports["fleet"].baseline_last.ok


def test_a_killed_actor_costs_its_candidate_one_retry(cluster):
    target = HostCPU()
    problem = generate(Matmul(**SIZE), target)
    nodes = [n for n in _nodes() if n.cpu_class == "wide"]
    configs = [problem.slot_values(c) for c in problem.space.enumerate()[:4]]
    pending, outcomes, killed = list(configs), [], []
    with FleetEvaluator(ray, problem.workload, nodes, settings=FAST) as ev:
        ev.start_workers()

        def on_result(config, outcome):
            outcomes.append((config, outcome))
            if not killed:  # the actor was handed its next candidate before this report
                busy = next(a for a in ev._actors if a.job is not None)
                killed.append(busy.job.config)
                ray.kill(busy.handle)

        ev.evaluate(lambda: pending.pop(0) if pending else None, on_result)
        assert ev.worker_count == 1  # the dead actor was replaced on its live node
    assert killed and sorted(map(config_key, (c for c, _ in outcomes))) == sorted(
        map(config_key, configs)
    )
    assert all(outcome.ok for _, outcome in outcomes)  # the killed one ran again


def test_each_class_gets_its_search_and_its_library(cluster, tmp_path):
    db = tmp_path / "fleet.db"
    reports = tune_per_class(Matmul(**SIZE), None, _options(budget=3, ray=cluster.address), db)
    assert sorted(reports) == ["narrow", "wide"]
    keys = {name: report.problem.key.target_hash for name, report in reports.items()}
    assert keys["narrow"] != keys["wide"]
    assert reports["narrow"].problem.target.features.isa == "sse"
    out = tmp_path / "libs"
    assert main(["specs", "export", "--db", str(db), "--per-class", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["narrow.mlir", "wide.mlir"]
    for name in ("narrow", "wide"):
        with new_context():
            library = SpecLibrary.parse(fetch(str(out / f"{name}.mlir")))
        assert library.metadata["target_class"] == name
        assert [e.metadata["target"]["class"] for e in library.entries] == [name]
        assert library.metadata["target_hash"] == keys[name]


def test_a_killed_driver_resumes(cluster, tmp_path):
    db = tmp_path / "resume.db"
    command = [
        sys.executable,
        "-m",
        "mlirtune",
        "tune",
        "matmul",
        *(f"{k}={v}" for k, v in SIZE.items()),
    ]
    command += [
        "--budget",
        "8",
        "--strategy",
        "exhaustive",
        "--db",
        str(db),
        "--ray",
        cluster.address,
    ]
    driver = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 240
        while _candidates(db) < 3 and driver.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert driver.poll() is None, driver.stderr.read().decode()
        os.kill(driver.pid, signal.SIGKILL)
    finally:
        driver.kill()
        driver.wait()
    saved = _candidates(db)
    assert saved >= 3
    rerun = subprocess.run([*command, "--json"], capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert json.loads(rerun.stdout)["resumed"] == saved


def test_a_missing_class_is_one_line(cluster, capsys):
    code = main(["tune", "matmul", "M=32", "N=32", "K=32", "--budget", "2",
                 "--ray", cluster.address, "--per-class", "wide,zen9"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "no node of CPU class zen9" in err and "narrow, wide" in err
    assert len(err.strip().splitlines()) == 1


def _nodes():
    from mlirtune.fleet.cluster import fleet_nodes

    return fleet_nodes(ray)


def _candidates(db) -> int:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            return conn.execute("SELECT COUNT(*) FROM records WHERE role='candidate'").fetchone()[0]
    except sqlite3.Error:
        return 0
