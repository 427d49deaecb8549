"""The tensor-core path of gpu_contraction (knob mma = 1): its rules, z3 constraints, cost
and transform steps. Each warp owns a warp_m x warp_n tile of the block's C and computes
it as 16 x 8 x 16 `mma.sync` instructions on tiles of A and B in shared memory.

The block's matmul (one K step on shared tiles) is split among warps (`#gpu.warp`), each
warp's part is tiled into native 16 x 8 x 16 matmuls under a K loop, and each of those is
vectorized to a `vector.contract`. The accumulators' reads and writes of C hoist out of
both K loops, so they live in registers for the whole kernel. The descriptor step
`lower-warp-mma` (steps/warp_mma.py) then gives each lane its fragments: ldmatrix,
mma.sync, and the stores of C.
"""

from __future__ import annotations

import math

import z3
from mlir import ir
from mlir.dialects import transform as tr
from mlir.dialects.transform import structured
from mlir.dialects.transform import vector as tvector

from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.schedule import Constraint, KnobVariables
from mlirtune.schedules.builder import ScheduleBuilder
from mlirtune.schedules.gpu_contraction.accumulators import hoist_accumulators
from mlirtune.schedules.gpu_contraction.steps.warp_mma import MMA_INPUT_TYPES
from mlirtune.schedules.gpu_contraction.tiles import GpuTiles
from mlirtune.targets.nvidia_gpu import GpuFacts, NvidiaGPU

# The mma.sync shape for 2-byte inputs: rows, columns and K of one instruction.
MMA_SHAPE = (16, 8, 16)
# mma.sync.m16n8k16 with bf16 or f16 inputs needs sm_80 (Ampere) or newer.
MMA_MIN_SM = 80
INPUTS = " or ".join(MMA_INPUT_TYPES)  # for messages: "bf16 or f16"
# Cost-model assumptions: shared memory bytes an SM serves per cycle, and the cycles a K
# step waits for its copies from global memory.
SHARED_BYTES_PER_CYCLE = 128
MMA_STEP_CYCLES = 600
TILE_RULE = (
    f"warp_m % {MMA_SHAPE[0]} = warp_n % {MMA_SHAPE[1]} = block_m % warp_m = "
    f"block_n % warp_n = block_k % {MMA_SHAPE[2]} = 0 < block_k"
)
WHOLE_RULE = "M % block_m = N % block_n = K % block_k = 0 (whole block tiles)"


def chip_has_mma(chip: str) -> bool:
    return int(chip.removeprefix("sm_").rstrip("af")) >= MMA_MIN_SM


def mma_unsupported(op: OpInfo) -> str | None:
    """Why this op cannot run on tensor cores (None where it can): the path takes bf16 or
    f16 inputs (both the same) with an f32 result, A [M, K] and B [K, N] as stored, and no
    epilogue (its lanes would read C tiles that other lanes of the warp write)."""
    (a, b), c = op.dtypes[:2], op.dtypes[-1]
    if a != b or a not in MMA_INPUT_TYPES or c != "f32":
        return f"inputs {a} into {c} (needs {INPUTS} into f32)"
    for attribute in ("epilogue", "transpose_a", "transpose_b"):
        if op.attributes.get(attribute):
            return f"the matmul has {attribute.replace('_', ' ')} (not supported with mma = 1)"
    return None


def mma_tile_problem(op: OpInfo, tiles: GpuTiles) -> str | None:
    """The first tile rule of the tensor-core path that `tiles` break, or None."""
    m, n, k = MMA_SHAPE
    warp_m, warp_n, block_k = tiles.warp_m, tiles.warp_n, tiles.block_k
    blocks = {"M": tiles.block_m, "N": tiles.block_n, "K": block_k}
    rules = (
        (
            warp_m % m == warp_n % n == tiles.block_m % warp_m == tiles.block_n % warp_n == 0
            and block_k > 0
            and block_k % k == 0,
            f"constraint mma_tiles: {TILE_RULE}",
        ),
        (
            all(op.dims[d] % blocks[d] == 0 for d in "MNK"),
            f"constraint mma_whole_blocks: {WHOLE_RULE}",
        ),
    )
    return next((rule for ok, rule in rules if not ok), None)


def warp_grid(tiles: GpuTiles) -> tuple[int, int]:
    """Warps per block along N (x) and M (y)."""
    return tiles.block_n // tiles.warp_n, tiles.block_m // tiles.warp_m


def mma_constraints(op: OpInfo, gpu: NvidiaGPU, knobs: KnobVariables) -> list[Constraint]:
    """The tensor-core path's rules as z3 terms: where it can run at all, its tile rules
    (those of mma_tile_problem), and its threads (a warp per warp tile)."""
    mma, bm, bn, bk, wm, wn = (
        knobs[k] for k in ("mma", "block_m", "block_n", "block_k", "warp_m", "warp_n")
    )
    m, n, k = MMA_SHAPE
    why = mma_unsupported(op) or ""
    if not chip_has_mma(gpu.chip):
        why = f"{gpu.chip} has no {INPUTS} mma.sync (sm_{MMA_MIN_SM} and newer)"
    whole = [op.dims[d] % knobs[f"block_{d.lower()}"] == 0 for d in "MNK"]
    limit, warp = gpu.max_threads_per_block, gpu.warp_size
    return [
        Constraint(
            "mma_path",
            f"mma = 0{f': {why}' if why else ' or 1: this op and chip can take tensor cores'}",
            z3.Or(mma == 0, z3.BoolVal(not why)),
        ),
        Constraint(
            "mma_tiles",
            f"mma = 0, or {TILE_RULE}",
            z3.Or(
                mma == 0,
                z3.And(wm % m == 0, wn % n == 0, bm % wm == 0, bn % wn == 0, bk % k == 0, bk > 0),
            ),
        ),
        Constraint("mma_whole_blocks", f"mma = 0, or {WHOLE_RULE}", z3.Or(mma == 0, z3.And(whole))),
        Constraint(
            "mma_threads",
            f"mma = 0, or {warp} * (block_m / warp_m) * (block_n / warp_n) <= {limit}",
            z3.Or(mma == 0, warp * (bm / wm) * (bn / wn) <= limit),
        ),
    ]


def mma_compute_seconds(op: OpInfo, facts: GpuFacts, tiles: GpuTiles) -> float:
    """Seconds the SMs take to issue the tensor-core path's work (mma = 1).

    Assumptions: each warp issues (warp_m/16)(warp_n/8) mma.sync per 16 of K, at
    facts.mma_per_cycle per SM, fed by ldmatrix of warp_m/16 + warp_n/16 four-matrix loads
    (512 bytes each, from shared memory at SHARED_BYTES_PER_CYCLE); the slower of the two
    bounds a step. Each K step also waits out its copies' round trip to memory
    (MMA_STEP_CYCLES), which the other blocks resident on the SM fill, and with two stages
    the block's own math half hides. Blocks are spread evenly over the SMs."""
    bm, bn, bk = tiles.block_m, tiles.block_n, tiles.block_k
    warps = (bm // tiles.warp_m) * (bn // tiles.warp_n)
    m, n, k = MMA_SHAPE
    mmas = (tiles.warp_m // m) * (tiles.warp_n // n)
    loads = tiles.warp_m // m + tiles.warp_n // (2 * n)
    issue = warps * max(mmas / facts.mma_per_cycle, loads * 512 / SHARED_BYTES_PER_CYCLE)
    grid = math.ceil(op.dims["M"] / bm) * math.ceil(op.dims["N"] / bn)
    blocks_per_sm = math.ceil(grid / facts.sms)
    resident = min(
        blocks_per_sm,
        facts.blocks_per_sm,
        max(1, facts.threads_per_sm // (NvidiaGPU.warp_size * warps)),
    )
    wait = math.ceil(op.dims["K"] / bk) * MMA_STEP_CYCLES / resident / tiles.stages
    cycles = blocks_per_sm * (issue * math.ceil(op.dims["K"] / k) + wait)
    return cycles / (facts.ghz * 1e9)


def tile_warps(s: ScheduleBuilder, ops: list[tuple[str, ir.Value]], tiles: GpuTiles) -> None:
    """Split the block's fill, matmul and epilogue among its warps alike, then tile each
    warp's part into native mma tiles, vectorized: the matmul's under a K loop (outermost,
    so that the accumulators' transfers hoist out of it), the others' 16 x 8 at a time."""
    warps_x, warps_y = warp_grid(tiles)
    mapping = ir.ArrayAttr.get([ir.Attribute.parse(f"#gpu.warp<{d}>") for d in "yx"])
    m, n, k = MMA_SHAPE
    for name, op in ops:
        with s.at(f"tile_warps_{name}"):
            warp_op = structured.TileUsingForallOp(
                op, num_threads=[warps_y, warps_x], mapping=mapping
            ).tiled_op
        if name == "matmul":
            warp_op, _ = s.tile(warp_op, [0, 0, k], "tile_mma_k")
        native, loops = s.tile(warp_op, [m, n], f"tile_mma_{name}")
        with s.at(f"vectorize_mma_{name}"):  # a contract with the matmul's maps
            vectorize = structured.VectorizeOp(native)
            vectorize.operation.attributes["create_named_contraction"] = ir.UnitAttr.get()
        trips = (tiles.warp_m // m, tiles.warp_n // n)
        for handle, trip in reversed(list(zip(loops, trips, strict=True))):  # inner first
            if trip > 1:
                s.unroll(handle, trip, f"unroll_mma_{name}")


def accumulate_in_fragments(s: ScheduleBuilder, module: ir.Value) -> None:
    """Keep each accumulator in registers across the K loops, then CSE the reads of A and
    B that the unrolled tiles repeat; the step lower-warp-mma makes the lanes' fragments."""
    function = hoist_accumulators(
        s,
        module,
        tvector.apply_patterns_vector_fold_arith_extension,
        tvector.apply_patterns_vector_lower_broadcast,
    )
    with s.at("cse_mma_reads"):
        tr.ApplyCommonSubexpressionEliminationOp(function)
