"""Keep AMX accumulator tiles in tile registers across a K loop.

`convert-vector-to-amx` lowers each VNNI contraction on its own: it loads the C tile from
memory, multiplies into it and stores it back. Inside a loop over K that is one 1 KiB load
and one 1 KiB store per tile product, and C's tile stays in memory between them (512^3
bf16 ran at 312 GFLOP/s so on a Xeon with AMX, about a third of oneDNN's speed).

A schedule marks such a K loop with ACCUMULATE_ATTRIBUTE: the mark promises that the loop's
C tiles are disjoint from one another and from the tiles it reads. This step, run after
`convert-vector-to-amx`, then moves each (tile load, tile product, tile store) chain's load
before the loop and its store after it, and carries the tile through the loop as an
iter_arg. The lowering keeps loop-carried tiles in tile registers (`convert-to-llvm` with
the amx dialect's types, lower_cpu.yaml), so the loop body is tile loads of A and B and
tile products only. Where the tiles start from zero, a zero fill of exactly those tiles
just before the loop (the schedule fuses the fill into its register tiles) is dead, and
is dropped.

Registered as the descriptor step `hoist-amx-accumulators` (mlirtune.pipeline.steps).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import scf

from mlirtune.ir.constants import all_zero, is_zero_splat
from mlirtune.ir.inspect import op_attributes
from mlirtune.ir.prefetch import loop_body, marked_loop_values

ACCUMULATE_ATTRIBUTE = "mlirtune.amx_accumulate"
# The mark's value: where the C tiles start. "loaded": from memory, before the loop.
# "zero": from zero, in registers, with no load (the schedule's promise that C is filled
# with zeros there and the loop spans all of K).
LOADED_START, ZERO_START = "loaded", "zero"
# Side-effect-free ops that address a tile (its view of a buffer, or an index into it):
# moved out of a marked loop when their operands are, so that the tiles' addresses are.
ADDRESSING = {
    "arith.constant",
    "affine.apply",
    "memref.subview",
    "memref.collapse_shape",
    "memref.expand_shape",
}

# Tile products: of bf16 (or f16) into f32, of int8 into int32.
TILE_PRODUCTS = {"amx.tile_mulf", "amx.tile_muli"}
# What a marked loop's body may hold (with arith ops), once its accumulators are carried,
# for its tile loads to be shared: nothing in it writes memory.
READ_ONLY_BODY = ADDRESSING | TILE_PRODUCTS | {"amx.tile_load", "scf.yield"}


@dataclass(frozen=True)
class Accumulator:
    """One loop-invariant C tile of a marked loop: loaded, multiplied into, stored back."""

    load: ir.Operation
    product: ir.Operation
    store: ir.Operation


def hoist_amx_accumulators(module: ir.Module) -> None:
    """Carry the accumulator tiles of every marked scf.for of `module` in registers."""
    for loop, start in marked_loop_values(module, ACCUMULATE_ATTRIBUTE):
        _hoist_addressing(loop)
        accumulators = loop_accumulators(loop)
        if accumulators:
            loop = _carry(loop, accumulators)
            _share_tile_loads(loop)
            if isinstance(start, ir.StringAttr) and start.value == ZERO_START:
                _start_from_zero(accumulators)
                _drop_dead_fill(loop, accumulators)


def _defined_outside(value: ir.Value, loop: ir.Operation) -> bool:
    """Whether `value` is defined outside `loop` (not by an op or block argument in it)."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return owner != loop_body(loop)
    return owner.operation.parent != loop


def _hoist_addressing(loop: ir.Operation) -> None:
    """Move the loop's invariant addressing ops before it, in order."""
    for op in list(loop_body(loop).operations):
        if op.name in ADDRESSING and all(_defined_outside(v, loop) for v in op.operands):
            op.move_before(loop)


def loop_accumulators(loop: ir.Operation) -> list[Accumulator]:
    """The chains in `loop`'s body whose tile is loaded from, and stored to, the same
    loop-invariant place, and used by nothing but its product."""
    found = []
    for store in loop_body(loop).operations:
        if store.name != "amx.tile_store":
            continue
        *place, tile = store.operands
        product = tile.owner
        if not isinstance(product, ir.OpView) or product.operation.name not in TILE_PRODUCTS:
            continue
        load = product.operation.operands[2].owner
        if (
            isinstance(load, ir.OpView)
            and load.operation.name == "amx.tile_load"
            and load.operation.parent == loop
            and _same_places(list(load.operation.operands), place)
            and all(_defined_outside(v, loop) for v in place)
            and _single_use(load.operation.result)
            and _single_use(product.operation.result)
        ):
            found.append(Accumulator(load.operation, product.operation, store.operation))
    return found


def _same_places(first: list[ir.Value], second: list[ir.Value]) -> bool:
    """Whether two operand lists address the same place: the same values, or views made
    by equal addressing ops of the same values (the vector lowering makes a subview per
    access, the load's and the store's apart)."""
    return len(first) == len(second) and all(map(_same_value, first, second))


def _same_value(first: ir.Value, second: ir.Value) -> bool:
    if first == second:
        return True
    a, b = first.owner, second.owner
    if not (isinstance(a, ir.OpView) and isinstance(b, ir.OpView)):
        return False
    a, b = a.operation, b.operation
    return (
        a.name == b.name
        and a.name in ADDRESSING
        and len(a.results) == 1
        and op_attributes(a) == op_attributes(b)
        and _same_places(list(a.operands), list(b.operands))
    )


def _single_use(value: ir.Value) -> bool:
    return len(list(value.uses)) == 1


def _share_tile_loads(loop: ir.Operation) -> None:
    """Load each A and B tile once per iteration of a loop that writes no memory: the
    vector lowering loads a tile for every product that reads it, and LLVM keeps the copies
    (two register tiles of 32 x 32 ran 8 tile loads per 4 products)."""
    body = loop_body(loop)
    if any(
        op.name not in READ_ONLY_BODY and not op.name.startswith("arith.") for op in body.operations
    ):
        return
    loads: list[ir.Operation] = []
    for op in list(body.operations):
        if op.name != "amx.tile_load":
            continue
        twin = next((kept for kept in loads if _same_load(kept, op)), None)
        if twin is None:
            loads.append(op)
        else:
            op.result.replace_all_uses_with(twin.result)
            op.erase()


def _same_load(first: ir.Operation, second: ir.Operation) -> bool:
    return first.result.type == second.result.type and _same_places(
        list(first.operands), list(second.operands)
    )


def _start_from_zero(accumulators: list[Accumulator]) -> None:
    """Replace the hoisted loads of the C tiles by zero tiles."""
    for chain in accumulators:
        with chain.load.location, ir.InsertionPoint(chain.load):
            zero = ir.Operation.create("amx.tile_zero", results=[chain.load.result.type])
        chain.load.result.replace_all_uses_with(zero.result)
        chain.load.erase()


def _drop_dead_fill(loop: ir.Operation, accumulators: list[Accumulator]) -> None:
    """Erase the zero fill of a whole buffer written just before a loop whose C tiles start
    from zero (only addressing and zero tiles between them), where those tiles are views
    of that buffer that cover it: the tile stores after the loop overwrite all of it. The
    mark promises the tiles disjoint, so covering is a matter of their sizes."""
    ops = list(loop.block.operations)
    before = ops[: ops.index(loop)]
    fill = next(
        (op for op in reversed(before) if op.name not in ADDRESSING | {"amx.tile_zero"}), None
    )
    if fill is None or fill.name != "vector.transfer_write" or not is_zero_splat(fill.operands[0]):
        return
    value, buffer, *indices = fill.operands
    shape = ir.MemRefType(buffer.type).shape
    if ir.VectorType(value.type).shape != shape or not all_zero(indices):
        return
    places = [chain.store.operands[:-1] for chain in accumulators]  # a view, its indices
    covered = sum(math.prod(ir.MemRefType(view.type).shape) for view, *_ in places)
    if covered == math.prod(shape) and all(
        _view_of(view, buffer) and all_zero(at) for view, *at in places
    ):
        fill.erase()


def _view_of(view: ir.Value, buffer: ir.Value) -> bool:
    """Whether `view` is `buffer`, or a view of it made by addressing ops."""
    while view != buffer:
        owner = view.owner
        if not isinstance(owner, ir.OpView) or owner.operation.name not in ADDRESSING:
            return False
        view = owner.operation.operands[0]
    return True


def _carry(loop: ir.Operation, accumulators: list[Accumulator]) -> ir.Operation:
    """Rebuild `loop` with one more iter_arg per accumulator: each tile loaded before it,
    multiplied into in the body, stored after it."""
    old_body = loop_body(loop)
    for chain in accumulators:
        chain.load.move_before(loop)
    lower, upper, step, *inits = loop.operands
    tiles = [chain.load.result for chain in accumulators]
    with loop.location, ir.InsertionPoint(loop):
        new_loop = scf.ForOp(lower, upper, step, [*inits, *tiles])
    for name, attribute in op_attributes(loop).items():  # e.g. unrolling hints
        new_loop.operation.attributes[name] = attribute
    new_body = new_loop.body
    carried = list(new_body.arguments)[1 + len(inits) :]
    for old_arg, new_arg in zip(old_body.arguments, new_body.arguments, strict=False):
        old_arg.replace_all_uses_with(new_arg)
    for chain, tile in zip(accumulators, carried, strict=True):
        chain.product.operands[2] = tile
    old_yield = None
    for op in list(old_body.operations):
        if op.name == "scf.yield":
            old_yield = op
            continue
        new_body.append(op)
    yielded = list(old_yield.operands) if old_yield is not None else []
    with loop.location, ir.InsertionPoint(new_body):
        scf.YieldOp([*yielded, *(chain.product.result for chain in accumulators)])
    for old_result, new_result in zip(loop.results, new_loop.results, strict=False):
        old_result.replace_all_uses_with(new_result)
    finals = list(new_loop.results)[len(inits) :]
    previous = new_loop.operation
    for chain, final in zip(accumulators, finals, strict=True):
        chain.store.move_after(previous)
        chain.store.operands[len(chain.store.operands) - 1] = final
        previous = chain.store
    loop.erase()
    return new_loop.operation
