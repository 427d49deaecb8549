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

import math

from mlir import ir
from mlir.dialects import arith, gpu, memref, scf, vector

from mlirtune.interfaces.errors import MlirtuneError
from mlirtune.ir.constants import constant_int
from mlirtune.ir.gpu import WORKGROUP_ATTRIBUTIONS, workgroup_attributions
from mlirtune.ir.inspect import ops_named

STAGE = "share-workgroup-tiles"
# Set by the schedule on copies whose rows it knows start 16-byte aligned: elements per
# 16-byte vector (the copy then moves whole vectors).
LANES_ATTRIBUTE = "mlirtune.copy_lanes"
LDMATRIX_ROW_BYTES = 16  # what one lane's address gives an ldmatrix: a row of 8 halves


def share_workgroup_tiles(module: ir.Module) -> None:
    for launch in ops_named(module.operation, "gpu.launch"):
        _attribute_workgroup_allocs(launch)
        copies = [c for c in ops_named(launch, "memref.copy") if in_workgroup(c.operands[1])]
        _drop_barriers_between_copies(copies)
        for copy in copies:
            _distribute(copy, _static_threads(launch))
        if copies:
            _merge_adjacent_barriers(launch.regions[0].blocks[0])


def _static_threads(launch: ir.Operation) -> int | None:
    """Threads per block where the launch's block sizes are constants."""
    view = launch.opview
    sizes = [constant_int(size) for size in (view.blockSizeX, view.blockSizeY, view.blockSizeZ)]
    return None if None in sizes else math.prod(sizes)


def in_workgroup(value: ir.Value) -> bool:
    memory_space = ir.MemRefType(value.type).memory_space
    workgroup = ir.Attribute.parse("#gpu.address_space<workgroup>")
    return memory_space is not None and memory_space == workgroup


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
            if is_alloc and in_workgroup(operand) and owner not in allocs:
                allocs.append(owner)
        return ir.WalkResult.ADVANCE

    launch.walk(outer_alloc)
    if not allocs:
        return
    count = workgroup_attributions(launch)
    if len(body.arguments) != 12 + count:
        raise MlirtuneError("a launch with private attributions cannot take more", stage=STAGE)
    for alloc in allocs:
        if list(alloc.operands):
            raise MlirtuneError("a workgroup tile of dynamic size cannot be shared", stage=STAGE)
        tile = ir.MemRefType(alloc.results[0].type)
        pad = _ldmatrix_padding(alloc.results[0])
        shape = [*tile.shape[:-1], tile.shape[-1] + pad]
        argument = body.add_argument(
            ir.MemRefType.get(shape, tile.element_type, memory_space=tile.memory_space),
            alloc.location,
        )
        if pad:  # the tile is a view of the first columns of the padded rows
            with ir.InsertionPoint.at_block_begin(body), alloc.location:
                argument = memref.subview(argument, [0] * tile.rank, tile.shape, [1] * tile.rank)
        alloc.results[0].replace_all_uses_with(argument)
        alloc.erase()
    i64 = ir.IntegerType.get_signless(64)
    launch.attributes[WORKGROUP_ATTRIBUTIONS] = ir.IntegerAttr.get(i64, count + len(allocs))


def _ldmatrix_padding(tile: ir.Value) -> int:
    """Elements to pad each row of a tile that `nvgpu.ldmatrix` reads: an ldmatrix reads
    eight 16-byte rows at once, which fall in distinct banks only where the row stride is
    an odd number of 16-byte chunks (e.g. a 256-byte row would put all eight in the same
    banks, an 8-way conflict). 0 for tiles no ldmatrix reads, and for odd strides."""
    if not any(use.owner.name == "nvgpu.ldmatrix" for use in tile.uses):
        return 0
    tile_type = ir.MemRefType(tile.type)
    return ldmatrix_row_padding(tile_type.shape[-1], tile_type.element_type.width // 8)


def ldmatrix_row_padding(row: int, element_bytes: int) -> int:
    """Elements that pad a row of `row` elements read by ldmatrix (see above)."""
    chunks, rest = divmod(row * element_bytes, LDMATRIX_ROW_BYTES)
    return LDMATRIX_ROW_BYTES // element_bytes if not rest and chunks % 2 == 0 else 0


def _distribute(copy: ir.Operation, threads: int | None) -> None:
    """Replace `copy` (into workgroup memory) by the block's threads copying it together:
    in 16-byte vectors, unrolled, where the schedule vouched for their alignment
    (LANES_ATTRIBUTE) and the static tile splits evenly among `threads`; else in a loop
    over the elements strided by the thread count, from the thread's linear id."""
    source, target = copy.operands
    shape = ir.MemRefType(source.type).shape
    lanes_attribute = copy.attributes.get(LANES_ATTRIBUTE)
    lanes = 1 if lanes_attribute is None else ir.IntegerAttr(lanes_attribute).value
    total = math.prod(shape) if ir.MemRefType(source.type).has_static_shape else None
    with ir.InsertionPoint(copy), copy.location:
        x, y, z = (gpu.thread_id(d) for d in (gpu.Dimension.x, gpu.Dimension.y, gpu.Dimension.z))
        bx, by, bz = (gpu.block_dim(d) for d in (gpu.Dimension.x, gpu.Dimension.y, gpu.Dimension.z))
        linear = arith.addi(arith.muli(arith.addi(arith.muli(z, by), y), bx), x)
        if lanes > 1 and threads and total and total % (threads * lanes) == 0:
            _copy_vectors(source, target, shape, linear, lanes, total // (threads * lanes), threads)
        else:
            _copy_elements(source, target, linear, arith.muli(arith.muli(bx, by), bz))
    copy.erase()


def _copy_vectors(
    source: ir.Value,
    target: ir.Value,
    shape: list[int],
    linear: ir.Value,
    lanes: int,
    count: int,
    threads: int,
) -> None:
    """Thread t copies the vectors t, t + threads, ...: all its loads, then its stores."""
    index = ir.IndexType.get()
    vector_type = ir.VectorType.get([lanes], ir.MemRefType(source.type).element_type)
    alignment = lanes * ir.MemRefType(source.type).element_type.width // 8
    first = arith.muli(linear, arith.constant(index, lanes))
    places = []
    for step in range(count):
        element = arith.addi(first, arith.constant(index, step * threads * lanes))
        places.append(_delinearize(element, shape))
    loaded = [vector.load(vector_type, source, p, alignment=alignment) for p in places]
    for value, place in zip(loaded, places, strict=True):
        vector.store(value, target, place, alignment=alignment)


def _copy_elements(source: ir.Value, target: ir.Value, linear: ir.Value, threads: ir.Value):
    index = ir.IndexType.get()
    sizes = [
        memref.dim(source, arith.constant(index, d)) for d in range(ir.MemRefType(source.type).rank)
    ]
    total = sizes[0]
    for size in sizes[1:]:
        total = arith.muli(total, size)
    loop = scf.ForOp(linear, total, threads)
    with ir.InsertionPoint(loop.body):
        place = _delinearize(loop.induction_variable, sizes)
        memref.store(memref.load(source, place), target, place)
        scf.YieldOp([])


def _delinearize(element: ir.Value, sizes: list[int] | list[ir.Value]) -> list[ir.Value]:
    """The row-major indices of element number `element` in a tile of `sizes`."""
    index = ir.IndexType.get()
    rest, indices = element, []
    for size in reversed(sizes[1:]):
        size = arith.constant(index, size) if isinstance(size, int) else size
        indices.append(arith.remui(rest, size))
        rest = arith.divui(rest, size)
    return [rest, *reversed(indices)]


def _drop_barriers_between_copies(copies: list[ir.Operation]) -> None:
    """Erase the barrier promotion leaves between two copies into shared memory (A's tile,
    then B's): nothing reads shared memory between them, so the barriers before the first
    and after the last order them against the reads on either side."""
    blocks: list[ir.Block] = []
    for copy in copies:
        if not any(copy.block == block for block in blocks):
            blocks.append(copy.block)

    def is_copy(op: ir.Operation) -> bool:
        return any(op == copy for copy in copies)

    for block in blocks:
        ops = [op.operation for op in block.operations]
        between = [
            barrier
            for before, barrier, after in zip(ops, ops[1:], ops[2:], strict=False)
            if barrier.name == "gpu.barrier" and is_copy(before) and is_copy(after)
        ]
        for barrier in between:
            barrier.erase()


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
