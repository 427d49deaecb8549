"""The gpu_contraction family's knobs, parameter checks, selector, constraints and cost
model (NVIDIA GPUs)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import ClassVar

import z3
from mlir import ir

from mlirtune.interfaces.dtype import element_bytes
from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.schedule import (
    Config,
    Constraint,
    Derivation,
    Domains,
    Knob,
    KnobVariables,
    Step,
)
from mlirtune.interfaces.target import Target
from mlirtune.schedules.family import LibraryFamily
from mlirtune.schedules.gpu_contraction.mma import (
    chip_has_mma,
    mma_compute_seconds,
    mma_constraints,
    mma_tile_problem,
    mma_unsupported,
)
from mlirtune.schedules.gpu_contraction.steps.dynamic_shared import (
    extern_dynamic_shared_memory,
    use_dynamic_shared_memory,
)
from mlirtune.schedules.gpu_contraction.steps.stages import pipeline_shared_copies
from mlirtune.schedules.gpu_contraction.steps.warp_mma import lower_warp_mma
from mlirtune.schedules.gpu_contraction.steps.workgroup import share_workgroup_tiles
from mlirtune.schedules.gpu_contraction.tiles import (
    GpuTiles,
    block_dims,
    copy_lanes,
    largest_divisor,
    shared_bytes,
    thread_dims,
    whole_tiles,
)
from mlirtune.schedules.gpu_contraction.transform import gpu_schedule
from mlirtune.schedules.knobs import choices, divisors, powers_of_two
from mlirtune.targets.nvidia_gpu import SHARED_OPT_IN_BYTES, NvidiaGPU

# Knob defaults, and the tiles the selector picks: 64x64 outputs per block and 4x4 per
# thread (256 threads); 128x64 and 8x4 where those tiles still give every SM two blocks.
# K steps through shared memory of 64 elements (32 for 2-byte inputs). Measured on an H200
# at 4096^3, f32: 64x64/4x4 33.6 TFLOP/s with steps of 64 and 32.3 with 16; 128x64/8x4
# 39.5 with 64 (cuBLAS: 51.1). bf16 inputs: 64x64/4x4 20.9 with 32 and 19.9 with 64;
# 128x64/8x4 22.0 with 32 and 13.4 with 64.
BLOCK_CAP = 64
THREAD_CAP = 4
LARGE_M, LARGE_N = 128, 64
LARGE_TILES = {"block_m": LARGE_M, "block_n": LARGE_N, "thread_m": 8, "thread_n": 4}
BLOCKS_PER_SM = 2  # the fewest blocks of large tiles per SM
STEPS = (64, 32, 16, 8)  # the selector's block_k, largest first
# The fewest K per step for two stages: the step-pipelining wraps the loop over the step's
# 16-wide mma K steps, which a single step would not have.
STAGED_K = 32
# The selector's tensor-core tiles (mma = 1), in order of preference: 4 warps of 64 x 64
# in double-buffered K steps of 64 (70 KiB of shared memory: dynamic), then of 32 (K no
# multiple of 64); 4 warps of 32 x 32 for ops too small to give every SM a block of
# those; single K steps of 16 where K is no multiple of 32. Measured on an H200 at 4096^3
# (bf16 into f32, TFLOP/s, cuBLAS 699 in that run): 128x128 in warps of 64x64: 311 and
# 329 (one program, timed twice) double-buffered in steps of 64, 294 in steps of 32;
# single-buffered 278 in steps of 64, 213 in steps of 32; double-buffered warps of 32x64
# and 64x32 (steps of 32): 266 and 266; 128x256 (steps of 64): 312; 64x64 in warps of
# 32x32: 168. In a later run (cuBLAS 773), three stages in steps of 64 made 327 against
# 330 for two, and four in steps of 32 made 301 against 292: more stages gain nothing.
MMA_TILES = (
    {"block_m": 128, "block_n": 128, "warp_m": 64, "warp_n": 64, "block_k": 64, "stages": 2},
    {"block_m": 128, "block_n": 128, "warp_m": 64, "warp_n": 64, "block_k": 32, "stages": 2},
    {"block_m": 64, "block_n": 64, "warp_m": 32, "warp_n": 32, "block_k": 32, "stages": 2},
    {"block_m": 128, "block_n": 128, "warp_m": 64, "warp_n": 64, "block_k": 16, "stages": 1},
    {"block_m": 64, "block_n": 64, "warp_m": 32, "warp_n": 32, "block_k": 16, "stages": 1},
)


def block_k_default(op: OpInfo) -> int:
    return 64 if element_bytes(op.element_type) >= 4 else 32


# The most shared memory any chip gives a block: the compile-time check (the constraints
# hold each target to its own, NvidiaGPU.shared_bytes_per_block).
SHARED_BYTES = max(SHARED_OPT_IN_BYTES.values())
# Largest block tile a tuner tries (128x128 at 1x1 per thread is past the thread limit, so
# the constraints prune what the candidates alone do not).
BLOCK_CANDIDATE_CAP = 128

# Cost-model assumptions beside the target's facts (NvidiaGPU.facts).
LATENCY_WARPS = 16  # resident warps an SM needs to hide load latency; fewer stretch time
SHARED_LOADS = 1.0  # 16-byte shared-memory load warp instructions an SM issues per cycle
# Issue cycles a K step of shared tiles loses: its copies' global loads are used at once
# (no double buffering), so each step waits out a round trip to memory, then two barriers.
STEP_CYCLES = 100
# Of the L1 load rate, what loads straight from global memory get (block_k = 0): their
# rows and columns are not shared across the block's warps.
GLOBAL_LOAD_SHARE = 0.25
LAUNCH_S = 5e-6


def _block_tiles(dim: str) -> Derivation:
    """Divisors of the loop (full tiles only) and powers of two (a partial last tile)."""
    whole, powers = divisors(dim, BLOCK_CANDIDATE_CAP), powers_of_two(dim, BLOCK_CANDIDATE_CAP)
    return lambda op, lanes: [*whole(op, lanes), *powers(op, lanes)]


class GpuContraction(LibraryFamily[GpuTiles]):
    """block_m x block_n output tiles per thread block, thread_m x thread_n per thread."""

    name = "gpu_contraction"
    steps: ClassVar[Mapping[str, Step]] = {
        "share-workgroup-tiles": share_workgroup_tiles,
        "lower-warp-mma": lower_warp_mma,
        "pipeline-shared-copies": pipeline_shared_copies,
        "dynamic-shared-memory": use_dynamic_shared_memory,
        "extern-dynamic-shared-memory": extern_dynamic_shared_memory,
    }
    description = "matmul + epilogue tiled into GPU blocks and threads, lowered to PTX"
    root_kinds = ("matmul",)
    target_kinds = (NvidiaGPU.name,)
    knobs = (
        Knob("block_m", "rows of C per thread block (grid y)", BLOCK_CAP, _block_tiles("M")),
        Knob("block_n", "columns of C per thread block (grid x)", BLOCK_CAP, _block_tiles("N")),
        Knob(
            "thread_m",
            "rows of C per thread (block y = block_m/thread_m)",
            THREAD_CAP,
            choices(1, 2, 4, 8),
        ),
        Knob(
            "thread_n",
            "columns of C per thread (block x = block_n/thread_n)",
            THREAD_CAP,
            choices(1, 2, 4, 8),
        ),
        Knob(
            "block_k",
            "K per shared-memory step of A and B tiles (0: threads read global memory)",
            block_k_default,
            choices(0, 8, 16, 32, 64),
            minimum=0,
        ),
        Knob(
            "mma",
            "1: tensor cores (bf16 or f16 mma.sync into f32, a warp per warp_m x warp_n tile); "
            "0: FMAs",
            0,
            choices(0, 1),
            minimum=0,
        ),
        Knob(
            "stages",
            "buffers per shared tile: S > 1 copies K steps (cp.async) S - 1 steps ahead of "
            "the math (mma = 1)",
            1,
            choices(1, 2, 3, 4),
        ),
        Knob("warp_m", "rows of C per warp (mma = 1; a multiple of 16)", 64, choices(16, 32, 64)),
        Knob(
            "warp_n", "columns of C per warp (mma = 1; a multiple of 8)", 64, choices(8, 16, 32, 64)
        ),
    )
    values_type = GpuTiles

    # --- parameters and the transform ------------------------------------------------------

    def parameters(self, op: OpInfo, values: Config | None = None) -> Config:
        """Defaults overlaid with `values` (checked as every family checks them), refused
        up front (before any IR is touched) where a block would exceed the CUDA limit of
        threads, or its shared tiles the static shared memory."""
        config = super().parameters(op, values)
        tiles = GpuTiles.from_config(config)
        x, y, _ = block_dims(tiles)
        if x * y > NvidiaGPU.max_threads_per_block:
            raise UsageError(
                f"{x}x{y} threads per block exceeds {NvidiaGPU.max_threads_per_block}",
                stage="schedule",
            )
        if not 0 < tiles.block_k < op.dims["K"] and tiles.block_k:
            raise UsageError(
                f"block_k={tiles.block_k} needs K > block_k (constraint k_steps: the "
                "shared tiles are staged per step of a K loop); use block_k=0",
                stage="schedule",
            )
        if tiles.mma:
            problem = mma_unsupported(op) or mma_tile_problem(op, tiles)
            if problem:
                raise UsageError(f"mma=1: {problem}", stage="schedule")
        if tiles.stages > 1 and not (tiles.mma and tiles.block_k >= STAGED_K):
            raise UsageError(
                f"stages={tiles.stages} needs mma=1 and block_k >= {STAGED_K} (constraint stages)",
                stage="schedule",
            )
        if shared_bytes(op, tiles) > SHARED_BYTES:
            raise UsageError(
                f"shared tiles of {shared_bytes(op, tiles)} bytes exceed {SHARED_BYTES} "
                "(constraint shared_memory: (block_m + block_n) * block_k * element size "
                "* stages, rows padded with mma = 1)",
                stage="schedule",
            )
        return config

    def build(self, op: OpInfo, parameters: Config) -> ir.Module:
        tiles = self.knob_values(op, self.parameters(op, parameters))
        return gpu_schedule(tiles, whole_tiles(op, tiles), copy_lanes(op, tiles))

    # --- selector, constraints and cost model (NVIDIA GPUs) --------------------------------

    def gpu(self, target: Target, stage: str) -> NvidiaGPU:
        return self.require(target, NvidiaGPU, stage)

    def choose(self, op: OpInfo, target: Target, fixed: Config) -> Config:
        """Tensor cores where the chip, the op, whole tiles and the `fixed` values allow
        (the first of MMA_TILES that, with the fixed values, keeps every constraint and
        gives every SM a block, else the one of them that makes the most blocks);
        else FMAs in LARGE_TILES where they divide M and N and still give each of the
        target's SMs BLOCKS_PER_SM blocks; else the largest divisors of M and N up to the
        block defaults, then of the block tiles up to the thread defaults, so that every
        tile is full (no idle threads), or the default tiles with partial ones at the edges
        where full tiles would take more threads than a block may have (M or N with no
        small divisors). K goes through shared memory in the largest steps up to the
        default block_k that leave more than one step."""
        gpu = self.gpu(target, "select")
        tiles = self._fma_tiles(op, gpu)
        if not chip_has_mma(gpu.chip) or mma_unsupported(op) or fixed.get("mma") == 0:
            return tiles
        fits = [{**tiles, **mma, "mma": 1, **fixed} for mma in MMA_TILES]
        candidates = self.knob_domains(op, gpu)
        fits = [c for c in fits if not self._broken(op, gpu, c, candidates)]
        if not fits:
            return tiles
        busy = [c for c in fits if self._blocks(op, c) >= gpu.facts.sms]
        return busy[0] if busy else max(fits, key=lambda c: self._blocks(op, c))

    def _blocks(self, op: OpInfo, config: Config) -> int:
        tiles = self.knob_values(op, config)
        return (op.dims["M"] // tiles.block_m) * (op.dims["N"] // tiles.block_n)

    def _fma_tiles(self, op: OpInfo, gpu: NvidiaGPU) -> Config:
        caps = self.knob_values(op, {})
        m, n = op.dims["M"], op.dims["N"]
        block_k = next((bk for bk in STEPS if bk <= caps.block_k and bk < op.dims["K"]), 0)
        whole = m % LARGE_M == 0 and n % LARGE_N == 0
        mma = {"mma": 0, "stages": 1, "warp_m": caps.warp_m, "warp_n": caps.warp_n}
        if whole and (m // LARGE_M) * (n // LARGE_N) >= BLOCKS_PER_SM * gpu.facts.sms:
            return {**LARGE_TILES, "block_k": block_k, **mma}
        block_m = largest_divisor(m, caps.block_m)
        block_n = largest_divisor(n, caps.block_n)
        thread_m = largest_divisor(block_m, caps.thread_m)
        thread_n = largest_divisor(block_n, caps.thread_n)
        x, y, _ = thread_dims(block_m, block_n, thread_m, thread_n)
        if x * y > NvidiaGPU.max_threads_per_block:
            block_m, block_n = caps.block_m, caps.block_n
            thread_m, thread_n = caps.thread_m, caps.thread_n
        return {
            "block_m": block_m,
            "block_n": block_n,
            "thread_m": thread_m,
            "thread_n": thread_n,
            "block_k": block_k,
            **mma,
        }

    def lanes(self, op: OpInfo, target: Target) -> int:
        """One element per thread: the kernel is scalar code, one output tile per thread."""
        self.gpu(target, "space")
        return 1

    def constraints(
        self, op: OpInfo, target: Target, knobs: KnobVariables, domains: Domains
    ) -> list[Constraint]:
        gpu = self.gpu(target, "space")
        bm, bn, tm, tn, bk, mma, stages = (
            knobs[k]
            for k in ("block_m", "block_n", "thread_m", "thread_n", "block_k", "mma", "stages")
        )
        limit, shared = gpu.max_threads_per_block, gpu.shared_bytes_per_block
        size = element_bytes(op.element_type)

        def padded(row: z3.ArithRef) -> z3.ArithRef:  # ldmatrix_row_padding, in z3
            return row + z3.If(z3.And(mma == 1, (row * size) % 32 == 0), 16 // size, 0)

        return [
            *mma_constraints(op, gpu, knobs),
            Constraint(
                "positive_tiles",
                "every tile is a positive integer: a block and a thread own whole outputs",
                z3.And([k >= 1 for k in (bm, bn, tm, tn)] + [bk >= 0]),
            ),
            Constraint(
                "k_steps",
                "block_k = 0 or block_k < K: shared tiles are staged per step of a K loop",
                z3.Or(bk == 0, bk < op.dims["K"]),
            ),
            Constraint(
                "shared_memory",
                f"(block_m + block_n) * block_k * {size} * stages <= {shared}: a K step's "
                f"tiles of A and B fit the shared memory a block may take on {gpu.chip} "
                "(with mma = 1, rows padded against bank conflicts)",
                (bm * padded(bk) + bk * padded(bn)) * size * stages <= shared,
            ),
            Constraint(
                "stages",
                f"stages = 1, or mma = 1 and block_k >= {STAGED_K}: the double buffers are "
                "filled by cp.async, which the tensor-core path's 16-byte copies take, around "
                "a loop over the step's mma K steps",
                z3.Or(stages == 1, z3.And(mma == 1, bk >= STAGED_K)),
            ),
            Constraint(
                "threads_per_block",
                f"mma = 1 or ceil(block_n/thread_n)*ceil(block_m/thread_m) <= {limit}: the "
                "CUDA limit on threads per block (the launch would fail)",
                z3.Or(mma == 1, ((bn + tn - 1) / tn) * ((bm + tm - 1) / tm) <= limit),
            ),
            Constraint(
                "thread_m_within_block_m",
                "thread_m <= block_m: a thread tile lies in its block tile",
                tm <= bm,
            ),
            Constraint(
                "thread_n_within_block_n",
                "thread_n <= block_n: a thread tile lies in its block tile",
                tn <= bn,
            ),
        ]

    def cost(self, op: OpInfo, target: Target, config: Config) -> float:
        """Seconds per call on the target (its `facts`, nominal unless given): the slower of
        issuing the instructions and moving the bytes, plus a launch.

        Assumptions: every thread runs K steps of thread_m*thread_n FMAs. With block_k = 0
        they are fed by thread_m + thread_n loads from global memory, and each warp reads
        its own rows of A and columns of B from L2. With shared tiles the loads come from
        shared memory, 16 bytes at a time; each K step also copies the block's tiles (one
        load and store per element, shared among the threads) and waits at two barriers;
        L2 serves each block's panels once. Partial tiles cost full ones, since their
        threads still run; blocks are spread evenly over the SMs; an SM with fewer than
        LATENCY_WARPS resident warps is slowed in proportion; A and B are read once from
        DRAM; C is written once. Tensor cores (mma = 1) issue as mma_compute_seconds says."""
        facts = self.gpu(target, "space").facts
        tiles = self.knob_values(op, config)
        m, n, k = op.dims["M"], op.dims["N"], op.dims["K"]
        bm, bn = min(tiles.block_m, m), min(tiles.block_n, n)
        tm, tn = min(tiles.thread_m, bm), min(tiles.thread_n, bn)
        bk = tiles.block_k
        grid = math.ceil(m / bm) * math.ceil(n / bn)
        x, y, _ = thread_dims(bm, bn, tm, tn)
        warps = math.ceil(x * y / NvidiaGPU.warp_size)
        size_in, size_out = element_bytes(op.element_type), element_bytes(op.dtypes[-1])
        fma = tm * tn / facts.fma_warps_per_cycle
        if bk:
            lanes = max(1, 16 // size_in)  # elements per 16-byte shared load
            copied = 2 * (bm + bn) / (x * y)  # a load and a store per element, per k
            # A thread's columns of B read 16 bytes apart: wider rows conflict in banks.
            b_loads = math.ceil(tn / lanes) ** 2
            per_step = (
                max(fma, (math.ceil(tm / lanes) + b_loads) / SHARED_LOADS)
                + copied / facts.load_warps_per_cycle
                + STEP_CYCLES / bk
            )
            l2_elements = grid * (bm + bn) * k
        else:
            per_step = max(fma, (tm + tn) / (facts.load_warps_per_cycle * GLOBAL_LOAD_SHARE))
            warp_x = min(NvidiaGPU.warp_size, x)
            warp_rows = math.ceil(NvidiaGPU.warp_size / warp_x) * tm
            l2_elements = grid * warps * (warp_rows + warp_x * tn) * k
        blocks_per_sm = math.ceil(grid / facts.sms)
        resident = min(
            blocks_per_sm,
            facts.blocks_per_sm,
            max(1, facts.threads_per_sm // (NvidiaGPU.warp_size * warps)),
        )
        stretch = max(1.0, LATENCY_WARPS / (resident * warps))
        compute = blocks_per_sm * warps * k * per_step * stretch / (facts.ghz * 1e9)
        if tiles.mma:  # tensor cores: whole shared tiles, no thread tiles
            compute = mma_compute_seconds(op, facts, tiles)
        dram = ((m + n) * k * size_in + m * n * size_out) / facts.dram_bytes_per_s
        l2 = l2_elements * size_in / facts.l2_bytes_per_s
        return max(compute, dram, l2) + LAUNCH_S


GPU_CONTRACTION = GpuContraction()
