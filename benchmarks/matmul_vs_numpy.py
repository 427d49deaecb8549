"""f32 matmul with the default schedule against numpy (OpenBLAS, one thread), in one run.

Each size is measured in alternating rounds (ours, numpy, ours, numpy, ...) so that machine
drift hits both sides alike; the reported time is the median of the per-round medians.

    python benchmarks/matmul_vs_numpy.py [--sizes 256,512,1024] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics

from mlirtune.bench.baseline import measure_numpy
from mlirtune.bench.harness import BenchOptions
from mlirtune.engine import MlirJitEngine
from mlirtune.workloads import Matmul


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="256,512,1024", help="comma-separated square sizes")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per size")
    parser.add_argument("--max-time", type=float, default=1.0, help="seconds per measurement")
    args = parser.parse_args()

    engine = MlirJitEngine()
    options = BenchOptions(max_time_s=args.max_time)
    print(f"{'size':>6} {'mlirtune GFLOP/s':>17} {'numpy GFLOP/s':>14} {'ratio':>7}")
    for size in (int(s) for s in args.sizes.split(",")):
        workload = Matmul(M=size, N=size, K=size, dtype="f32")
        ours, theirs = [], []
        for _ in range(args.rounds):
            ours.append(engine.benchmark(workload, options=options).median_s)
            theirs.append(measure_numpy(workload, options).median_s)
        flops = workload.get_complexity().flops
        ours_s, theirs_s = statistics.median(ours), statistics.median(theirs)
        print(
            f"{size:>6} {flops / ours_s / 1e9:>17.1f} {flops / theirs_s / 1e9:>14.1f} "
            f"{theirs_s / ours_s:>6.2f}x"
        )


if __name__ == "__main__":
    main()
