"""Contractions over several row dims made 2-D matmuls, with their element-wise epilogues.

A Linear on [batch, tokens, features] arrives as a matmul between reshapes; element-wise
fusion moves the reshapes into it, leaving a contraction with two M loops, which no family
recognises, and an epilogue on the 3-D result, which the contraction family's epilogue tiles
do not take. Here the contraction is rebuilt as a `linalg.matmul` on [M, K] and [M, N]
views, and each element-wise op that reads its expanded result is rebuilt on the collapsed
views too, one after the other, so that the epilogue chain stays 2-D.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import bufferization, linalg, memref, tensor

from mlirtune.ir.attrs import to_attribute
from mlirtune.ir.inspect import defining_op, ops_named
from mlirtune.ir.maps import map_loops, projection_map
from mlirtune.ir.roots import product

RESHAPES = ("tensor.expand_shape", "tensor.collapse_shape")


def collapse_row_dims(function: ir.Operation) -> int:
    """Rebuild each f32 contraction `C[m..., n] += A[m..., k] * B` (B as [N, K] or [K, N])
    with several m dims as a `linalg.matmul` on A and C collapsed to [M, K] and [M, N],
    then its element-wise epilogue (_collapse_epilogues); returns how many contractions were
    rebuilt."""
    found = [
        (op, layout)
        for op in ops_named(function, "linalg.generic")
        if (layout := _row_dims_layout(op)) is not None
    ]
    for op, b_transposed in found:
        a, b, init = op.operands
        rows = len(ir.ShapedType(init.type).shape) - 1
        merge = to_attribute([list(range(rows)), [rows]])
        with ir.InsertionPoint(op), op.location:
            a2 = tensor.CollapseShapeOp(_collapsed(a.type, rows), a, merge).result
            c2 = tensor.CollapseShapeOp(_collapsed(init.type, rows), init, merge).result
            product = linalg.matmul(
                a2,
                b,
                outs=[c2],
                indexing_maps=[
                    projection_map(3, [0, 2]),
                    projection_map(3, [1, 2] if b_transposed else [2, 1]),
                    projection_map(3, [0, 1]),
                ],
            )
            shape = ir.ShapedType(init.type).shape
            result = tensor.ExpandShapeOp(init.type, product, merge, [], shape).result
        op.results[0].replace_all_uses_with(result)
        op.erase()
    if found:
        _collapse_epilogues(function)
    return len(found)


def _row_dims_layout(op: ir.Operation) -> bool | None:
    """For a multiply-add generic `C[m..., n] += A[m..., k] * B` with at least two m dims,
    in loop order in both A and C: whether B is stored [N, K]; None for any other op."""
    if len(op.operands) != 3 or len(op.results) != 1:
        return None
    body = [o.name for o in op.regions[0].blocks[0].operations]
    if body != ["arith.mulf", "arith.addf", "linalg.yield"]:
        return None
    if not all(isinstance(ir.ShapedType(v.type).element_type, ir.F32Type) for v in op.operands):
        return None
    dims = linalg.infer_contraction_dimensions(op)
    if dims is None or dims.batch or len(dims.m) < 2 or len(dims.n) != 1 or len(dims.k) != 1:
        return None
    m, (n,), (k,) = list(dims.m), dims.n, dims.k
    maps = [ir.AffineMapAttr(a).value for a in linalg.get_indexing_maps(op)]
    a_map, b_map, c_map = (map_loops(x) for x in maps)
    if a_map != [*m, k] or c_map != [*m, n] or m != sorted(m) or b_map not in ([n, k], [k, n]):
        return None
    return b_map == [n, k]


def _collapsed(shaped: ir.Type, rows: int) -> ir.RankedTensorType:
    shape = ir.ShapedType(shaped).shape
    flat = product(shape[:rows])
    return ir.RankedTensorType.get([flat, *shape[rows:]], ir.ShapedType(shaped).element_type)


def _collapse_epilogues(function: ir.Operation) -> int:
    """Rebuild each all-parallel generic that reads a row-merging `tensor.expand_shape` (as
    made above) on the collapsed views, its result expanded back; repeated along the chain.
    Returns how many were rebuilt."""
    rebuilt = 0
    while (found := _next_epilogue(function)) is not None:
        _collapse_generic(*found)
        rebuilt += 1
    store_through_views(function)
    return rebuilt


def store_through_views(function: ir.Operation) -> int:
    """A reshaped result written to an output buffer is written as it was computed, to a
    reshaped view of that buffer: schedules tile the op whose result the payload stores,
    and a reshape has no tiles (a softmax on [batch, heads] rows kept 4-D between two
    batch matmuls on [batch * heads] failed so). Reshapes of reshapes are undone one at a
    time. Returns how many reshapes the stores moved past."""
    moved = 0
    while step := _store_past_reshapes(function):
        moved += step
    return moved


def store_into_whole_buffers(function: ir.Operation) -> int:
    """The inverse of `store_through_views`, for a dispatch read back as a payload of its
    own (tuned or timed alone): a result written to a reshaped view of an output buffer is
    reshaped as a tensor and written to the buffer itself, so that the split sees the
    reshape among the ops it groups, not a view it has no dispatch for. Returns how many
    stores moved."""
    moved = 0
    while True:
        stores = [
            store
            for store in ops_named(function, "bufferization.materialize_in_destination")
            if (view := defining_op(store.operands[1])) is not None
            and view.name in ("memref.expand_shape", "memref.collapse_shape")
        ]
        if not stores:
            return moved
        for store in stores:
            view = store.operands[1].owner
            buffer, groups = view.operands[0], view.attributes["reassociation"]
            shaped = ir.ShapedType(buffer.type)
            whole = ir.RankedTensorType.get(shaped.shape, shaped.element_type)
            with ir.InsertionPoint(store), store.location:
                if view.name == "memref.expand_shape":
                    reshaped = tensor.CollapseShapeOp(whole, store.operands[0], groups).result
                else:
                    reshaped = tensor.ExpandShapeOp(
                        whole, store.operands[0], groups, [], shaped.shape
                    ).result
                bufferization.materialize_in_destination(
                    None, reshaped, buffer, restrict=True, writable=True
                )
            store.erase()
            if not list(view.results[0].uses):
                view.erase()
        moved += len(stores)


def _store_past_reshapes(function: ir.Operation) -> int:
    """One step of `store_through_views`: each store of a reshape's result moved to the
    reshape's source, written to a view of the destination; returns how many moved."""
    stores = []
    for store in ops_named(function, "bufferization.materialize_in_destination"):
        owner = defining_op(store.operands[0])
        reshape = owner is not None and owner.name in RESHAPES
        if reshape and isinstance(store.operands[1].type, ir.MemRefType):
            stores.append(store)
    for store in stores:
        reshape = store.operands[0].owner
        computed, destination = reshape.operands[0], store.operands[1]
        shape = ir.ShapedType(computed.type).shape
        groups = reshape.attributes["reassociation"]
        with ir.InsertionPoint(store), store.location:
            view_type = ir.MemRefType.get(shape, ir.ShapedType(computed.type).element_type)
            if reshape.name == "tensor.expand_shape":
                view = memref.CollapseShapeOp(view_type, destination, groups).result
            else:
                view = memref.ExpandShapeOp(view_type, destination, groups, [], shape).result
            bufferization.materialize_in_destination(
                None, computed, view, restrict=True, writable=True
            )
        store.erase()
        if not list(reshape.results[0].uses):
            reshape.erase()
    return len(stores)


def _next_epilogue(function: ir.Operation) -> tuple[ir.Operation, ir.Operation] | None:
    """The first (expand_shape, generic) pair the epilogue rewrite takes, or None."""
    found: list[tuple[ir.Operation, ir.Operation]] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "tensor.expand_shape" and _merges_rows(op):
            for use in op.results[0].uses:
                user = use.owner.operation
                if user.name == "linalg.generic" and _collapsible(user, _rows(op)):
                    found.append((op, user))
                    return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    function.walk(visit)
    return found[0] if found else None


def _rows(expand: ir.Operation) -> int:
    return len(ir.ShapedType(expand.results[0].type).shape) - 1


def _merges_rows(expand: ir.Operation) -> bool:
    """[[0, ..., r - 1], [r]]: the leading dims merged, the last one kept."""
    groups = [[ir.IntegerAttr(d).value for d in g] for g in expand.attributes["reassociation"]]
    rows = _rows(expand)
    return rows >= 2 and groups == [list(range(rows)), [rows]]


def _collapsible(op: ir.Operation, rows: int) -> bool:
    """An all-parallel generic over rows + 1 loops with one result, whose operands each
    are read whole (identity), along the last dim only, or as a scalar."""
    iterators = [str(a) for a in op.attributes["iterator_types"]]
    if len(op.results) != 1 or len(iterators) != rows + 1 or "reduction" in str(iterators):
        return False
    return all(_collapsed_map(m, rows) is not None for m in _maps(op))


def _maps(op: ir.Operation) -> list[ir.AffineMap]:
    return [ir.AffineMapAttr(a).value for a in linalg.get_indexing_maps(op)]


def _collapsed_map(affine_map: ir.AffineMap, rows: int) -> ir.AffineMap | None:
    """The 2-D map of an operand read whole (identity), along the last dim, or as a
    scalar; None for any other read (a broadcast along some row dims)."""
    dims = map_loops(affine_map)
    if dims == list(range(rows + 1)):
        return projection_map(2, [0, 1])
    if dims == [rows]:
        return projection_map(2, [1])
    if dims == []:
        return projection_map(2, [])
    return None


def _collapse_generic(expand: ir.Operation, op: ir.Operation) -> None:
    rows = _rows(expand)
    merge = expand.attributes["reassociation"]
    inputs, (init,) = list(op.operands)[:-1], list(op.operands)[-1:]
    with ir.InsertionPoint(op), op.location:

        def flat(value: ir.Value, affine_map: ir.AffineMap) -> ir.Value:
            if len(map_loops(affine_map)) != rows + 1:
                return value
            if value == expand.results[0]:
                return expand.operands[0]
            flat_type = _collapsed(value.type, rows)
            if (producer := defining_op(value)) is not None and producer.name == "tensor.empty":
                # A fresh init of its own: the schedule fuses the init's producer into its
                # tiles, and a reshape has no tiles.
                return tensor.EmptyOp(flat_type.shape, flat_type.element_type).result
            return tensor.CollapseShapeOp(flat_type, value, merge).result

        maps = _maps(op)
        rebuilt = linalg.GenericOp_(
            [flat(v, m) for v, m in zip(inputs, maps, strict=False)],
            [flat(init, maps[-1])],
            ir.ArrayAttr.get([ir.AffineMapAttr.get(_collapsed_map(m, rows)) for m in maps]),
            ir.ArrayAttr.get([op.attributes["iterator_types"][0]] * 2),
        )
        old, new = op.regions[0].blocks[0], rebuilt.regions[0].blocks[0]
        for before, after in zip(old.arguments, new.arguments, strict=True):
            before.replace_all_uses_with(after)
        for nested in list(old.operations):
            new.append(nested)
        shape = ir.ShapedType(op.results[0].type).shape
        result = tensor.ExpandShapeOp(op.results[0].type, rebuilt.result, merge, [], shape)
    op.results[0].replace_all_uses_with(result.result)
    op.erase()
