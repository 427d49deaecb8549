#!/bin/bash
# The GPU checks of issue 63 in two halves, for a GPU machine that has no MLIR.
#
#   PYTHON=.venv/bin/python scripts/gpu_check.sh export DIR   # where MLIR is
#   scripts/gpu_check.sh run DIR      # where the GPU is: python3 with numpy, cuda-bindings, torch
#   then, where MLIR is: the tune command printed by `export`, with --import-batch DIR/batch
#
# `run` prints, in this order: the GPU tests of tests/runtime (programs verified on the
# device, a trapping and a spinning kernel contained), the cuBLAS table of
# benchmarks/gpu_gemm.py, the tuning batch with its candidates per second and its race, and
# the median of one ~1 ms program in five separate processes (their spread is the timing's
# repeatability). DIR holds about 45 MiB, mostly the verification data of the table.
set -euo pipefail
mode=${1:?usage: scripts/gpu_check.sh export|run DIR}
dir=${2:?usage: scripts/gpu_check.sh export|run DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
py=${PYTHON:-python3}  # export: the project's environment (make venv); run: the GPU's Python
tune=(matmul M=1024 N=1024 K=1024 dtype=bf16 --target nvidia-gpu --chip sm_90 --budget 100
      --strategy model)

case $mode in
export)
    mkdir -p "$dir"
    "$py" "$root/benchmarks/gpu_gemm.py" export "$dir/gemm"
    "$py" -m mlirtune tune "${tune[@]}" --export-batch "$dir/batch"
    "$py" -m mlirtune opt matmul M=4096 N=4096 K=8192 dtype=bf16 --target nvidia-gpu --chip sm_90 \
        --program "$dir/one_ms.json" > /dev/null
    rm -f "$dir/one_ms.npz"  # timed on seeded inputs: only its spread matters
    echo "then, after run: mlirtune tune ${tune[*]} --import-batch $dir/batch"
    ;;
run)
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv || true
    "$py" -m pytest --noconftest -q -p no:cacheprovider \
        "$root/tests/runtime/test_cuda_device.py" "$root/tests/runtime/test_gpu_batch.py"
    "$py" "$root/benchmarks/gpu_gemm.py" run "$dir/gemm" --max-time 0.4
    "$py" -m mlirtune.cli.gpu_batch "$dir/batch"
    echo "one ~1 ms program, five processes: median ms, cv of its samples"
    for _ in 1 2 3 4 5; do
        "$py" -m mlirtune.cli.gpu_run "$dir/one_ms.json" --json --max-time 1 | "$py" -c \
            "import json, sys; d = json.load(sys.stdin); print(f\"{d['median_s'] * 1e3:.4f} {d['cv']:.2%}\")"
    done
    ;;
*)
    echo "usage: scripts/gpu_check.sh export|run DIR" >&2
    exit 2
    ;;
esac
