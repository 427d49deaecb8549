"""Reductions over a tensor's innermost dims as a reduction of rows.

A global average pool ([N, C, H, W] summed over H and W into [N, C, 1, 1]) reaches the
dispatches as one linalg.generic with two reduction loops. No row family takes two; the
generic family vectorized it along W (28 columns: 3.5 AVX2 vectors) and ran at 0.27x
eager on an AMD Zen 3. Where the input is read whole in loop order, the reduced dims are
one contiguous row of each output element: the same reduction over [N * C, H * W] into
[N * C], filled with the combiner's identity, is a row reduction the row families tile and
vectorize. Its result is reshaped back to the output's shape.
"""

from __future__ import annotations

import math

from mlir import ir
from mlir.dialects import arith, linalg, tensor

from mlirtune.dispatch.full_reductions import (
    COMBINERS,
    cloned_body,
    collapsed,
    combiner,
    element_of,
    indexes_loops,
)
from mlirtune.ir.inspect import ops_named
from mlirtune.ir.maps import generic, identity_map, projection_map
from mlirtune.ir.roots import indexing_maps, loop_sizes, reduction_loops


def collapse_trailing_reductions(function: ir.Operation) -> int:
    """Rewrite each reduction of `function` over two or more innermost dims as a row
    reduction; returns how many."""
    found = [(op, _trailing_combiner(op)) for op in ops_named(function, "linalg.generic")]
    rows = [(op, name) for op, name in found if name]
    for op, name in rows:
        _as_rows(op, COMBINERS[name][0])
    return len(rows)


def _trailing_combiner(op: ir.Operation) -> str | None:
    """The combiner's name (`combiner`) where `op`'s static loops are parallel ones, then
    two or more reductions; its inputs read whole in loop order, with no loop index in its
    body; and its output is indexed by the parallel loops in order (and unit dims)."""
    sizes = loop_sizes(op)
    if sizes is None or len(op.results) != 1 or indexes_loops(op):
        return None
    reductions = reduction_loops(op)
    parallel = len(sizes) - len(reductions)
    if parallel < 1 or len(reductions) < 2 or reductions != list(range(parallel, len(sizes))):
        return None
    *inputs, output = indexing_maps(op)
    if any(m != identity_map(len(sizes)) for m in inputs):
        return None
    if output != _output_map(op, parallel, len(sizes)):
        return None
    return combiner(op)


def _output_map(op: ir.Operation, parallel: int, rank: int) -> ir.AffineMap:
    """The map over `rank` loops of an output indexed by the first `parallel` loops in
    order, a constant 0 in each of its unit dims past them."""
    shape = ir.RankedTensorType(op.results[0].type).shape
    results = [ir.AffineDimExpr.get(d) for d in range(parallel)]
    results += [ir.AffineConstantExpr.get(0)] * (len(shape) - parallel)
    return ir.AffineMap.get(rank, 0, results)


def _as_rows(op: ir.Operation, identity: float) -> None:
    """`op` over [parallel loops' product, reduced loops' product], its result expanded
    back to `op`'s shape."""
    sizes = loop_sizes(op)
    parallel = len(sizes) - len(reduction_loops(op))
    shape = [math.prod(sizes[:parallel]), math.prod(sizes[parallel:])]
    groups = [list(range(parallel)), list(range(parallel, len(sizes)))]
    result_type = ir.RankedTensorType(op.results[0].type)
    element = element_of(op)
    with ir.InsertionPoint(op), op.location:
        inputs = [collapsed(value, shape, groups) for value in list(op.operands)[:-1]]
        out = linalg.fill(
            arith.constant(element, identity), outs=[tensor.empty(shape[:1], element)]
        )
        maps = [identity_map(2)] * len(inputs) + [projection_map(2, [0])]
        rows = generic(
            inputs, out, maps, ["parallel", "reduction"], lambda *args: cloned_body(op, args)
        )
        expanded = tensor.expand_shape(
            result_type, rows, [list(range(result_type.rank))], [], result_type.shape
        )
    op.results[0].replace_all_uses_with(expanded)
    op.erase()
