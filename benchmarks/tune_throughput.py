"""Tuning throughput for a 256^3 f32 matmul, in candidates per second, two ways.

    python benchmarks/tune_throughput.py [--candidates 60] [--budgets 60,200] [--repeat 3]

Steady state: workers are started (and the reference computed) before the clock starts;
the rate then covers what each candidate costs in the search (compile in parallel workers,
verify, time on the benchmark core, cut short once surely slower than the fastest so far).
End to end: the whole `mlirtune tune ... --strategy random` command as a subprocess with a
fresh database (nothing resumed), timed by the wall clock from start-up to exit, so process
start-up, the workers' start, both baseline measurements and the final race count too. Its
second line splits that time at the first and the last candidate's stored result: the fixed
costs apart from the search's own rate. Each candidate's status is counted, so a fast but
failing evaluation cannot pass for throughput.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime
from pathlib import Path

from mlirtune.targets.host_cpu import HostCPU
from mlirtune.tune.evaluator import EvaluatorSettings, IsolatedEvaluator
from mlirtune.tune.outcome import Outcome
from mlirtune.tune.problem import generate
from mlirtune.tune.tuner import CUTOFF_FACTOR, Cutoff
from mlirtune.workloads import Matmul

SHAPE = ("M=256", "N=256", "K=256")


def steady_state(candidates: int, seed: int, workers: int | None) -> None:
    workload = Matmul(M=256, N=256, K=256)
    problem = generate(workload, HostCPU())
    configs = problem.space.sample(candidates + 2, seed=seed)
    values = [problem.slot_values(c) for c in configs]
    settings = EvaluatorSettings(workers=workers)
    outcomes: list[Outcome] = []
    pending = iter(values[2:])
    cutoff = Cutoff(CUTOFF_FACTOR)  # as the search cuts candidates short

    def on_result(_: dict[str, int], outcome: Outcome) -> None:
        outcomes.append(outcome)
        cutoff.saw(outcome)

    with IsolatedEvaluator(workload, problem.target, settings=settings) as evaluator:
        for outcome in evaluator.evaluate_all(values[:2]):  # start the workers
            cutoff.saw(outcome)
        start = time.perf_counter()
        evaluator.evaluate(lambda: next(pending, None), on_result, lambda _: cutoff.seconds())
        elapsed = time.perf_counter() - start
    statuses = Counter(o.status for o in outcomes)
    print(f"space: {problem.space.count()} configs; workers: {evaluator.worker_count}")
    print(
        f"steady state: {len(outcomes)} candidates in {elapsed:.2f} s: "
        f"{len(outcomes) / elapsed:.1f}/s; statuses: {dict(statuses)}"
    )
    for phase in ("compile_s", "verify_s", "wait_s", "bench_s"):
        spent = [o.extra[phase] for o in outcomes if phase in o.extra]
        mean_ms = 1e3 * sum(spent) / max(1, len(spent))
        print(f"  {phase[:-2]:8s} mean {mean_ms:6.1f} ms per candidate")


def end_to_end(budget: int, workers: int | None) -> float:
    """Run `mlirtune tune` once with a fresh database; print and return its wall time."""
    script = Path(sys.executable).with_name("mlirtune")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "mlirtune"]
    command += ["tune", "matmul", *SHAPE, "--budget", str(budget), "--strategy", "random"]
    command += ["--workers", str(workers)] if workers else []
    folder = tempfile.mkdtemp(prefix="tune-throughput-")
    database = Path(folder) / "t.db"
    try:
        launched, start = time.time(), time.perf_counter()
        done = subprocess.run(
            [*command, "--db", str(database), "--json"],
            capture_output=True,
            text=True,
            check=False,
        )
        wall = time.perf_counter() - start
        stored = _stored_at(database) if done.returncode == 0 else []
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if done.returncode != 0:
        sys.exit(f"mlirtune tune failed ({done.returncode}): {done.stderr[-2000:]}")
    report = json.loads(done.stdout)
    if report["resumed"] or report["evaluated"] != budget:
        sys.exit(f"expected {budget} fresh candidates, got {report['evaluated']}")
    stages = report.get("seconds", {})
    setup = wall - sum(stages.values())
    parts = ", ".join(f"{name} {s:.2f}" for name, s in stages.items())
    failed = sum(report["failed_by_status"].values())
    print(
        f"  budget {budget:4d}: {wall:6.2f} s wall, {budget / wall:5.1f}/s "
        f"(start-up and set-up {setup:.2f}, {parts} s; {failed} failed; "
        f"winner: {report['winner']})"
    )
    if len(stored) > 1:  # where the fixed costs lie: before the first result, after the last
        first, last = stored[0] - launched, stored[-1] - launched
        print(
            f"               first candidate's result after {first:.2f} s; the next "
            f"{len(stored) - 1} in {last - first:.2f} s "
            f"({(len(stored) - 1) / (last - first):.1f}/s); {wall - last:.2f} s after the last"
        )
    return wall


def _stored_at(database: Path) -> list[float]:
    """When each candidate's result was stored (Unix seconds, in order)."""
    with contextlib.closing(sqlite3.connect(database)) as connection:
        rows = connection.execute(
            "SELECT created_at FROM records WHERE role = 'candidate' ORDER BY created_at"
        ).fetchall()
    return [datetime.fromisoformat(created).timestamp() for (created,) in rows]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--candidates", type=int, default=60, help="steady-state configs")
    parser.add_argument("--budgets", default="60,200", help="end-to-end budgets, comma-separated")
    parser.add_argument("--repeat", type=int, default=1, help="end-to-end runs per budget")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, help="worker processes (default: evaluator's)")
    args = parser.parse_args()

    steady_state(args.candidates, args.seed, args.workers)
    print("end to end (`mlirtune tune`, fresh database, wall clock):")
    for budget in (int(b) for b in args.budgets.split(",") if b):
        walls = [end_to_end(budget, args.workers) for _ in range(args.repeat)]
        if len(walls) > 1:
            best, median = min(walls), statistics.median(walls)
            print(
                f"  budget {budget:4d}: best {budget / best:.1f}/s, "
                f"median {budget / median:.1f}/s over {len(walls)} runs"
            )


if __name__ == "__main__":
    main()
