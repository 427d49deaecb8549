"""Argmax and argmin as two plain row reductions.

torch-mlir lowers `argmax` (and `max(dim)`, `argmin`, `min(dim)`) to one linalg.generic with
two results: the running extreme and, through a `select` on a comparison with it, the index
where it was met. No vectorizer and no reduction tiling can name that index combiner, so the
op stayed scalar loops (argmax at half of eager's speed). Split into the extreme (a
`maximumf` or `minimumf` reduction) and the first index holding it (a `minsi` reduction of
`select(x == extreme, k, size)`), both are row reductions that the row families tile and
vectorize; a row tile reads its input twice, the second time from cache.

Ties go to the first extreme, as in torch; a NaN counts as the extreme, so its first index
is returned, as torch's argmax does.
"""

from __future__ import annotations

import math

import numpy as np
from mlir import ir
from mlir.dialects import arith, linalg, tensor

from mlirtune.ir.inspect import defining_op, filled_with, linalg_index_loop, ops_named
from mlirtune.ir.maps import generic, projection_map
from mlirtune.ir.roots import indexing_maps, loop_sizes, reduction_loops

# Per combiner of the running extreme: the comparison that moves the index to a new one, the
# extreme's start and the builder of its reduction's combiner.
EXTREMES = {
    "arith.maximumf": (arith.CmpFPredicate.OGT, -math.inf, arith.maximumf),
    "arith.minimumf": (arith.CmpFPredicate.OLT, math.inf, arith.minimumf),
}


def split_arg_reductions(function: ir.Operation) -> int:
    """Rewrite each argmax/argmin generic in `function` as two reductions; returns how many."""
    found = [(op, _arg_reduction(op)) for op in ops_named(function, "linalg.generic")]
    split = [(op, combiner) for op, combiner in found if combiner]
    for op, combiner in split:
        _split(op, combiner)
    return len(split)


def _arg_reduction(op: ir.Operation) -> str | None:
    """The extreme's combiner (`arith.maximumf` or `arith.minimumf`) when `op` is an
    arg reduction over one static loop, from an extreme's fill and an integer index filled
    with 0."""
    if len(op.operands) != 3 or len(op.results) != 2 or len(reduction_loops(op)) != 1:
        return None
    if not isinstance(ir.RankedTensorType(op.results[1].type).element_type, ir.IntegerType):
        return None
    sizes = loop_sizes(op)
    if sizes is None or sizes[reduction_loops(op)[0]] < 1:
        return None
    block = op.regions[0].blocks[0]
    x, value, index = block.arguments
    yielded = list(block.operations)[-1].operands
    extreme, chosen = defining_op(yielded[0]), defining_op(yielded[1])
    if extreme is None or extreme.name not in EXTREMES or chosen is None:
        return None
    if set(extreme.operands) != {x, value} or chosen.name != "arith.select":
        return None
    compare, new_index = defining_op(chosen.operands[0]), chosen.operands[1]
    if chosen.operands[2] != index or compare is None or compare.name != "arith.cmpf":
        return None
    better, start, _ = EXTREMES[extreme.name]
    predicate = ir.IntegerAttr(compare.attributes["predicate"]).value
    if predicate != int(better) or list(compare.operands) != [x, value]:
        return None
    if not _is_reduced_index(new_index, reduction_loops(op)[0]):
        return None
    if filled_with(op.operands[1]) != start or filled_with(op.operands[2]) != 0:
        return None
    return extreme.name


def _is_reduced_index(value: ir.Value, loop: int) -> bool:
    """Whether `value` is `linalg.index loop`, or an `arith.index_cast` of it."""
    cast = defining_op(value)
    if cast is not None and cast.name == "arith.index_cast":
        value = cast.operands[0]
    return linalg_index_loop(value) == loop


def _split(op: ir.Operation, combiner: str) -> None:
    """The extreme, and the first index holding it where the index is used (a softmax's
    max arrives as a max with indices nobody reads)."""
    x, value_init, index_init = op.operands
    loop = reduction_loops(op)[0]
    size = loop_sizes(op)[loop]
    x_map, out_map, _ = indexing_maps(op)
    iterators = ["reduction" if d == loop else "parallel" for d in range(x_map.n_dims)]
    with ir.InsertionPoint(op), op.location:
        combine = EXTREMES[combiner][2]
        extreme = generic([x], value_init, [x_map, out_map], iterators, combine)
        op.results[0].replace_all_uses_with(extreme)
        if list(op.results[1].uses):
            maps = [x_map, out_map, projection_map(x_map.n_dims, [loop]), out_map]
            first = _first_index_of(x, extreme, index_init, size, maps, iterators)
            op.results[1].replace_all_uses_with(first)
    op.erase()


def _first_index_of(
    x: ir.Value,
    extreme: ir.Value,
    index_init: ir.Value,
    size: int,
    maps: list[ir.AffineMap],
    iterators: list[str],
) -> ir.Value:
    """The reduction of `select(x == extreme, k, size)` by `minsi` over the reduced loop (of
    `size` steps); `maps` index x, the extreme, k and the result."""
    index_type = ir.RankedTensorType(index_init.type)
    element = index_type.element_type
    beyond = arith.constant(element, size)
    positions = arith.constant(  # k, read as an input: reduction tiling loses the
        ir.RankedTensorType.get([size], element),  # offset of a linalg.index
        ir.DenseElementsAttr.get(np.arange(size, dtype=np.int64), signless=True, type=element),
    )
    return generic(
        [x, extreme, positions],
        linalg.fill(beyond, outs=[tensor.empty(index_type.shape, element)]),
        maps,
        iterators,
        lambda a, m, k, acc: _first_index(a, m, k, acc, beyond),
    )


def _first_index(
    a: ir.Value, extreme: ir.Value, k: ir.Value, acc: ir.Value, beyond: ir.Value
) -> ir.Value:
    """min(acc, k if a is the extreme (or NaN) else `beyond`): the first k holding it."""
    equal, nan = arith.CmpFPredicate.OEQ, arith.CmpFPredicate.UNO
    hit = arith.ori(arith.cmpf(equal, a, extreme), arith.cmpf(nan, a, a))
    return arith.minsi(acc, arith.select(hit, k, beyond))
