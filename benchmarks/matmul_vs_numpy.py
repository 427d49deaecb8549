"""f32 matmul with the default pipeline against numpy (OpenBLAS, one thread), in one run.

python benchmarks/matmul_vs_numpy.py [--sizes 256,512,1024] [--rounds 3]
"""

from __future__ import annotations

import argparse

from compare import HEADER, compare

from mlirtune.engine import MlirJitEngine
from mlirtune.workloads import Matmul


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="256,512,1024", help="comma-separated square sizes")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per size")
    parser.add_argument("--max-time", type=float, default=1.0, help="seconds per measurement")
    args = parser.parse_args()

    engine = MlirJitEngine()
    print(HEADER)
    for size in (int(s) for s in args.sizes.split(",")):
        workload = Matmul(M=size, N=size, K=size, dtype="f32")
        print(compare(engine, workload, f"matmul {size}^3 f32", args.rounds, args.max_time).row())


if __name__ == "__main__":
    main()
