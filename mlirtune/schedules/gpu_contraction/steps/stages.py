"""Multi-buffered shared-memory K steps: the step `pipeline-shared-copies`.

A K loop the schedule marks `mlirtune.stages = S` (S >= 2) copies each step's tiles of A
and B into shared memory (vector loads and stores, from share-workgroup-tiles), waits at
a barrier, then computes on them: the copies' trip to global memory is not overlapped with
the math. This step gives each tile S buffers and shifts the loop by S - 1 steps, so that
iteration j starts the asynchronous copies (`cp.async`, sm_80 and newer) of step j into
one buffer while the block computes step j - S + 1 from another, S - 1 steps behind:

    for j in 0 .. n + S - 2:              # n + S - 1 iterations for n steps
        barrier
        if j < n: cp.async step j into buffer j % S
        commit the group
        if j >= S - 1: compute step j - S + 1 from buffer (j + 1) % S
        wait until only the S - 2 newest groups are in flight

One barrier per step does both jobs: the step the next iteration computes has arrived
(each thread waited for its own copies, the barrier shows them to the block), and every
warp is done reading the buffer that the next iteration's copies refill (the one computed
here). The barriers that promoting the tiles left around the copies go. The loop's
accumulators pass through the guarded compute unchanged in the first S - 1 iterations.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, gpu, memref, nvgpu, scf

from mlirtune.interfaces.errors import MlirtuneError
from mlirtune.ir.inspect import ops_named
from mlirtune.schedules.gpu_contraction.steps.workgroup import in_workgroup

STAGE = "pipeline-shared-copies"
STAGES_ATTRIBUTE = "mlirtune.stages"  # set by the schedule on the K loop it tiles
TOKEN = "!nvgpu.device.async.token"


def pipeline_shared_copies(module: ir.Module) -> None:
    for launch in ops_named(module.operation, "gpu.launch"):
        for loop in ops_named(launch, "scf.for"):
            if STAGES_ATTRIBUTE in loop.attributes:
                _multi_buffer(launch.regions[0].blocks[0], loop)


def _multi_buffer(launch_body: ir.Block, loop: ir.Operation) -> None:
    stages = ir.IntegerAttr(loop.attributes[STAGES_ATTRIBUTE]).value
    if stages < 2:
        raise MlirtuneError(f"{STAGES_ATTRIBUTE}={stages}: needs 2 or more", stage=STAGE)
    body = loop.regions[0].blocks[0]
    ops = [op.operation for op in body.operations]
    copies = [(op, op.operands[0].owner.operation) for op in ops if _is_shared_copy(op)]
    compute = [op for op in ops if op.name == "scf.for"]
    if not copies or len(compute) != 1:
        raise MlirtuneError(
            "a staged K loop needs vector copies into shared memory and one compute loop",
            stage=STAGE,
        )
    tiles: list[ir.Value] = []
    for store, _ in copies:
        if not any(store.operands[1] == tile for tile in tiles):
            tiles.append(store.operands[1])
    lower, upper, step = (loop.operands[i] for i in range(3))
    iv, index = body.arguments[0], ir.IndexType.get()
    with ir.InsertionPoint(loop), loop.location:
        ahead = arith.muli(step, arith.constant(index, stages - 1))  # what copies lead by
        first = arith.subi(lower, ahead)
    with ir.InsertionPoint.at_block_begin(body), loop.location:
        copied = arith.addi(iv, ahead)  # the step this iteration copies
        elapsed = arith.subi(iv, first)
        count = arith.divui(elapsed, step)
        buffer_count = arith.constant(index, stages)
        buffers = {  # the copies write buffer count % S, ldmatrix reads S - 1 steps behind
            "vector.store": arith.remui(count, buffer_count),
            "nvgpu.ldmatrix": arith.remui(
                arith.addi(count, arith.constant(index, 1)), buffer_count
            ),
        }
        copying = arith.cmpi(arith.CmpIPredicate.slt, copied, upper)
        computing = arith.cmpi(arith.CmpIPredicate.sge, iv, lower)
        for tile in tiles:
            _stage_buffers(launch_body, tile, buffers, stages)
    mine = [value.owner for value in (copied, elapsed, computing)]
    for use in list(iv.uses):  # the copies' addresses: step `copied`
        if not any(use.owner == op for op in mine):
            use.owner.operands[use.operand_number] = copied
    for op in ops:
        if op.name == "gpu.barrier":
            op.erase()
    with ir.InsertionPoint.at_block_begin(body), loop.location:
        gpu.barrier()
    group = _copy_asynchronously(copies, copying)
    _guard(compute[0], computing)
    terminator = body.operations[len(body.operations) - 1]
    with ir.InsertionPoint(terminator), loop.location:  # after the compute, before the yield
        nvgpu.device_async_wait(group, num_groups=stages - 2)
    loop.operands[0] = first
    del loop.attributes[STAGES_ATTRIBUTE]


def _is_shared_copy(op: ir.Operation) -> bool:
    """A vector store into shared memory of what a vector load just read."""
    if op.name != "vector.store" or not in_workgroup(op.operands[1]):
        return False
    source = op.operands[0].owner
    return isinstance(source, ir.OpView | ir.Operation) and source.operation.name == "vector.load"


def _stage_buffers(
    launch_body: ir.Block, tile: ir.Value, buffers: dict[str, ir.Value], stages: int
) -> None:
    """Give `tile` (a workgroup attribution, or a view of its rows' first columns)
    `stages` buffers: the attribution gains a leading dimension, the copies into the tile
    write one buffer and the ldmatrix reads of it read another (`buffers`, by op name)."""
    view = None if isinstance(tile, ir.BlockArgument) else tile.owner.operation
    attribution = tile if view is None else view.operands[0]
    if not isinstance(attribution, ir.BlockArgument) or attribution.owner != launch_body:
        raise MlirtuneError("a staged tile is not a workgroup attribution", stage=STAGE)
    buffer = ir.MemRefType(attribution.type)
    space = buffer.memory_space
    attribution.set_type(
        ir.MemRefType.get([stages, *buffer.shape], buffer.element_type, memory_space=space)
    )
    dynamic = ir.ShapedType.get_dynamic_stride_or_offset()
    layout = ir.StridedLayoutAttr.get(dynamic, [buffer.shape[-1], 1])
    shape = ir.MemRefType(tile.type).shape
    view_type = ir.MemRefType.get(shape, buffer.element_type, layout, memory_space=space)
    views = {
        name: memref.subview(
            attribution, [which, 0, 0], [1, *shape], [1, 1, 1], result_type=view_type
        )
        for name, which in buffers.items()
    }
    for use in list(tile.uses):
        name = use.owner.name
        if name not in views:
            raise MlirtuneError(f"a staged tile is used by {name}", stage=STAGE)
        use.owner.operands[use.operand_number] = views[name]
    if view is not None:
        view.erase()


def _copy_asynchronously(
    copies: list[tuple[ir.Operation, ir.Operation]], copying: ir.Value
) -> ir.Value:
    """Replace each copy's load and store by one cp.async, all of them in an scf.if on
    `copying` placed after the last store; returns the token of their group (an empty
    group where `copying` fails, so that every iteration commits one)."""
    token = ir.Type.parse(TOKEN)
    last = copies[-1][0]
    with ir.InsertionPoint(last), last.location:
        guard = scf.IfOp(copying, [token], has_else=True)
        with ir.InsertionPoint(guard.then_block):
            tokens = []
            for store, load in copies:
                elements = ir.VectorType(store.operands[0].type).shape[0]
                tokens.append(
                    nvgpu.device_async_copy(
                        store.operands[1],
                        list(store.operands[2:]),
                        load.operands[0],
                        list(load.operands[1:]),
                        elements,
                        bypass_l1=True,
                    )
                )
            scf.YieldOp([nvgpu.device_async_create_group(tokens)])
        with ir.InsertionPoint(guard.else_block):
            scf.YieldOp([nvgpu.device_async_create_group([])])
    for store, load in copies:
        store.erase()
        load.erase()
    return guard.results[0]


def _guard(compute: ir.Operation, computing: ir.Value) -> None:
    """Run `compute` (the loop over one step) only where `computing` holds; else pass its
    accumulators through."""
    with ir.InsertionPoint(compute), compute.location:
        guard = scf.IfOp(computing, [r.type for r in compute.results], has_else=True)
    for result, passed in zip(compute.results, guard.results, strict=True):
        result.replace_all_uses_with(passed)
    with ir.InsertionPoint(guard.then_block):
        yield_op = scf.YieldOp(list(compute.results))
    compute.move_before(yield_op)
    with ir.InsertionPoint(guard.else_block), compute.location:
        scf.YieldOp(list(compute.operands[3:]))
