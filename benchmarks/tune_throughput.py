"""Tuning throughput: candidates evaluated per second, end to end (compile in parallel
workers, verify, time on the benchmark core), for a 256^3 f32 matmul.

    python benchmarks/tune_throughput.py [--candidates 60]

Workers are started (and the reference computed) before the clock starts; the rate then
covers everything each candidate costs. Each candidate's status is counted, so a fast but
failing evaluation cannot pass for throughput.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

from mlirtune.targets.host_cpu import HostCPU
from mlirtune.tune.evaluator import EvaluatorSettings, IsolatedEvaluator
from mlirtune.tune.problem import generate
from mlirtune.workloads import Matmul


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=60, help="configs to evaluate")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, help="worker processes (default: evaluator's)")
    args = parser.parse_args()

    workload = Matmul(M=256, N=256, K=256)
    problem = generate(workload, HostCPU())
    configs = problem.space.sample(args.candidates + 2, seed=args.seed)
    values = [problem.slot_values(c) for c in configs]
    settings = EvaluatorSettings(workers=args.workers)
    with IsolatedEvaluator(workload, problem.target, settings=settings) as evaluator:
        evaluator.evaluate_all(values[:2])  # start the workers
        start = time.perf_counter()
        outcomes = evaluator.evaluate_all(values[2:])
        elapsed = time.perf_counter() - start
    statuses = Counter(o.status for o in outcomes)
    print(f"space: {problem.space.count()} configs; workers: {evaluator.worker_count}")
    print(
        f"evaluated {len(outcomes)} candidates in {elapsed:.2f} s: {len(outcomes) / elapsed:.1f}/s"
    )
    print("statuses:", dict(statuses))
    for phase in ("compile_s", "verify_s", "wait_s", "bench_s"):
        spent = [o.extra[phase] for o in outcomes if phase in o.extra]
        mean_ms = 1e3 * sum(spent) / max(1, len(spent))
        print(f"  {phase[:-2]:8s} mean {mean_ms:6.1f} ms per candidate")


if __name__ == "__main__":
    main()
