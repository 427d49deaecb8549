"""GPU GEMMs against cuBLAS (through PyTorch), in two halves for the compile/run cut.

    python benchmarks/gpu_gemm.py export DIR [--chip sm_90]   # where MLIR is
    python benchmarks/gpu_gemm.py run DIR                     # where the GPU is

`export` compiles each GEMM with the selector's tiles and with a few other tile configs
(`gpu_contraction` knobs: thread tiles for f32, tensor-core warp tiles for bf16 and f16,
and the FMA path's tiles beside them), saving GpuPrograms; small shapes get their inputs
and expected outputs beside them. `run` needs only numpy, cuda-bindings and PyTorch: it verifies the
small programs against their data and the large ones against cuBLAS's result, times every
program with the mlirtune harness (CUDA events around graphs of calls, every argument on
the device) and cuBLAS the same way (a captured CUDA graph of the same call count), and
prints each ratio. f32 runs without TF32 on both sides.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import numpy as np

VERIFY = [  # (name, workload options, tiles): saved with inputs and expected outputs
    ("f32_256", {"M": 256, "N": 256, "K": 256}, {}),
    ("f32_odd_1000x999x1001", {"M": 1000, "N": 999, "K": 1001}, {}),
    ("f32_odd_bk8", {"M": 333, "N": 301, "K": 257}, {"block_k": 8}),
    (
        "f32_odd_bk32_partial_blocks",
        {"M": 333, "N": 301, "K": 257},
        {"block_m": 64, "block_n": 64, "thread_m": 4, "thread_n": 4, "block_k": 32},
    ),
    ("f32_odd_global", {"M": 333, "N": 301, "K": 257}, {"block_k": 0}),
    ("f32_matvec_1x1024x1024", {"M": 1, "N": 1024, "K": 1024}, {}),
    ("bf16_256", {"M": 256, "N": 256, "K": 256, "dtype": "bf16"}, {}),
    ("bf16_256_fma", {"M": 256, "N": 256, "K": 256, "dtype": "bf16"}, {"mma": 0}),
    ("bf16_512x384x1024", {"M": 512, "N": 384, "K": 1024, "dtype": "bf16"}, {}),
    (
        "bf16_mma_128x128_w64x64_k64",
        {"M": 512, "N": 256, "K": 512, "dtype": "bf16"},
        {"mma": 1, "block_m": 128, "block_n": 128, "warp_m": 64, "warp_n": 64, "block_k": 64},
    ),
    (
        "bf16_mma_128x128_w64x64_k64_stages2_dynamic_shared",
        {"M": 256, "N": 256, "K": 512, "dtype": "bf16"},
        {"mma": 1, "block_m": 128, "block_n": 128, "warp_m": 64, "warp_n": 64, "block_k": 64}
        | {"stages": 2},
    ),
    (
        "bf16_mma_64x64_w32x32_k32_stages3",
        {"M": 192, "N": 128, "K": 320, "dtype": "bf16"},
        {"mma": 1, "block_m": 64, "block_n": 64, "warp_m": 32, "warp_n": 32, "block_k": 32}
        | {"stages": 3},
    ),
    (
        "bf16_mma_64x128_w32x64_k32_stages2",
        {"M": 256, "N": 384, "K": 1024, "dtype": "bf16"},
        {"mma": 1, "block_m": 64, "block_n": 128, "warp_m": 32, "warp_n": 64, "block_k": 32}
        | {"stages": 2},
    ),
    ("f16_256", {"M": 256, "N": 256, "K": 256, "dtype": "f16"}, {}),
    ("f16_512x384x1024", {"M": 512, "N": 384, "K": 1024, "dtype": "f16"}, {}),
    (
        "f16_mma_64x64_w32x32_k32_stages3",
        {"M": 192, "N": 128, "K": 320, "dtype": "f16"},
        {"mma": 1, "block_m": 64, "block_n": 64, "warp_m": 32, "warp_n": 32, "block_k": 32}
        | {"stages": 3},
    ),
    ("mlp_512x1024x256", {"M": 512, "N": 1024, "K": 256, "mlp": True}, {}),
]
LARGE = [  # (name, options): the selector's tiles and every config of TILES x BLOCK_K
    ("f32_4096", {"M": 4096, "N": 4096, "K": 4096}),
    ("bf16_4096", {"M": 4096, "N": 4096, "K": 4096, "dtype": "bf16"}),
    ("f16_4096", {"M": 4096, "N": 4096, "K": 4096, "dtype": "f16"}),
]
HALF = ("bf16", "f16")  # 2-byte inputs into f32 sums: tensor-core configs
TILES = [  # block_m, block_n, thread_m, thread_n
    (64, 64, 4, 4),
    (128, 64, 8, 4),
    (128, 128, 8, 4),
    (64, 128, 4, 4),
    (128, 64, 4, 4),
    (128, 128, 4, 4),
]
BLOCK_K = (16, 32, 64)
FMA_HALF = {"block_m": 128, "block_n": 64, "thread_m": 8, "thread_n": 4, "block_k": 32}
# Tensor-core configs of bf16 and f16 GEMMs: block_m, block_n, warp_m, warp_n, block_k, stages
MMA = [
    (128, 128, 64, 64, 64, 1),
    (128, 128, 64, 64, 64, 2),
    (128, 128, 32, 64, 64, 2),
    (128, 128, 32, 64, 64, 1),
    (128, 128, 64, 64, 32, 1),
    (128, 128, 64, 64, 32, 2),
    (128, 128, 32, 64, 32, 2),
    (128, 128, 64, 32, 32, 2),
    (128, 64, 64, 32, 32, 2),
    (64, 128, 32, 64, 32, 2),
    (64, 64, 32, 32, 32, 2),
    (128, 256, 64, 64, 32, 1),
    (128, 256, 64, 64, 32, 2),
    (256, 128, 64, 64, 32, 2),
    (128, 256, 64, 64, 64, 2),
    (128, 128, 64, 64, 64, 3),
    (128, 128, 64, 64, 32, 3),
    (128, 128, 64, 64, 32, 4),
    (128, 256, 64, 64, 64, 3),
]


def export(directory: Path, chip: str) -> None:
    from mlirtune.engine.ptx import PtxEngine, program_data
    from mlirtune.interfaces.errors import UsageError
    from mlirtune.runtime.gpu_run import save_data
    from mlirtune.targets.nvidia_gpu import NvidiaGPU
    from mlirtune.workloads import Matmul, Mlp

    directory.mkdir(parents=True, exist_ok=True)
    engine = PtxEngine(NvidiaGPU(chip=chip))

    def workload(options: dict) -> Matmul | Mlp:
        options = dict(options)
        return Mlp(**options) if options.pop("mlp", False) else Matmul(**options)

    for name, options, tiles in VERIFY:
        w = workload(options)
        path = directory / f"verify_{name}.json"
        engine.compile(w, tiles).save(path)
        save_data(path, program_data(w))
        print("exported", path.name)
    for name, options in LARGE:
        w = workload(options)
        engine.compile(w).save(directory / f"large_{name}_selector.json")
        configs = [
            (
                f"{bm}x{bn}_{tm}x{tn}_k{bk}",
                {"block_m": bm, "block_n": bn, "thread_m": tm, "thread_n": tn, "block_k": bk},
            )
            for (bm, bn, tm, tn), bk in itertools.product(TILES, BLOCK_K)
        ]
        if options.get("dtype") in HALF:  # tensor cores, and FMAs in the selector's tiles
            configs = [
                (
                    f"mma_{bm}x{bn}_w{wm}x{wn}_k{bk}_s{stages}",
                    {"mma": 1, "block_m": bm, "block_n": bn, "warp_m": wm, "warp_n": wn}
                    | {"block_k": bk, "stages": stages},
                )
                for bm, bn, wm, wn, bk, stages in MMA
            ] + [("fma_128x64_8x4_k32", {"mma": 0, **FMA_HALF})]
        for label, config in configs:
            path = directory / f"large_{name}_{label}.json"
            try:
                engine.compile(w, config).save(path)
            except UsageError as error:  # outside the family's constraints
                print("skipped", path.stem, error)
        print("exported", name, "with", len(configs), "configs")


def run(directory: Path, max_time: float) -> int:
    import torch

    from mlirtune.interfaces.bench import BenchOptions
    from mlirtune.interfaces.gpu_program import GpuProgram
    from mlirtune.runtime.cuda import CudaDevice
    from mlirtune.runtime.gpu_run import load_data, run_program

    torch.backends.cuda.matmul.allow_tf32 = False
    device = CudaDevice(0)
    print(f"device: {device!r}, driver {device.fingerprint()['driver']}")
    options = BenchOptions(max_time_s=max_time)
    failures = 0
    for path in sorted(directory.glob("verify_*.json")):
        program = GpuProgram.load(path)
        result = run_program(device, program, load_data(path), options)
        failures += not result.verification.ok
        status = "ok" if result.verification.ok else f"WRONG {result.verification.summary()}"
        error = result.verification.max_abs_error
        print(f"{path.stem:40s} verify {status}, max abs error {error:.2e}")
    print(f"\n{'program':44s} {'GFLOP/s':>9s} {'cv':>6s} {'vs cuBLAS':>9s}")
    for name, _ in LARGE:
        paths = sorted(directory.glob(f"large_{name}_*.json"))
        if not paths:
            continue
        first = GpuProgram.load(paths[0])
        data = _inputs_and_expected(first, torch)
        cublas_s = _cublas_seconds(first, torch, data, max_time)
        print(f"{'cuBLAS ' + name:44s} {first.flops / cublas_s / 1e9:9.1f}")
        ratios = {}
        for path in paths:
            program = GpuProgram.load(path)
            result = run_program(device, program, data, options)
            failures += not result.verification.ok
            summary = result.summary()
            ratios[path.stem] = cublas_s / summary["median_s"]
            check = "" if result.verification.ok else f"  WRONG {result.verification.summary()}"
            print(
                f"{path.stem:44s} {summary['gflops']:9.1f} {summary['cv']:6.1%} "
                f"{ratios[path.stem]:6.3f}{check}"
            )
        winner = max(ratios, key=ratios.get)
        print(f"best of {len(ratios)} configs for {name}: {winner} at {ratios[winner]:.3f}x")
    return 1 if failures else 0


def _inputs_and_expected(program, torch) -> dict[str, np.ndarray]:
    """Seeded inputs and their product on the GPU in f32 (without TF32)."""
    a, b, c = program.arguments
    rng = np.random.default_rng(0)
    arrays = {x.name: rng.uniform(-1, 1, x.shape).astype(x.numpy_dtype) for x in (a, b)}
    product = _to_torch(arrays[a.name], torch).float() @ _to_torch(arrays[b.name], torch).float()
    arrays[c.name] = product.cpu().numpy().astype(c.numpy_dtype)
    return arrays


def _to_torch(array: np.ndarray, torch):
    """The array on the GPU in its own dtype (bf16 and f16 through an exact f32 copy)."""
    tensor = torch.from_numpy(array.astype(np.float32)).cuda()
    half = {"bfloat16": torch.bfloat16, "float16": torch.float16}.get(array.dtype.name)
    return tensor.to(half) if half else tensor


def _cublas_seconds(program, torch, data, max_time: float) -> float:
    """Median seconds per product (in the inputs' dtype) over replays of a CUDA graph of
    back-to-back cuBLAS calls, each replay about 2 ms."""
    a, b, _ = program.arguments
    ta, tb = (_to_torch(data[x.name], torch) for x in (a, b))
    out = torch.matmul(ta, tb)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.matmul(ta, tb, out=out)
    end.record()
    end.synchronize()
    call_s = max(start.elapsed_time(end) * 1e-3, 1e-7)
    calls = max(1, int(2e-3 / call_s))
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream), torch.cuda.graph(graph):
        for _ in range(calls):
            torch.matmul(ta, tb, out=out)
    samples = []
    for _ in range(min(200, max(3, int(max_time / (calls * call_s))))):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e-3 / calls)
    return float(np.median(samples))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=["export", "run"])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--chip", default="sm_90", help="export: the NVPTX chip (default sm_90)")
    parser.add_argument("--max-time", type=float, default=1.0, help="run: seconds per program")
    args = parser.parse_args()
    if args.mode == "export":
        export(args.directory, args.chip)
        return 0
    return run(args.directory, args.max_time)


if __name__ == "__main__":
    sys.exit(main())
