"""Tuning on Ray against tuning here: candidates per second of the whole `mlirtune tune`
process for a 256^3 f32 matmul, and a simulated fleet of two CPU classes.

    python benchmarks/tune_distributed.py [--budget 200] [--fleet-budget 100] [--rounds 1]

Rates: `mlirtune tune ... --budget N` as a subprocess with a fresh database, wall clock
from start to exit (start-up, both baselines and the race included), three ways, one after
the other in each round: today's local workers (one per core), and `--ray ADDRESS` on a
one-node Ray cluster with one CPU (one actor) and with two (two actors). The clusters are
started before the clock (a fleet is up before one tunes on it) and stay up throughout.

Fleet: a cluster of two one-CPU nodes labelled as two CPU classes (the second restricted
to SSE kernels, so that the classes' records differ as two machines' would), tuned with
`--per-class` (both searches at once) and with `--per-class a` (one). Both nodes share
this machine's two cores, as two machines would not, so this bounds the overlap from below.

Ray's cost per candidate: the round trip of a no-op actor call, against the driver's own
per-result work (strategy, database), measured here in-process.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import ray
from ray.cluster_utils import Cluster

from mlirtune.fleet.cluster import CLASS_LABEL

SHAPE = ("matmul", "M=256", "N=256", "K=256")
NODE = {"object_store_memory": 80 << 20, "include_dashboard": False}


def tune_wall(extra: list[str], budget: int) -> tuple[float, dict]:
    """Wall seconds of one `mlirtune tune` with a fresh database, and its JSON report(s)."""
    folder = Path(tempfile.mkdtemp(prefix="tune-distributed-"))
    command = [sys.executable, "-m", "mlirtune", "tune", *SHAPE, "--budget", str(budget)]
    command += ["--db", str(folder / "t.db"), "--json", *extra]
    try:
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - start
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}): {done.stderr[-1500:]}")
    return wall, json.loads(done.stdout)


def single_node(cpus: int) -> Cluster:
    return Cluster(initialize_head=True, head_node_args={**NODE, "num_cpus": cpus})


def two_classes() -> Cluster:
    fleet = Cluster(
        initialize_head=True, head_node_args={**NODE, "num_cpus": 1, "labels": {CLASS_LABEL: "a"}}
    )
    fleet.add_node(**NODE, num_cpus=1, labels={CLASS_LABEL: "b"}, env_vars={"MLIRTUNE_ISA": "sse"})
    fleet.wait_for_nodes()
    return fleet


def rates(budget: int, rounds: int) -> None:
    clusters = {"ray, 1 actor": single_node(1), "ray, 2 actors": single_node(2)}
    ways = {"local workers": [], **{name: ["--ray", c.address] for name, c in clusters.items()}}
    walls: dict[str, list[float]] = {name: [] for name in ways}
    try:
        for _ in range(rounds):
            for name, extra in ways.items():
                wall, report = tune_wall(extra, budget)
                assert report["evaluated"] == budget and not report["resumed"], report
                walls[name].append(wall)
    finally:
        for c in clusters.values():
            c.shutdown()
    local = min(walls["local workers"])
    print(f"256^3 matmul, budget {budget}, whole process (best of {rounds}):")
    for name, seconds in walls.items():
        best = min(seconds)
        print(
            f"  {name:14s} {best:6.1f} s  {budget / best:5.2f} candidates/s  "
            f"{local / best:.2f}x local"
        )


def fleet(budget: int) -> None:
    cluster = two_classes()
    try:
        one, _ = tune_wall(["--ray", cluster.address, "--per-class", "a"], budget)
        both, reports = tune_wall(["--ray", cluster.address, "--per-class"], budget)
    finally:
        cluster.shutdown()
    assert sorted(reports) == ["a", "b"], sorted(reports)
    print(f"simulated fleet, 2 classes on one 2-core machine, budget {budget} each:")
    print(f"  one class  {one:6.1f} s")
    print(f"  two classes at once {both:6.1f} s ({both / one:.2f}x the time of one)")


def ray_round_trip() -> None:
    """A no-op actor call's round trip, against the driver's work per result."""
    cluster = single_node(1)
    try:
        ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)

        @ray.remote(num_cpus=1)
        class Echo:
            def echo(self, value):
                return value

        actor = Echo.remote()
        ray.get(actor.echo.remote(0))
        start = time.perf_counter()
        for i in range(300):
            ray.get(actor.echo.remote(i))
        trip = (time.perf_counter() - start) / 300
    finally:
        ray.shutdown()
        cluster.shutdown()
    print(f"Ray round trip of a no-op actor call: {trip * 1e3:.2f} ms")
    driver_costs()


def driver_costs() -> None:
    """The driver's own work per result: the strategy's ask and tell, and the database's
    commit, over 200 results of a 256^3 matmul's space."""
    from mlirtune.targets.host_cpu import HostCPU
    from mlirtune.tune.db import TuningDB
    from mlirtune.tune.outcome import Outcome
    from mlirtune.tune.problem import generate
    from mlirtune.tune.strategies import strategy_class
    from mlirtune.workloads import Matmul

    problem = generate(Matmul(M=256, N=256, K=256), HostCPU())
    folder = Path(tempfile.mkdtemp(prefix="tune-distributed-"))
    try:
        with TuningDB(folder / "t.db") as db:
            for name in ("random", "tpe"):
                strategy = strategy_class(name)(problem.space, 0)
                start, results = time.perf_counter(), 0
                while results < 200 and (config := strategy.ask()) is not None:
                    outcome = Outcome("ok", samples=(1e-3 * (1 + results % 7),), flops=1.0)
                    strategy.tell(config, outcome)
                    db.record(problem.key, problem.slot_values(config), outcome)
                    results += 1
                per = (time.perf_counter() - start) / results
                print(f"driver per result ({name}: ask, tell, commit): {per * 1e3:.2f} ms")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--budget", type=int, default=200)
    parser.add_argument("--fleet-budget", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=1, help="interleaved runs of each way")
    args = parser.parse_args()
    ray_round_trip()
    rates(args.budget, args.rounds)
    fleet(args.fleet_budget)


if __name__ == "__main__":
    main()
