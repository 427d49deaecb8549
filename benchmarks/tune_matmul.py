"""Tuned kernels against numpy with one BLAS thread (OpenBLAS) and against the untuned
selector, all measured side by side in one run.

    python benchmarks/tune_matmul.py [--budget 150] [--strategy tpe] [--db PATH]

Each case is tuned first (results go to the tuning database, so a second run resumes and
only re-measures the comparison); then the tuned config, the selector's config and numpy
are timed in alternating rounds. For mlp, numpy runs matmul, bias add and ReLU as three ops.
"""

from __future__ import annotations

import argparse

from compare import HEADER, compare
from tuned import tuned_parameters

from mlirtune.engine import MlirJitEngine
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.tune.db import default_db_path
from mlirtune.tune.tuner import TuneOptions
from mlirtune.workloads import Matmul, Mlp

CASES = [
    ("matmul 512^3 f32", Matmul(M=512, N=512, K=512)),
    ("matmul 1024^3 f32", Matmul(M=1024, N=1024, K=1024)),
    ("mlp 256x1024x1024 f32", Mlp(M=256, N=1024, K=1024)),
]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--budget", type=int, default=150, help="candidates per case")
    parser.add_argument("--strategy", default="tpe", help="search strategy")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--db", default=str(default_db_path()), help="tuning database")
    parser.add_argument("--rounds", type=int, default=5, help="alternating timing rounds")
    parser.add_argument("--max-time", type=float, default=1.0, help="seconds per measurement")
    args = parser.parse_args()

    target = HostCPU()
    engine = MlirJitEngine(target=target)
    rows = []
    options = TuneOptions(budget=args.budget, strategy=args.strategy, seed=args.seed)
    for label, workload in CASES:
        tuned = tuned_parameters(workload, target, options, args.db, label)
        rows.append(
            (
                compare(engine, workload, f"{label} tuned", args.rounds, args.max_time, tuned),
                compare(engine, workload, f"{label} selector", args.rounds, args.max_time),
            )
        )
    print(HEADER, "  tuned/selector")
    for tuned_row, selector_row in rows:
        print(tuned_row.row(), f"  {selector_row.ours_s / tuned_row.ours_s:6.2f}x", end="  ")
        print(" ".join(f"{k}={v}" for k, v in tuned_row.parameters.items()))
        print(
            selector_row.row(),
            "  ",
            " ".join(f"{k}={v}" for k, v in selector_row.parameters.items()),
        )


if __name__ == "__main__":
    main()
