"""The `gpu_contraction` family: a matmul (with its fill and an element-wise epilogue such as
bias + ReLU) tiled into a grid of thread blocks and a block of threads on an NVIDIA GPU.

The last op (the matmul, or its epilogue) is tiled into `scf.forall`s mapped to
`#gpu.block` (block_m x block_n outputs per block) and then `#gpu.thread` (thread_m x
thread_n outputs per thread), fusing its producers into both levels; the function is then
bufferized and the foralls become a `gpu.launch`. Each thread reads A and B straight from
global memory (no shared-memory staging). The kernel outlining, NVVM lowering and PTX
serialization are pass stages of nvidia/lower_gpu.yaml.
"""

from __future__ import annotations

import math

import z3
from mlir import ir
from mlir.dialects import transform as tr
from mlir.dialects.bufferization import LayoutMapOption
from mlir.dialects.transform import bufferization as tbufferization
from mlir.dialects.transform import gpu as tgpu
from mlir.dialects.transform import structured

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
)
from mlirtune.interfaces.target import Target
from mlirtune.schedules.builder import ScheduleBuilder
from mlirtune.schedules.family import LibraryFamily
from mlirtune.schedules.knobs import choices, divisors, powers_of_two
from mlirtune.targets.nvidia_gpu import NvidiaGPU

# Knob defaults, and the largest tiles the selector picks: 64x64 outputs per block, 4x4
# per thread (256 threads).
BLOCK_CAP = 64
THREAD_CAP = 4
# Largest block tile a tuner tries (128x128 at 1x1 per thread is past the thread limit, so
# the constraints prune what the candidates alone do not).
BLOCK_CANDIDATE_CAP = 128

# Cost-model assumptions beside the target's facts (NvidiaGPU.facts).
LATENCY_WARPS = 16  # resident warps an SM needs to hide load latency; fewer stretch time
LAUNCH_S = 5e-6


def _block_tiles(dim: str) -> Derivation:
    """Divisors of the loop (full tiles only) and powers of two (a partial last tile)."""
    whole, powers = divisors(dim, BLOCK_CANDIDATE_CAP), powers_of_two(dim, BLOCK_CANDIDATE_CAP)
    return lambda op, lanes: [*whole(op, lanes), *powers(op, lanes)]


class GpuContraction(LibraryFamily):
    """block_m x block_n output tiles per thread block, thread_m x thread_n per thread."""

    name = "gpu_contraction"
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
    )

    # --- parameters and the transform ------------------------------------------------------

    def parameters(self, op: OpInfo, values: Config | None = None) -> Config:
        """Defaults overlaid with `values`, refused up front (before any IR is touched) when
        a tile is unknown or not a positive integer, or a block would exceed the CUDA
        limit of threads."""
        names = [knob.name for knob in self.knobs]
        given = dict(values or {})
        if set(given) - set(names) or not all(_positive_int(v) for v in given.values()):
            raise UsageError(
                f"GPU tiles must be positive integers {', '.join(names)}; got {given}",
                stage="schedule",
            )
        tiles = super().parameters(op, given)
        x, y, _ = block_dims(tiles)
        if x * y > NvidiaGPU.max_threads_per_block:
            raise UsageError(
                f"{x}x{y} threads per block exceeds {NvidiaGPU.max_threads_per_block}",
                stage="schedule",
            )
        return tiles

    def build(self, op: OpInfo, parameters: Config) -> ir.Module:
        return gpu_schedule(self.parameters(op, parameters))

    # --- selector, constraints and cost model (NVIDIA GPUs) --------------------------------

    def gpu(self, target: Target, stage: str) -> NvidiaGPU:
        return self.require(target, NvidiaGPU, stage)

    def choose(self, op: OpInfo, target: Target) -> Config:
        """The largest divisors of M and N up to the block defaults, then of the block tiles
        up to the thread defaults, so that every tile is full (no idle threads)."""
        self.gpu(target, "select")
        caps = self.defaults(op)
        block_m = _largest_divisor(op.dims["M"], caps["block_m"])
        block_n = _largest_divisor(op.dims["N"], caps["block_n"])
        return {
            "block_m": block_m,
            "block_n": block_n,
            "thread_m": _largest_divisor(block_m, caps["thread_m"]),
            "thread_n": _largest_divisor(block_n, caps["thread_n"]),
        }

    def lanes(self, op: OpInfo, target: Target) -> int:
        """One element per thread: the kernel is scalar code, one output tile per thread."""
        self.gpu(target, "space")
        return 1

    def constraints(
        self, op: OpInfo, target: Target, knobs: KnobVariables, domains: Domains
    ) -> list[Constraint]:
        gpu = self.gpu(target, "space")
        bm, bn, tm, tn = (knobs[k] for k in ("block_m", "block_n", "thread_m", "thread_n"))
        limit = gpu.max_threads_per_block
        return [
            Constraint(
                "positive_tiles",
                "every tile is a positive integer: a block and a thread own whole outputs",
                z3.And([k >= 1 for k in (bm, bn, tm, tn)]),
            ),
            Constraint(
                "threads_per_block",
                f"ceil(block_n/thread_n)*ceil(block_m/thread_m) <= {limit}: the CUDA limit "
                "on threads per block (the launch would fail)",
                ((bn + tn - 1) / tn) * ((bm + tm - 1) / tm) <= limit,
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
        issuing the FMAs and loads, and moving the bytes, plus a launch.

        Assumptions: every thread runs K steps of thread_m*thread_n FMAs fed by
        thread_m + thread_n loads (no shared memory; partial tiles cost full ones, since
        their threads still run); blocks are spread evenly over the SMs; an SM with fewer
        than LATENCY_WARPS resident warps is slowed in proportion; A and B are read once
        from DRAM, and each block's panels again from L2; C is written once."""
        facts = self.gpu(target, "space").facts
        m, n, k = op.dims["M"], op.dims["N"], op.dims["K"]
        bm, bn = min(config["block_m"], m), min(config["block_n"], n)
        tm, tn = min(config["thread_m"], bm), min(config["thread_n"], bn)
        grid = math.ceil(m / bm) * math.ceil(n / bn)
        x, y, _ = block_dims({"block_m": bm, "block_n": bn, "thread_m": tm, "thread_n": tn})
        warps = math.ceil(x * y / NvidiaGPU.warp_size)
        per_step = max(tm * tn / facts.fma_warps_per_cycle, (tm + tn) / facts.load_warps_per_cycle)
        blocks_per_sm = math.ceil(grid / facts.sms)
        resident = min(
            blocks_per_sm,
            facts.blocks_per_sm,
            max(1, facts.threads_per_sm // (NvidiaGPU.warp_size * warps)),
        )
        stretch = max(1.0, LATENCY_WARPS / (resident * warps))
        compute = blocks_per_sm * warps * k * per_step * stretch / (facts.ghz * 1e9)
        size_in, size_out = element_bytes(op.element_type), element_bytes(op.dtypes[-1])
        dram = ((m + n) * k * size_in + m * n * size_out) / facts.dram_bytes_per_s
        l2 = grid * (bm + bn) * k * size_in / facts.l2_bytes_per_s
        return max(compute, dram, l2) + LAUNCH_S


GPU_CONTRACTION = GpuContraction()


def gpu_schedule(tiles: Config) -> ir.Module:
    """Tile the last op (the matmul, or its epilogue) into blocks, then threads, fusing its
    producers into both levels; bufferize and map the foralls to a gpu.launch.

    The payload's shape decides the producers: the fill alone, or the matmul and then the
    fill when an epilogue comes last. The matmul handle is yielded once per epilogue op, so
    it is empty (and its fusion a no-op) when the matmul itself is the last op. Producers
    are fused consumer-first so each fusion finds its user already in the loop.
    """
    with ScheduleBuilder("gpu_contraction") as s:
        anchor = s.last_op("match_anchor")
        matmul = s.match_root(s.root, "matmul", "match_matmul")
        with s.at("single_matmul"):  # fails on a payload with several matmuls
            matmul = tr.SplitHandleOp([tr.AnyOpType.get()], matmul).results[0]
        epilogue = s.match(s.root, ["linalg.generic"], "match_epilogue")
        with s.at("match_epilogue"):
            fused_matmul = tr.ForeachOp([tr.AnyOpType.get()], [epilogue])
            with ir.InsertionPoint(fused_matmul.body):
                tr.YieldOp([matmul])
        handles = [fused_matmul.results[0], s.match(s.root, ["linalg.fill"], "match_fill")]
        # Blocks take fixed tile sizes; threads split each block tile into a fixed count of
        # pieces, so the thread forall keeps a static trip count even in partial tiles.
        tile_x, tile_y, _ = block_dims(tiles)
        for level, split, mapping in (
            ("blocks", {"tile_sizes": [tiles["block_m"], tiles["block_n"]]}, _mapping("block")),
            ("threads", {"num_threads": [tile_y, tile_x]}, _mapping("thread")),
        ):
            with s.at(f"tile_{level}"):
                tiled = structured.TileUsingForallOp(anchor, mapping=mapping, **split)
            anchor = tiled.tiled_op
            handles = [s.fuse_into(h, tiled.forall_op, f"fuse_{level}") for h in handles]
        _cleanup(s, s.root, "before_bufferize")
        with s.at("bufferize"):
            bufferized = tbufferization.OneShotBufferizeOp(
                s.root,
                bufferize_function_boundaries=True,
                function_boundary_type_conversion=LayoutMapOption.IdentityLayoutMap,
            ).transformed
        function = _cleanup(s, bufferized, "after_bufferize")
        with s.at("map_blocks"):
            launch = tgpu.MapForallToBlocks(function, generate_gpu_launch=True).result
        with s.at("map_threads"):
            tgpu.MapNestedForallToThreads(
                launch, block_dims=block_dims(tiles), sync_after_distribute=False
            )
    return s.module


def block_dims(tiles: Config) -> list[int]:
    """Threads per block (x over N, y over M, z = 1): one thread per thread tile."""
    return [
        -(-tiles["block_n"] // tiles["thread_n"]),
        -(-tiles["block_m"] // tiles["thread_m"]),
        1,
    ]


def _cleanup(s: ScheduleBuilder, scope: ir.Value, step: str) -> ir.Value:
    """Canonicalize and CSE the functions under `scope`: drops the untiled producers left
    dead by fusion and the self-copies bufferization leaves for in-place forall writes."""
    function = s.match(scope, ["func.func"], f"match_function_{step}")
    s.canonicalize(function, f"canonicalize_{step}")
    with s.at(f"cse_{step}"):
        tr.ApplyCommonSubexpressionEliminationOp(function)
    return function


def _mapping(kind: str) -> ir.ArrayAttr:
    """[#gpu.<kind><y>, #gpu.<kind><x>]: rows (M) on y, columns (N) on x, the contiguous
    dimension of B and C, so that consecutive threads of a warp read nearby addresses."""
    return ir.ArrayAttr.get([ir.Attribute.parse(f"#gpu.{kind}<{d}>") for d in "yx"])


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _largest_divisor(n: int, cap: int) -> int:
    return next(d for d in range(min(n, cap), 0, -1) if n % d == 0)
