"""Workgroup (shared) memory inside `gpu.launch` bodies: the step `share-workgroup-tiles`.

The gpu_contraction schedule stages each K step's tiles of A and B in shared memory with
`transform.structured.promote` (mapping `#gpu.memory_space<workgroup>`). Before kernels
are outlined, that leaves a function-level `memref.alloc` per tile and, between barriers, a
`memref.copy` that every thread of the block would run whole. This step

- makes each such alloc a workgroup attribution of the launch that uses it (outlining then
  turns it into the kernel's shared memory), and
- splits each copy into workgroup memory among the block's threads: thread t copies the
  elements t, t + threads, t + 2 threads, ... of the tile in row-major order, so a warp
  reads consecutive addresses of a row.

Adjacent barriers left by promoting two operands are merged.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, gpu, memref, scf

from mlirtune.interfaces.errors import MlirtuneError

STAGE = "share-workgroup-tiles"


def share_workgroup_tiles(module: ir.Module) -> None:
    for launch in _ops_named(module.operation, "gpu.launch"):
        _attribute_workgroup_allocs(launch)
        copies = [c for c in _ops_named(launch, "memref.copy") if _in_workgroup(c.operands[1])]
        for copy in copies:
            _distribute(copy)
        if copies:
            _merge_adjacent_barriers(launch.regions[0].blocks[0])


def _ops_named(scope: ir.Operation, name: str) -> list[ir.Operation]:
    """The ops called `name` nested in `scope`, collected before any is rewritten."""
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == name and op != scope:
            found.append(op)
        return ir.WalkResult.ADVANCE

    scope.walk(visit)
    return found


def _in_workgroup(value: ir.Value) -> bool:
    memory_space = ir.MemRefType(value.type).memory_space
    return memory_space is not None and str(memory_space) == "#gpu.address_space<workgroup>"


def _attribute_workgroup_allocs(launch: ir.Operation) -> None:
    """Each workgroup-space alloc defined outside `launch` and used in it becomes one of
    its workgroup attributions (a block argument after the 12 ids)."""
    body = launch.regions[0].blocks[0]
    allocs: list[ir.Operation] = []

    def outer_alloc(op: ir.Operation) -> ir.WalkResult:
        for operand in op.operands:
            owner = operand.owner
            owner = owner.operation if isinstance(owner, ir.OpView) else owner
            is_alloc = isinstance(owner, ir.Operation) and owner.name == "memref.alloc"
            if is_alloc and _in_workgroup(operand) and owner not in allocs:
                allocs.append(owner)
        return ir.WalkResult.ADVANCE

    launch.walk(outer_alloc)
    if not allocs:
        return
    attributions = launch.attributes.get("workgroup_attributions")  # absent: none yet
    count = 0 if attributions is None else ir.IntegerAttr(attributions).value
    if len(body.arguments) != 12 + count:
        raise MlirtuneError("a launch with private attributions cannot take more", stage=STAGE)
    for alloc in allocs:
        if list(alloc.operands):
            raise MlirtuneError("a workgroup tile of dynamic size cannot be shared", stage=STAGE)
        argument = body.add_argument(alloc.results[0].type, alloc.location)
        alloc.results[0].replace_all_uses_with(argument)
        alloc.erase()
    i64 = ir.IntegerType.get_signless(64)
    launch.attributes["workgroup_attributions"] = ir.IntegerAttr.get(i64, count + len(allocs))


def _distribute(copy: ir.Operation) -> None:
    """Replace `copy` (into workgroup memory) by a loop over the tile's elements strided
    by the block's thread count, starting at the thread's linear id."""
    source, target = copy.operands
    rank = ir.MemRefType(source.type).rank
    index = ir.IndexType.get()
    with ir.InsertionPoint(copy), copy.location:
        x, y, z = (gpu.thread_id(d) for d in (gpu.Dimension.x, gpu.Dimension.y, gpu.Dimension.z))
        bx, by, bz = (gpu.block_dim(d) for d in (gpu.Dimension.x, gpu.Dimension.y, gpu.Dimension.z))
        linear = arith.addi(arith.muli(arith.addi(arith.muli(z, by), y), bx), x)
        threads = arith.muli(arith.muli(bx, by), bz)
        sizes = [memref.dim(source, arith.constant(index, d)) for d in range(rank)]
        total = sizes[0]
        for size in sizes[1:]:
            total = arith.muli(total, size)
        loop = scf.ForOp(linear, total, threads)
        with ir.InsertionPoint(loop.body):
            rest, indices = loop.induction_variable, []
            for size in reversed(sizes[1:]):
                indices.append(arith.remui(rest, size))
                rest = arith.divui(rest, size)
            indices = [rest, *reversed(indices)]
            memref.store(memref.load(source, indices), target, indices)
            scf.YieldOp([])
    copy.erase()


def _merge_adjacent_barriers(block: ir.Block) -> None:
    previous_was_barrier = False
    for op in list(block.operations):
        op = op.operation
        is_barrier = op.name == "gpu.barrier"
        if is_barrier and previous_was_barrier:
            op.erase()
            continue
        previous_was_barrier = is_barrier
        for region in op.regions:
            for inner in region.blocks:
                _merge_adjacent_barriers(inner)
