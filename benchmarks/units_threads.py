"""bf16 and int8 kernels against PyTorch and against our f32, and kernels on several cores
against one and against numpy with as many BLAS threads, measured side by side in one run.

    python benchmarks/units_threads.py [--threads 2] [--rounds 3] [--max-time 1.0]
        [--parts low-precision widened threads families] [--without-amx]

First the bf16 and int8 matmuls on one thread, against PyTorch's CPU matmul (oneDNN, which
uses AMX or AVX512-BF16 where the host has them; `torch._int_mm` for int8 x int8 -> int32)
when PyTorch is installed (`pip install -e .[bench]`); without it, that column is skipped
and the benchmark says so. Each row names the micro-kernel path the target chose (amx: AMX
tile products, bf16 on hosts with AMX-BF16; dot: dot products of K pairs, AVX512-BF16 for
bf16 and AVX2 vpmaddwd for int8; fma: FMA, or int32 multiply-add, on widened operands).

The widened part times bf16 matmuls on the FMA path (UNIT=0: operands converted to f32, the
path of hosts with neither AVX512-BF16 nor AMX, taken on any host) against our f32 matmuls
of the same shapes, in alternating rounds: with half the bytes to read, bf16 should be no
slower (f32 time / bf16 time >= 1).

For the threads part, rounds alternate: ours on one thread, ours on --threads, numpy (OpenBLAS) on
one thread, numpy on --threads, in an order that rotates every round; each side's time is the
median of its per-round medians.
Prints our scaling (one-thread time / N-thread time) and the N-thread ratio to numpy. Then
the other host families (convolution, softmax, element-wise), whose numpy forms are not
multi-threaded: our scaling only.

`--without-amx` measures, on a host with AMX, what a host with AVX512-BF16 but no AMX (an
AMD Zen 4) would run: our target drops the AMX flags, so the selector takes the dot-product
path, and PyTorch's oneDNN is capped at AVX512-BF16 (`ONEDNN_MAX_CPU_ISA`), so it takes its
own AVX512-BF16 kernels. It is an emulation of such a host, not one: the cores' dot-product
throughput is this CPU's.
"""

from __future__ import annotations

import argparse
import os
import statistics
from functools import partial

from compare import rotating_rounds

from mlirtune.api import engine_for
from mlirtune.bench.baseline import measure_numpy, measure_torch, torch_available
from mlirtune.interfaces.bench import BenchOptions
from mlirtune.schedules.contraction.knob_values import UNIT_AMX, UNIT_DOT, UNIT_FMA
from mlirtune.targets.host_cpu import HostCPU, detect_features
from mlirtune.workloads import Conv2d, Elementwise, Matmul, Softmax

LOW_PRECISION_SHAPES = {
    f"{dtype} {label}": Matmul(M=m, N=n, K=k, dtype=dtype, transpose=layout)
    for dtype in ("bf16", "i8")
    for label, (m, n, k, layout) in {
        "512^3": (512, 512, 512, "none"),
        "2048^3": (2048, 2048, 2048, "none"),
        "128x4096x4096": (128, 4096, 4096, "none"),
        "Linear 512x4096x4096": (512, 4096, 4096, "b"),  # a weight stored [N, K]
    }.items()
}
UNIT_PATHS = {UNIT_FMA: "fma", UNIT_DOT: "dot", UNIT_AMX: "amx"}
SHAPES = {
    "2048^3": Matmul(M=2048, N=2048, K=2048),
    "llama 256x11008x4096": Matmul(M=256, N=11008, K=4096),
}
OTHER_FAMILIES = {
    "conv2d 56x56x64x64": Conv2d(H=58, W=58, C=64, F=64),
    "softmax 2048x4096": Softmax(M=2048, N=4096),
    "add,mul,relu 2048x4096": Elementwise(M=2048, N=4096, ops="add,mul,relu"),
}


PARTS = ("low-precision", "widened", "threads", "families")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per shape")
    parser.add_argument("--max-time", type=float, default=1.0, help="seconds per measurement")
    parser.add_argument(
        "--parts",
        nargs="+",
        choices=PARTS,
        default=list(PARTS),
        help="which tables to print (default: all). Where the host has neither AVX512-BF16 "
        "nor AMX, PyTorch's bf16 and int8 take minutes per call at 2048^3, so "
        "'--parts widened threads families' leaves out the low-precision table",
    )
    parser.add_argument(
        "--without-amx",
        action="store_true",
        help="both sides as on a host with AVX512-BF16 and no AMX: our target without the "
        "AMX flags, PyTorch's oneDNN capped at AVX512_CORE_BF16",
    )
    args = parser.parse_args()
    options = BenchOptions(max_time_s=args.max_time)
    n = args.threads
    flags = detect_features().flags
    if args.without_amx:
        # Read by oneDNN when PyTorch first runs a kernel, which is after this.
        os.environ["ONEDNN_MAX_CPU_ISA"] = "AVX512_CORE_BF16"
        flags = frozenset(flag for flag in flags if not flag.startswith("amx"))
        print("without AMX: our target's flags and PyTorch's oneDNN both stop at AVX512-BF16")
    engines = {threads: engine_for(HostCPU(threads=threads, flags=flags)) for threads in (1, n)}
    if "low-precision" in args.parts:
        low_precision_against_torch(engines[1], options, args.rounds)
    if "widened" in args.parts:
        widened_against_f32(engines[1], options, args.rounds)
    if "threads" in args.parts:
        threads_against_numpy(engines, options, args.rounds, n)
    if "families" in args.parts:
        other_families_scaling(engines, options, args.rounds, n)


def threads_against_numpy(engines: dict, options: BenchOptions, rounds: int, n: int) -> None:
    """f32 matmuls on one and on n threads, ours and numpy's, in alternating rounds."""
    print(f"{'workload':24s} {'ours x1':>8s} {'ours x' + str(n):>8s} {'numpy x1':>9s} "
          f"{'numpy x' + str(n):>9s}   scaling   vs numpy x{n}   (GFLOP/s)")  # fmt: skip
    for label, workload in SHAPES.items():
        for threads, engine in engines.items():
            assert engine.execute(workload).verification.ok, (label, threads)
        sides = {
            "ours1": partial(_ours_s, engines[1], workload, options),
            "oursN": partial(_ours_s, engines[n], workload, options),
            "numpy1": partial(_numpy_s, workload, options, 1),
            "numpyN": partial(_numpy_s, workload, options, n),
        }
        times = rotating_rounds(sides, rounds)
        median = {side: statistics.median(values) for side, values in times.items()}
        flops = workload.get_complexity().flops
        rates = " ".join(f"{flops / median[side] / 1e9:8.1f}" for side in times)
        print(
            f"{label:24s} {rates}   {median['ours1'] / median['oursN']:6.2f}x"
            f"   {median['numpyN'] / median['oursN']:9.2f}x",
            flush=True,
        )
        for engine in engines.values():
            engine.clear_cache()
    print()


def other_families_scaling(engines: dict, options: BenchOptions, rounds: int, n: int) -> None:
    """Convolution, softmax and element-wise kernels on one and on n threads: our scaling."""
    print(f"{'workload':24s} {'ours x1':>8s} {'ours x' + str(n):>8s}   scaling   (GB/s)")
    for label, workload in OTHER_FAMILIES.items():
        for threads, engine in engines.items():
            assert engine.execute(workload).verification.ok, (label, threads)
        sides = {
            threads: partial(_ours_s, engine, workload, options)
            for threads, engine in engines.items()
        }
        seconds = rotating_rounds(sides, rounds)
        median = {threads: statistics.median(values) for threads, values in seconds.items()}
        moved = workload.get_complexity()
        gbs = {t: (moved.bytes_read + moved.bytes_written) / m / 1e9 for t, m in median.items()}
        print(
            f"{label:24s} {gbs[1]:8.1f} {gbs[n]:8.1f}   {median[1] / median[n]:6.2f}x", flush=True
        )
        for engine in engines.values():
            engine.clear_cache()


def low_precision_against_torch(engine, options: BenchOptions, rounds: int) -> None:
    """bf16 and int8 matmuls on one thread, ours and PyTorch's in alternating rounds."""
    torch = torch_available()
    if not torch:
        print("PyTorch is not installed (pip install -e .[bench]): its column is skipped")
    print(f"{'workload':24s} {'path':>5s} {'ours':>8s} {'torch':>8s}   vs torch   (GOP/s)")
    for label, workload in LOW_PRECISION_SHAPES.items():
        assert engine.execute(workload).verification.ok, label
        unit = UNIT_PATHS[engine.plan(workload).values["UNIT"]]
        sides = {"ours": partial(_ours_s, engine, workload, options)}
        if torch:
            sides["torch"] = partial(_torch_s, workload, options)
        times = rotating_rounds(sides, rounds)
        flops = workload.get_complexity().flops
        rate = flops / statistics.median(times["ours"]) / 1e9
        if torch:
            torch_rate = flops / statistics.median(times["torch"]) / 1e9
            print(f"{label:24s} {unit:>5s} {rate:8.1f} {torch_rate:8.1f}   "
                  f"{rate / torch_rate:7.2f}x", flush=True)  # fmt: skip
        else:
            print(f"{label:24s} {unit:>5s} {rate:8.1f} {'-':>8s}", flush=True)
        engine.clear_cache()
    print()


def widened_against_f32(engine, options: BenchOptions, rounds: int) -> None:
    """bf16 matmuls on the FMA path and f32 ones of the same shapes, in alternating rounds."""
    print(f"{'workload':24s} {'bf16':>8s} {'f32':>8s}   f32 time / bf16 time   (GFLOP/s)")
    fma = {"UNIT": UNIT_FMA}
    for label, narrow in LOW_PRECISION_SHAPES.items():
        if narrow.options["dtype"] != "bf16":
            continue
        wide = Matmul(**{**narrow.options, "dtype": "f32"})
        assert engine.execute(narrow, fma).verification.ok, label
        sides = {
            "bf16": partial(_ours_s, engine, narrow, options, fma),
            "f32": partial(_ours_s, engine, wide, options),
        }
        median = {side: statistics.median(t) for side, t in rotating_rounds(sides, rounds).items()}
        flops = narrow.get_complexity().flops
        rates = " ".join(f"{flops / median[side] / 1e9:8.1f}" for side in sides)
        print(f"{label:24s} {rates}   {median['f32'] / median['bf16']:8.3f}", flush=True)
        engine.clear_cache()
    print()


def _ours_s(engine, workload, options: BenchOptions, parameters: dict | None = None) -> float:
    return engine.benchmark(workload, parameters, options=options).median_s


def _numpy_s(workload, options: BenchOptions, threads: int) -> float:
    return measure_numpy(workload, options, threads=threads).median_s


def _torch_s(workload, options: BenchOptions) -> float:
    return measure_torch(workload, options).median_s


if __name__ == "__main__":
    main()
