"""The gpu_contraction transform module: block tiles, shared K steps, thread tiles and the
accumulators kept in registers."""

from __future__ import annotations

from mlir import ir
from mlir.dialects import transform as tr
from mlir.dialects.bufferization import LayoutMapOption
from mlir.dialects.transform import bufferization as tbufferization
from mlir.dialects.transform import gpu as tgpu
from mlir.dialects.transform import structured
from mlir.dialects.transform import vector as tvector

from mlirtune.schedules.builder import ScheduleBuilder
from mlirtune.schedules.gpu_contraction.accumulators import hoist_accumulators
from mlirtune.schedules.gpu_contraction.mma import accumulate_in_fragments, tile_warps
from mlirtune.schedules.gpu_contraction.steps.stages import STAGES_ATTRIBUTE
from mlirtune.schedules.gpu_contraction.steps.workgroup import LANES_ATTRIBUTE
from mlirtune.schedules.gpu_contraction.tiles import GpuTiles, block_dims
from mlirtune.targets.nvidia_gpu import NvidiaGPU


def gpu_schedule(tiles: GpuTiles, whole_tiles: bool, copy_lanes: int) -> ir.Module:
    """Tile the last op (the matmul, or its epilogue) into blocks, fusing its producers;
    step the block's matmul through K and stage its tiles in shared memory (block_k > 0);
    bufferize, make the block forall a gpu.launch, and split the fill, matmul and epilogue
    among the block's threads alike.

    The payload's shape decides the producers: the fill alone, or the matmul and then the
    fill when an epilogue comes last. The matmul handle is yielded once per epilogue op, so
    it is empty (and its fusion a no-op) when the matmul itself is the last op. Producers
    are fused consumer-first so each fusion finds its user already in the loop.
    """
    with ScheduleBuilder("gpu_contraction") as s:
        _blocks(s, tiles)
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
        matmul = _shared_tiles(s, launch, tiles, copy_lanes)
        launch = _threads(s, launch, matmul, tiles)
        if tiles.mma:
            accumulate_in_fragments(s, bufferized)
            return s.module
        # A one-row thread tile keeps the scalar path: lowering its vectors with a unit
        # dimension does not settle (the pattern driver ran out of memory).
        if tiles.block_k and whole_tiles and tiles.thread_m > 1:
            _accumulate_in_registers(s, bufferized, launch)
    return s.module


def _blocks(s: ScheduleBuilder, tiles: GpuTiles) -> None:
    """The last op tiled into an scf.forall of blocks, its producers fused consumer-first;
    with block_k, the block's matmul stepped through K (its loop marked for multi-stage
    copies where stages > 1)."""
    anchor = s.last_op("match_anchor")
    matmul = s.match_root(s.root, "matmul", "match_matmul")
    with s.at("single_matmul"):  # fails on a payload with several matmuls
        matmul = tr.SplitHandleOp([tr.AnyOpType.get()], matmul).results[0]
    epilogue = s.match(s.root, ["linalg.generic"], "match_epilogue")
    with s.at("match_epilogue"):
        fused_matmul = tr.ForeachOp([tr.AnyOpType.get()], [epilogue])
        with ir.InsertionPoint(fused_matmul.body):
            tr.YieldOp([matmul])
    producers = [fused_matmul.results[0], s.match(s.root, ["linalg.fill"], "match_fill")]
    with s.at("tile_blocks"):
        blocks = structured.TileUsingForallOp(
            anchor,
            mapping=_mapping("block"),
            tile_sizes=[tiles.block_m, tiles.block_n],
        ).forall_op
    for producer in producers:
        s.fuse_into(producer, blocks, "fuse_blocks")
    if tiles.block_k:
        block_matmul = s.match_root(blocks, "matmul", "match_block_matmul")
        _, (k_loop,) = s.tile(block_matmul, [0, 0, tiles.block_k], "tile_k")
        if tiles.stages > 1:  # the step pipeline-shared-copies builds the buffers
            with s.at("annotate_stages"):
                stages = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), tiles.stages)
                param = tr.ParamConstantOp(tr.AnyParamType.get(), stages).param
                tr.AnnotateOp(k_loop, STAGES_ATTRIBUTE, param=param)


def _shared_tiles(
    s: ScheduleBuilder, launch: ir.Value, tiles: GpuTiles, copy_lanes: int
) -> ir.Value:
    """With block_k, the launch's matmul with its A and B tiles promoted to shared memory
    (the step share-workgroup-tiles completes it), their copies marked for vector copies
    where their rows are 16-byte aligned (`copy_lanes` > 1). Returns the matmul's handle."""
    matmul = s.match_root(launch, "matmul", "match_launch_matmul")
    if not tiles.block_k:
        return matmul
    with s.at("promote_to_shared"):
        matmul = structured.PromoteOp(
            tr.AnyOpType.get(),
            matmul,
            operands_to_promote=[0, 1],
            mapping=ir.ArrayAttr.get([ir.Attribute.parse("#gpu.memory_space<workgroup>")]),
        ).transformed
    if copy_lanes > 1:
        copies = s.match(launch, ["memref.copy"], "match_shared_copies")
        with s.at("vector_copies"):
            lanes = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), copy_lanes)
            param = tr.ParamConstantOp(tr.AnyParamType.get(), lanes).param
            tr.AnnotateOp(copies, LANES_ATTRIBUTE, param=param)
    return matmul


def _threads(s: ScheduleBuilder, launch: ir.Value, matmul: ir.Value, tiles: GpuTiles) -> ir.Value:
    """The fill, the matmul and the epilogue split among the block's threads alike, so each
    thread owns the same outputs in each (with tensor cores, the warps own the matmul's, so
    barriers order the three); then the foralls mapped to threads. Returns the launch."""
    tile_x, tile_y, _ = block_dims(tiles)
    thread_ops = [
        ("fill", s.match(launch, ["linalg.fill"], "match_launch_fill")),
        ("matmul", matmul),
        ("epilogue", s.match(launch, ["linalg.generic"], "match_launch_epilogue")),
    ]
    if tiles.mma:
        tile_warps(s, thread_ops, tiles)
    else:
        for name, op in thread_ops:
            with s.at(f"tile_threads_{name}"):
                structured.TileUsingForallOp(
                    op, num_threads=[tile_y, tile_x], mapping=_mapping("thread")
                )
    with s.at("map_threads"):
        return tgpu.MapNestedForallToThreads(
            launch,
            block_dims=block_dims(tiles),
            warp_size=NvidiaGPU.warp_size,
            sync_after_distribute=bool(tiles.mma),
        ).result


def _accumulate_in_registers(s: ScheduleBuilder, module: ir.Value, launch: ir.Value) -> None:
    """Vectorize each thread's fill, K step and epilogue (whole tiles: static shapes),
    then hoist the accumulator's read and write out of the K loop, so it stays in
    registers across K steps instead of going through C, and lower the vectors to 1-D
    loads, stores and FMAs."""
    for name, ops in (("fill", ["linalg.fill"]), ("epilogue", ["linalg.generic"])):
        with s.at(f"vectorize_{name}"):
            structured.VectorizeOp(s.match(launch, ops, f"match_{name}"))
    with s.at("vectorize_matmul"):
        structured.VectorizeOp(s.match_root(launch, "matmul", "match_thread_matmul"))
    function = hoist_accumulators(s, module)
    s.apply_patterns(
        function,
        "unroll_transfers",
        lambda: tvector.apply_patterns_vector_transfer_to_scf(
            max_transfer_rank=1, full_unroll=True
        ),
    )
    s.lower_vectors(function)


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
