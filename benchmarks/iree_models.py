"""IREE's own configs, IREE with the spec mlirtune tuned for it, and mlirtune's own engine,
side by side in one run, on one thread (IREE's local-sync device).

    python benchmarks/iree_models.py [--budget 40] [--rounds 3] [--max-time 0.5]
        [--group gemm|models ...] [--shapes 1024^3,...] [--db PATH]

Each workload's distinct contraction and convolution dispatches are tuned first (at most
--budget candidates each, recorded in the tuning database, so a second run resumes), the
winners written as one IREE tuning spec; then the three sides are measured in rotating
rounds. Ratios are to IREE's own configs. The tuning rate (candidates per second over the
searches) is printed at the end.

gemm: the shape set of gemm_shapes.py (without the memory-bound matrix-vector products);
models: an MLP block, a ResNet basic block and a BERT encoder layer (examples/torch).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

from compare import rotating_rounds
from gemm_shapes import GROUPS as GEMM_GROUPS

from mlirtune.engine import MlirJitEngine
from mlirtune.interfaces.bench import BenchOptions
from mlirtune.interfaces.workload import Workload
from mlirtune.iree.engine import IreeEngine
from mlirtune.iree.problem import distinct_tunable, tune_dispatches
from mlirtune.tune.db import default_db_path
from mlirtune.tune.tuner import TuneOptions

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "torch"
MODELS = {
    "mlp block": "mlp_block",
    "resnet basic block": "resnet_block",
    "bert encoder": "encoder_layer",
}


def gemm_workloads() -> list[tuple[str, Workload]]:
    return [
        (label, workload)
        for group, shapes in GEMM_GROUPS.items()
        if group != "matvec"
        for label, workload in shapes
    ]


def model_workloads() -> list[tuple[str, Workload]]:
    from mlirtune.torch.factory import workload_from_factory

    return [
        (label, workload_from_factory(f"{EXAMPLES / name}.py:make"))
        for label, name in MODELS.items()
    ]


def tuned_spec(
    workload: Workload, label: str, options: TuneOptions, db_path: str, folder: Path
) -> tuple[Path | None, int, float]:
    """The spec of the winners over IREE's configs for `workload`'s dispatches (None where
    none won), the candidates evaluated and the seconds the searches took."""
    engine = IreeEngine()

    def announced(root, problem, db, search):
        print(f"tuning {label}: {root.describe()} ...", file=sys.stderr)
        report = search(None)
        if report.winner:
            print(f"  won: {report.verdict.speedup:.2f}x IREE's config", file=sys.stderr)
        return report

    roots = distinct_tunable(engine.dispatches(workload))
    tuned = tune_dispatches(workload, engine.target, roots, options, db_path, announced) or []
    winners = [(root, report.winner) for root, report in tuned if report.winner]
    evaluated = sum(len(report.evaluated) - report.resumed for _, report in tuned)
    seconds = sum(report.seconds["search"] + report.seconds["race"] for _, report in tuned)
    if not winners:
        return None, evaluated, seconds
    spec = folder / f"{len(list(folder.iterdir()))}.mlir"
    engine.write_spec(winners, spec)
    return spec, evaluated, seconds


def measure(
    workload: Workload, spec: Path | None, ours: MlirJitEngine, rounds: int, bench: BenchOptions
) -> dict[str, float]:
    """Median seconds per call of IREE's configs, IREE with `spec` and mlirtune's engine,
    measured in rotating rounds."""
    sides = {"iree": IreeEngine(), "tuned": IreeEngine(spec=spec), "mlirtune": ours}
    times = rotating_rounds(
        {
            name: (lambda engine=engine: engine.benchmark(workload, options=bench).median_s)
            for name, engine in sides.items()
        },
        rounds,
    )
    return {side: statistics.median(t) for side, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=int, default=40, help="candidates per dispatch")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-time", type=float, default=0.5, help="seconds per measurement")
    parser.add_argument("--group", action="append", choices=["gemm", "models"])
    parser.add_argument("--shapes", help="comma-separated labels of the gemm group to keep")
    parser.add_argument("--db", default=str(default_db_path()))
    args = parser.parse_args()
    workloads = []
    for group in args.group or ["gemm", "models"]:
        workloads += gemm_workloads() if group == "gemm" else model_workloads()
    if args.shapes:
        keep = set(args.shapes.split(","))
        workloads = [(label, w) for label, w in workloads if label in keep or label in MODELS]
    options = TuneOptions(budget=args.budget)
    bench = BenchOptions(max_time_s=args.max_time)
    ours = MlirJitEngine()
    print(f"host: {ours.target}; IREE llvm-cpu local-sync, one thread; budget {args.budget}")
    print(f"{'workload':28s} {'iree ms':>9s} {'tuned':>7s} {'mlirtune':>9s}   (x IREE's own)")
    tuned_ratios, evaluated, searched = [], 0, 0.0
    with tempfile.TemporaryDirectory(prefix="iree-specs-") as folder:
        for label, workload in workloads:
            spec, count, seconds = tuned_spec(workload, label, options, args.db, Path(folder))
            evaluated, searched = evaluated + count, searched + seconds
            median = measure(workload, spec, ours, args.rounds, bench)
            ours.clear_cache()
            tuned, own = (median["iree"] / median[side] for side in ("tuned", "mlirtune"))
            tuned_ratios.append(tuned)
            print(
                f"{label:28s} {median['iree'] * 1e3:9.3f} {tuned:6.2f}x {own:8.2f}x"
                + ("" if spec else "   (no winner: IREE's configs stood)")
            )
    geomean = math.exp(sum(map(math.log, tuned_ratios)) / len(tuned_ratios))
    print(f"{'geometric mean (tuned)':28s} {'':9s} {geomean:6.2f}x")
    if searched:
        rate = evaluated / searched
        print(f"tuning rate: {rate:.2f} candidates/s ({evaluated} in {searched:.0f} s)")


if __name__ == "__main__":
    started = time.monotonic()
    main()
    print(f"({time.monotonic() - started:.0f} s)", file=sys.stderr)
