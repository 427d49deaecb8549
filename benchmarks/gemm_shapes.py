"""Contractions past the cache against numpy with one BLAS thread, measured side by side in
one run, then the geometric mean of the ratios.

    python benchmarks/gemm_shapes.py [--rounds 3] [--max-time 1.0] [--group square ...]
        [--no-specs] [--pipeline NAME] [--tune BUDGET [--strategy model] [--db PATH]]

AVX2 on an AVX-512 host, both sides restricted (our kernels to 256-bit vectors, numpy's
OpenBLAS to its Haswell kernels):

    MLIRTUNE_ISA=avx2 OPENBLAS_CORETYPE=Haswell python benchmarks/gemm_shapes.py

The shape set is the one the project's speed targets name: square, Llama-2-7B and BERT-large
projections, tall and odd shapes, batch matmuls, an MLP layer and matrix-vector products.
For mlp the numpy side runs three separate ops (matmul, add bias, ReLU). Matrix-vector
products are memory-bound: their rows also give our GB/s and its share of the host's
measured streaming read bandwidth (`mlirtune.peak.measured_bandwidth_gbs`); the others give
our share of the measured FMA peak (`mlirtune.peak.measured_peak_gflops`).

With --tune, each shape is first tuned (`mlirtune tune`, at most BUDGET candidates; the
records go to the tuning database, so a second run resumes) and the tuned config is the
one compared.
"""

from __future__ import annotations

import argparse
import math

from compare import HEADER, compare
from threadpoolctl import threadpool_info
from tuned import tuned_parameters

from mlirtune.engine import MlirJitEngine
from mlirtune.interfaces.workload import Workload
from mlirtune.peak import measured_bandwidth_gbs, measured_peak_gflops
from mlirtune.tune.db import default_db_path
from mlirtune.tune.tuner import TuneOptions
from mlirtune.workloads import BatchMatmul, Matmul, Mlp

MEMORY_BOUND = {"matvec"}  # groups whose rows give GB/s against the measured bandwidth

GROUPS: dict[str, list[tuple[str, Workload]]] = {
    "square": [
        ("1024^3", Matmul(M=1024, N=1024, K=1024)),
        ("2048^3", Matmul(M=2048, N=2048, K=2048)),
        ("4096^3", Matmul(M=4096, N=4096, K=4096)),
    ],
    "llama": [
        ("llama 256x11008x4096", Matmul(M=256, N=11008, K=4096)),
        ("llama 256x4096x11008", Matmul(M=256, N=4096, K=11008)),
    ],
    "bert": [
        ("bert 512x1024x1024", Matmul(M=512, N=1024, K=1024)),
        ("bert 512x4096x1024", Matmul(M=512, N=4096, K=1024)),
    ],
    "odd": [
        ("tall 4096x4096x256", Matmul(M=4096, N=4096, K=256)),
        ("odd 1000x999x1001", Matmul(M=1000, N=999, K=1001)),
    ],
    "batch": [
        ("batch 16x128x128x64", BatchMatmul(B=16, M=128, N=128, K=64)),
        ("batch 16x128x64x128", BatchMatmul(B=16, M=128, N=64, K=128)),
    ],
    "mlp": [("mlp 512x4096x1024", Mlp(M=512, N=4096, K=1024))],
    "matvec": [
        ("matvec 1x11008x4096", Matmul(M=1, N=11008, K=4096)),
        ("matvec 1x4096x11008", Matmul(M=1, N=4096, K=11008)),
    ],
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per shape")
    parser.add_argument("--max-time", type=float, default=1.0, help="seconds per measurement")
    parser.add_argument(
        "--group", action="append", choices=list(GROUPS), help="shape groups (default: all)"
    )
    parser.add_argument("--no-specs", action="store_true", help="the selector alone")
    parser.add_argument("--pipeline", help="a pipeline descriptor for every shape")
    parser.add_argument("--tune", type=int, metavar="BUDGET", help="tune each shape first")
    parser.add_argument("--strategy", default="model", help="search strategy for --tune")
    parser.add_argument("--db", default=str(default_db_path()), help="tuning database")
    args = parser.parse_args()

    engine = MlirJitEngine(pipeline=args.pipeline, use_specs=not args.no_specs)
    groups = args.group or list(GROUPS)
    bandwidth = measured_bandwidth_gbs(engine.target) if MEMORY_BOUND & set(groups) else None
    peak = measured_peak_gflops(engine.target, "f32")
    print(f"ours: {engine.target}, {engine.target.features.fma_in_flight} FMAs in flight")
    print(f"numpy: OpenBLAS {openblas_core()} kernels (OPENBLAS_CORETYPE chooses them)")
    print(f"measured FMA peak: {peak:.1f} GFLOP/s (one core)")
    if bandwidth:
        print(f"measured streaming read bandwidth: {bandwidth:.1f} GB/s (one core)")
    print(HEADER)
    ratios = []
    for group in groups:
        for label, workload in GROUPS[group]:
            tuned = None
            if args.tune:
                options = TuneOptions(budget=args.tune, strategy=args.strategy)
                tuned = tuned_parameters(workload, engine.target, options, args.db, label)
            result = compare(engine, workload, label, args.rounds, args.max_time, tuned)
            engine.clear_cache()  # one shape's JIT'd code at a time
            ratios.append(result.ratio)
            row = result.row()
            if bandwidth and group in MEMORY_BOUND:
                row += f" {result.ours_gbs:6.1f} GB/s {100 * result.ours_gbs / bandwidth:4.0f}% bw"
            else:
                row += f" {100 * result.ours_gflops / peak:4.0f}% peak"
            print(row, " ", " ".join(f"{k}={v}" for k, v in result.parameters.items()))
    geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    print(f"{'geometric mean':34s} {'':>9s} {'':>9s} {geomean:7.2f}x   min {min(ratios):.2f}x")


def openblas_core() -> str:
    """The core type numpy's OpenBLAS runs its kernels for (e.g. Haswell, SkylakeX)."""
    found = [i.get("architecture") for i in threadpool_info() if i["internal_api"] == "openblas"]
    return found[0] if found and found[0] else "(unknown)"


if __name__ == "__main__":
    main()
