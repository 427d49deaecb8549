"""Search efficiency, replayed from the tuning database: how many evaluations each strategy
needs to come within 3% of the exhaustive best.

    python benchmarks/tune_efficiency.py [--png tune_efficiency.png] [--seeds 5]

First the whole space of a 512^3 f32 matmul is measured once (exhaustive; stored in the
database, so a re-run resumes). Then every strategy is replayed against those stored results
without measuring anything: each asks for configs and is told their stored outcome. The
curve is best-so-far GFLOP/s against evaluations (median over seeds for the seeded
strategies), printed and plotted.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from mlirtune.targets.host_cpu import HostCPU
from mlirtune.tune.db import TuningDB, default_db_path
from mlirtune.tune.outcome import Outcome
from mlirtune.tune.problem import generate
from mlirtune.tune.strategies import STRATEGIES, config_key
from mlirtune.tune.tuner import TuneOptions, tune
from mlirtune.workloads import Matmul

WITHIN = 0.97  # "within 3% of the exhaustive best"
GOAL = 0.25  # ... in at most a quarter of the space
HORIZON = 0.3  # replays stop after this share of the space (Optuna's asks slow down with size)


def replay(strategy, stored: dict[tuple, Outcome], limit: int) -> list[float]:
    """Best-so-far GFLOP/s after each evaluation of `strategy` over stored outcomes."""
    best, curve = 0.0, []
    while len(curve) < limit and (config := strategy.ask()) is not None:
        outcome = stored[config_key(config)]
        strategy.tell(config, outcome)
        best = max(best, outcome.gflops or 0.0)
        curve.append(best)
    return curve + [best] * (limit - len(curve))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--db", default=str(default_db_path()), help="tuning database")
    parser.add_argument("--seeds", type=int, default=3, help="seeds per seeded strategy")
    parser.add_argument("--png", default="tune_efficiency.png", help="where to plot")
    parser.add_argument("--size", type=int, default=512, help="matmul M = N = K")
    args = parser.parse_args()

    workload = Matmul(M=args.size, N=args.size, K=args.size)
    problem = generate(workload, HostCPU())
    size = problem.space.count()
    print(f"measuring all {size} configs (resumes from {args.db}) ...", file=sys.stderr)
    with TuningDB(args.db) as db:
        tune(problem, TuneOptions(budget=size, strategy="exhaustive", finalists=0), db)
        stored = {
            config_key(problem.config_of(r.params)): r.outcome()
            for r in db.records(problem.key, current_only=True)
            if r.role == "candidate"
        }
    best = max(o.gflops or 0.0 for o in stored.values())
    print(f"space {size} configs, exhaustive best {best:.1f} GFLOP/s")
    horizon = int(HORIZON * size)
    curves = {}
    for name, cls in STRATEGIES.items():
        seeds = range(args.seeds) if name in ("random", "tpe") else [0]
        runs = [replay(cls(problem.space, seed), stored, horizon) for seed in seeds]
        curves[name] = np.median(np.asarray(runs), axis=0)
    print(f"{'strategy':12s} {'evals to 97%':>13s} {'% of space':>11s}  goal <= {GOAL:.0%}")
    for name, curve in curves.items():
        hits = np.flatnonzero(curve >= WITHIN * best)
        if hits.size:
            reached = int(hits[0]) + 1
            verdict = "met" if reached <= GOAL * size else "missed"
            print(f"{name:12s} {reached:13d} {reached / size:10.1%}   {verdict}")
        else:
            print(f"{name:12s} {'> ' + str(horizon):>13s} {HORIZON:>10.0%}+  missed")
    print("best-so-far GFLOP/s after n evaluations:")
    marks = [n for n in (1, 5, 10, 25, 50, 100, 200, 400) if n <= horizon]
    print(f"{'n':12s}" + "".join(f"{n:>8d}" for n in marks))
    for name, curve in curves.items():
        print(f"{name:12s}" + "".join(f"{curve[n - 1]:8.1f}" for n in marks))
    _plot(curves, best, size, horizon, workload, args.png)
    print(f"plot: {args.png}")


def _plot(curves, best, size, horizon, workload, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.5))
    for name, curve in curves.items():
        axes.plot(np.arange(1, horizon + 1), curve, label=name)
    axes.axhline(WITHIN * best, color="grey", linestyle="--", label="97% of exhaustive best")
    axes.axvline(GOAL * size, color="grey", linestyle=":", label="25% of the space")
    axes.set_xscale("log")
    axes.set_xlabel(f"evaluations (space: {size} configs)")
    axes.set_ylabel("best-so-far GFLOP/s")
    options = workload.options
    axes.set_title(f"matmul {options['M']}x{options['N']}x{options['K']} f32: search efficiency")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
