"""The `share-workgroup-tiles` step on a hand-written launch: workgroup allocs become launch
attributions, copies into them are split among the block's threads, adjacent barriers
merge."""

from mlir import ir

from mlirtune.ir.inspect import ops_named
from mlirtune.schedules.gpu_contraction.steps.workgroup import share_workgroup_tiles

# What promoting two operands into workgroup memory leaves before outlining.
PROMOTED = """
func.func @f(%a: memref<64x32xf32>, %b: memref<32x64xf32>) {
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %ta = memref.alloc() : memref<16x8xf32, #gpu.address_space<workgroup>>
  %tb = memref.alloc() : memref<8x16xf32, #gpu.address_space<workgroup>>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c16, %sy = %c16, %sz = %c1) {
    %sa = memref.subview %a[0, 0] [16, 8] [1, 1]
        : memref<64x32xf32> to memref<16x8xf32, strided<[32, 1]>>
    %sb = memref.subview %b[0, 0] [8, 16] [1, 1]
        : memref<32x64xf32> to memref<8x16xf32, strided<[64, 1]>>
    gpu.barrier
    memref.copy %sa, %ta : memref<16x8xf32, strided<[32, 1]>>
        to memref<16x8xf32, #gpu.address_space<workgroup>>
    gpu.barrier
    gpu.barrier
    memref.copy %sb, %tb : memref<8x16xf32, strided<[64, 1]>>
        to memref<8x16xf32, #gpu.address_space<workgroup>>
    gpu.barrier
    gpu.terminator
  }
  return
}
"""


def test_workgroup_tiles_become_attributions_and_their_copies_are_split():
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(PROMOTED)
        share_workgroup_tiles(module)
        module.operation.verify()
        (launch,) = ops_named(module.operation, "gpu.launch")
        assert ir.IntegerAttr(launch.attributes["workgroup_attributions"]).value == 2
        body = launch.regions[0].blocks[0]
        types = [str(argument.type) for argument in list(body.arguments)[12:]]
        assert types == [
            "memref<16x8xf32, #gpu.address_space<workgroup>>",
            "memref<8x16xf32, #gpu.address_space<workgroup>>",
        ]
        assert not ops_named(module.operation, "memref.alloc") and not ops_named(
            module.operation, "memref.copy"
        )
        # One loop per tile, from the thread's linear id, stepping by the block's threads,
        # storing into the attribution.
        loops = ops_named(module.operation, "scf.for")
        assert len(loops) == 2
        for loop, tile in zip(loops, list(body.arguments)[12:], strict=True):
            lower, _, step = loop.operands[:3]
            assert lower.owner.name == "arith.addi" and step.owner.name == "arith.muli"
            (store,) = [
                op for op in loop.regions[0].blocks[0].operations if op.name == "memref.store"
            ]
            assert store.operands[1] == tile
        # barrier, copy, barrier, copy, barrier: the back-to-back pair became one.
        names = [op.name for op in body.operations if op.name in ("gpu.barrier", "scf.for")]
        assert names == ["gpu.barrier", "scf.for", "gpu.barrier", "scf.for", "gpu.barrier"]


def test_launches_without_workgroup_tiles_are_left_alone():
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(PROMOTED.replace("#gpu.address_space<workgroup>", "1"))
        before = str(module)
        share_workgroup_tiles(module)
        assert str(module) == before


# A 64 x 32 tile whose rows the schedule vouched are 16-byte aligned, for 16 x 16 threads.
ALIGNED = """
func.func @f(%a: memref<64x64xf32>) {
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %tile = memref.alloc() : memref<64x32xf32, #gpu.address_space<workgroup>>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c16, %sy = %c16, %sz = %c1) {
    %s = memref.subview %a[0, 0] [64, 32] [1, 1]
        : memref<64x64xf32> to memref<64x32xf32, strided<[64, 1]>>
    memref.copy %s, %tile {mlirtune.copy_lanes = 4 : i64} : memref<64x32xf32, strided<[64, 1]>>
        to memref<64x32xf32, #gpu.address_space<workgroup>>
    gpu.terminator
  }
  return
}
"""


def test_aligned_copies_move_whole_vectors_unrolled():
    """2048 elements, 256 threads, 4 lanes: each thread loads two vectors, then stores them."""
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(ALIGNED)
        share_workgroup_tiles(module)
        module.operation.verify()
        assert not ops_named(module.operation, "scf.for") and not ops_named(
            module.operation, "memref.copy"
        )
        loads, stores = (
            ops_named(module.operation, "vector.load"),
            ops_named(module.operation, "vector.store"),
        )
        assert len(loads) == len(stores) == 2
        for op in loads + stores:
            assert ir.IntegerAttr(op.attributes["alignment"]).value == 16
        assert [str(load.results[0].type) for load in loads] == ["vector<4xf32>"] * 2
        body = ops_named(module.operation, "gpu.launch")[0].regions[0].blocks[0]
        names = [op.name for op in body.operations if op.name.startswith("vector.")]
        assert names == ["vector.load", "vector.load", "vector.store", "vector.store"]
