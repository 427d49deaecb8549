"""The config `mlirtune tune` finds for a workload, for the benchmarks that compare tuned
configs (gemm_shapes.py --tune, tune_matmul.py); apart from compare.py, so that the others
do not import the tuner."""

from __future__ import annotations

import sys

from mlirtune.interfaces.workload import Workload
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.tune.db import TuningDB
from mlirtune.tune.problem import generate
from mlirtune.tune.tuner import TuneOptions, tune


def tuned_parameters(
    workload: Workload, target: HostCPU, options: TuneOptions, db_path: str, label: str
) -> dict:
    """The slot values `mlirtune tune` finds for `workload` (the selector's where no
    candidate beat it in the final race); records go to the database at `db_path`, so a
    second run resumes."""
    problem = generate(workload, target)
    print(f"tuning {label}: {problem.space.count()} configs ...", file=sys.stderr)
    with TuningDB(db_path) as db:
        report = tune(problem, options, db)
    verdict = report.verdict
    if verdict.won:
        print(f"  won the race: {verdict.speedup:.3f}x the selector's config", file=sys.stderr)
    else:
        print("  the selector's config stood: no finalist beat it in every round", file=sys.stderr)
    return problem.slot_values(report.best)
