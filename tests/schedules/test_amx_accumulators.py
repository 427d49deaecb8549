"""The `hoist-amx-accumulators` step: in a marked K loop, each C tile loaded, multiplied
into and stored back at one invariant place is carried through the loop in a tile
register; the loop's duplicate A and B tile loads become one; a "zero" mark starts the
tiles from zero and drops a zero fill that the tiles cover. Unmarked loops and chains that
do not fit are left alone."""

from __future__ import annotations

import pytest
from mlir import ir

from mlirtune.ir.inspect import ops_named
from mlirtune.schedules.contraction.steps.amx_accumulators import (
    ACCUMULATE_ATTRIBUTE,
    hoist_amx_accumulators,
)

# Two C tiles of a 16 x 32 register tile, as convert-vector-to-amx leaves them: each K step
# loads A once per product, and loads and stores each C tile through its own subview.
KERNEL = """
func.func @kernel(%a: memref<16x64xbf16>, %b: memref<32x32xbf16>, %c: memref<16x32xf32>) {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  scf.for %k = %c0 to %c64 step %c32 {
    %kp = arith.divui %k, %c32 : index
    %a0 = amx.tile_load %a[%c0, %k] : memref<16x64xbf16> into !amx.tile<16x32xbf16>
    %b0 = amx.tile_load %b[%kp, %c0] : memref<32x32xbf16> into !amx.tile<16x32xbf16>
    %v0 = memref.subview %c[0, 0] [16, 16] [1, 1]
      : memref<16x32xf32> to memref<16x16xf32, strided<[32, 1]>>
    %t0 = amx.tile_load %v0[%c0, %c0]
      : memref<16x16xf32, strided<[32, 1]>> into !amx.tile<16x16xf32>
    %p0 = amx.tile_mulf %a0, %b0, %t0
      : !amx.tile<16x32xbf16>, !amx.tile<16x32xbf16>, !amx.tile<16x16xf32>
    %w0 = memref.subview %c[0, 0] [16, 16] [1, 1]
      : memref<16x32xf32> to memref<16x16xf32, strided<[32, 1]>>
    amx.tile_store %w0[%c0, %c0], %p0
      : memref<16x16xf32, strided<[32, 1]>>, !amx.tile<16x16xf32>
    %a1 = amx.tile_load %a[%c0, %k] : memref<16x64xbf16> into !amx.tile<16x32xbf16>
    %b1 = amx.tile_load %b[%kp, %c16] : memref<32x32xbf16> into !amx.tile<16x32xbf16>
    %v1 = memref.subview %c[0, 16] [16, 16] [1, 1]
      : memref<16x32xf32> to memref<16x16xf32, strided<[32, 1], offset: 16>>
    %t1 = amx.tile_load %v1[%c0, %c0]
      : memref<16x16xf32, strided<[32, 1], offset: 16>> into !amx.tile<16x16xf32>
    %p1 = amx.tile_mulf %a1, %b1, %t1
      : !amx.tile<16x32xbf16>, !amx.tile<16x32xbf16>, !amx.tile<16x16xf32>
    amx.tile_store %v1[%c0, %c0], %p1
      : memref<16x16xf32, strided<[32, 1], offset: 16>>, !amx.tile<16x16xf32>
  } {MARK}
  return
}
"""


def rewritten(mark: str) -> ir.Module:
    module = ir.Module.parse(KERNEL.replace("{MARK}", mark))
    hoist_amx_accumulators(module)
    assert module.operation.verify()
    return module


def loop_of(module: ir.Module) -> ir.Operation:
    (loop,) = ops_named(module.operation, "scf.for")
    return loop


def in_loop(module: ir.Module, name: str) -> int:
    return len(ops_named(loop_of(module), name))


@pytest.mark.parametrize(
    ("start", "loads_before"), [("loaded", 2), ("zero", 0)], ids=["loaded", "zero"]
)
def test_a_marked_loop_carries_its_c_tiles_in_registers(start, loads_before):
    with ir.Context(), ir.Location.unknown():
        module = rewritten(f'{{{ACCUMULATE_ATTRIBUTE} = "{start}"}}')
        loop = loop_of(module)
        carried = [str(value.type) for value in loop.results]
        assert carried == ["!amx.tile<16x16xf32>"] * 2
        assert ACCUMULATE_ATTRIBUTE not in loop.attributes
        # In the loop: A once (shared by both products), B twice, no C load or store.
        assert in_loop(module, "amx.tile_load") == 3
        assert in_loop(module, "amx.tile_store") == 0
        everything = ops_named(module.operation, "amx.tile_load")
        assert len(everything) - 3 == loads_before
        assert len(ops_named(module.operation, "amx.tile_zero")) == 2 - loads_before
        # The stores follow the loop and store what it yields.
        stores = ops_named(module.operation, "amx.tile_store")
        assert [store.operands[-1] for store in stores] == list(loop.results)


def test_an_unmarked_loop_is_left_alone():
    with ir.Context(), ir.Location.unknown():
        module = rewritten("")
        assert in_loop(module, "amx.tile_store") == 2
        assert in_loop(module, "amx.tile_load") == 6
        assert len(loop_of(module).results) == 0


def test_a_tile_stored_elsewhere_than_loaded_stays_in_memory():
    with ir.Context(), ir.Location.unknown():
        source = KERNEL.replace("{MARK}", f'{{{ACCUMULATE_ATTRIBUTE} = "loaded"}}')
        # The second product's result goes to the first tile's place.
        source = source.replace(
            "amx.tile_store %v1[%c0, %c0], %p1", "amx.tile_store %w0[%c0, %c0], %p1"
        )
        source = source.replace(
            "%p1\n      : memref<16x16xf32, strided<[32, 1], offset: 16>>",
            "%p1\n      : memref<16x16xf32, strided<[32, 1]>>",
        )
        module = ir.Module.parse(source)
        hoist_amx_accumulators(module)
        assert module.operation.verify()
        # Only the first chain is carried; the second still loads and stores in the loop.
        assert len(loop_of(module).results) == 1
        assert in_loop(module, "amx.tile_store") == 1


# A zero fill of all of C just before the loop, as the AMX path's fused fill leaves it.
FILL = """  %zeros = arith.constant dense<0.0> : vector<16x32xf32>
  vector.transfer_write %zeros, %c[%c0, %c0] {in_bounds = [true, true]}
    : vector<16x32xf32>, memref<16x32xf32>
  scf.for"""


@pytest.mark.parametrize(
    ("start", "second_tile", "kept"),
    [("zero", "%v1", 0), ("loaded", "%v1", 1), ("zero", "%w0", 1)],
    ids=["covered", "tiles-loaded", "half-covered"],
)
def test_a_zero_fill_the_zero_started_tiles_cover_is_dropped(start, second_tile, kept):
    with ir.Context(), ir.Location.unknown():
        source = KERNEL.replace("{MARK}", f'{{{ACCUMULATE_ATTRIBUTE} = "{start}"}}')
        source = source.replace("  scf.for", FILL)
        # half-covered: the second product is stored to the first tile's place, so only
        # the first chain is carried and half of C is not overwritten after the loop.
        source = source.replace(
            "amx.tile_store %v1[%c0, %c0], %p1\n      : memref<16x16xf32, strided<[32, 1], "
            "offset: 16>>",
            f"amx.tile_store {second_tile}[%c0, %c0], %p1\n      : memref<16x16xf32, "
            + ("strided<[32, 1], offset: 16>>" if second_tile == "%v1" else "strided<[32, 1]>>"),
        )
        module = ir.Module.parse(source)
        hoist_amx_accumulators(module)
        assert module.operation.verify()
        assert len(ops_named(module.operation, "vector.transfer_write")) == kept
