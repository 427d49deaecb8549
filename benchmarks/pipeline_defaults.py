"""The untuned default pipelines (family selectors + packaged descriptors) against numpy with
one BLAS thread, measured side by side in one run.

    python benchmarks/pipeline_defaults.py [--rounds 3] [--max-time 1.0]

For mlp the numpy side runs three separate ops (matmul, add bias, ReLU); for conv2d it runs
one BLAS-backed tensordot per filter tap; softmax and element-wise chains run as numpy ufuncs.
"""

from __future__ import annotations

import argparse

from compare import HEADER, compare

from mlirtune.engine import MlirJitEngine
from mlirtune.workloads import BatchMatmul, Conv2d, Elementwise, Matmul, Mlp, Softmax

CASES = [
    ("matmul 512^3 f32", Matmul(M=512, N=512, K=512)),
    ("matmul 1024^3 f32", Matmul(M=1024, N=1024, K=1024)),
    ("matmul 500x300x700 f32", Matmul(M=500, N=300, K=700)),
    ("mlp 256x1024x1024 f32", Mlp(M=256, N=1024, K=1024)),
    ("batch_matmul 8x256^3 f32", BatchMatmul(B=8, M=256, N=256, K=256)),
    ("conv2d 1x58x58x64 -> 64, 3x3", Conv2d(N=1, H=58, W=58, C=64, F=64, KH=3, KW=3)),
    ("conv2d 1x115x115x32 -> 64, s2", Conv2d(N=1, H=115, W=115, C=32, F=64, stride=2)),
    ("softmax 512x1024 f32", Softmax(M=512, N=1024)),
    ("elementwise 1024^2 add,mul,relu", Elementwise(M=1024, N=1024, ops="add,mul,relu")),
]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per case")
    parser.add_argument("--max-time", type=float, default=1.0, help="seconds per measurement")
    args = parser.parse_args()

    engine = MlirJitEngine()
    print(HEADER)
    for label, workload in CASES:
        result = compare(engine, workload, label, args.rounds, args.max_time)
        print(result.row(), " ", " ".join(f"{k}={v}" for k, v in result.parameters.items()))


if __name__ == "__main__":
    main()
