"""What the generic family reads off a linalg op: which loops are parallel, which one the
vectors run along, and which one reuses an operand across a register tile.

Loops are named L0, L1, ... in the op's loop order; V and U name the vector and reuse
loops' sizes (1 where the op has none)."""

from __future__ import annotations

from mlir import ir

from mlirtune.interfaces.op import OpInfo
from mlirtune.ir.roots import indexing_maps, is_padded, is_windowed

KIND = "generic"


def plain_loops(amap: ir.AffineMap) -> list[int]:
    """The loops an indexing map reads as plain dims, in result order."""
    return [e.position for e in amap.results if isinstance(e, ir.AffineDimExpr)]


def loops_read(amap: ir.AffineMap, *, strided: bool = False) -> set[int]:
    """The loops an indexing map reads, in any of its expressions (`oh + kh` reads both);
    with `strided`, only those it reads with a stride (`2 * ow`): no vector runs along
    them, as the vectorizer takes unit strides only."""
    return set().union(*(expression_loops(e, strided=strided) for e in amap.results))


def expression_loops(expr: ir.AffineExpr, *, strided: bool = False) -> set[int]:
    """The loops one index expression reads (all, or with `strided` the scaled ones)."""
    found: set[int] = set()

    def visit(expr: ir.AffineExpr, scaled: bool) -> None:
        if isinstance(expr, ir.AffineDimExpr) and (scaled or not strided):
            found.add(expr.position)
        if isinstance(expr, ir.AffineBinaryExpr):
            scaled = scaled or isinstance(expr, ir.AffineMulExpr)
            visit(expr.lhs, scaled)
            visit(expr.rhs, scaled)

    visit(expr, False)
    return found


def recognise_generic(op: ir.Operation, loops: list[int], dtypes: tuple[str, ...]) -> OpInfo:
    """The description of any static linalg op: its loops, the parallel ones (those its
    output is indexed by), the vector loop (the output's innermost parallel loop that every
    input reads with a unit stride; -1 where none is) and two reuse loops, the rows and
    columns of an outer product: the innermost other such loop some input does not read
    (that input's values then serve a row of the register tile each), and the innermost
    one left that an input reading the first does not read (a conv's output rows and its
    filters: one loaded input row and one broadcast filter tap feed the tile's FMAs); -1
    where there is none. Where a row is summed along instead (`_row_loop`), that
    reduction loop is the vector loop, and the two first found the reuse loops."""
    maps = indexing_maps(op)
    inputs, output = maps[: len(maps) - len(op.results)], maps[-1]
    parallel = plain_loops(output)
    strided = set().union(*(loops_read(m, strided=True) for m in inputs))
    unstrided = [loop for loop in parallel if loop not in strided]
    vector = unstrided[-1] if unstrided else -1
    others = [loop for loop in unstrided if loop != vector and loops[loop] > 1]
    reads = [loops_read(m) for m in inputs]
    unread = [loop for loop in others if any(loop not in r for r in reads)]
    reuse = (unread or others or [-1])[-1]
    readers = [r for r in reads if reuse in r]
    second = [loop for loop in unread if loop != reuse and any(loop not in r for r in readers)]
    reuse2 = second[-1] if second else -1
    row = _row_loop(inputs, parallel, strided, vector)
    if row >= 0:  # vectors along the rows summed; the output's loops make the tile
        vector, reuse, reuse2 = row, vector, reuse
    # The reuse loops along which each step loads another row of vectors (an input that
    # holds the vector loop reads them), rather than broadcasting another value.
    loaded = {loop for r in reads if vector in r for loop in r}
    dims = {f"L{i}": size for i, size in enumerate(loops)}
    dims["V"] = loops[vector] if vector >= 0 else 1
    dims["U"] = loops[reuse] if reuse >= 0 else 1
    dims["U2"] = loops[reuse2] if reuse2 >= 0 else 1
    attrs = {
        "loops": len(loops),
        "parallel": sum(1 << loop for loop in parallel),
        "vector_loop": vector,
        "reuse_loop": reuse,
        "reuse2_loop": reuse2,
        "reuse_loads_rows": int(reuse in loaded),
        "reuse2_loads_rows": int(reuse2 in loaded),
        "windowed": int(is_windowed(op)),
    }
    attrs.update(padded_input(op))
    # The last op's loops are then the parallel ones, in order (no unit dims kept in the
    # output as constants, `(d0, d1, 0, 0)`): its register tiles fuse the root.
    in_order = parallel == sorted(parallel) and len(parallel) == len(output.results)
    if in_order and epilogue_length(op):
        attrs["fused_output"] = 1
    return OpInfo(KIND, dims, dtypes, op.name, attrs)


def _row_loop(
    inputs: list[ir.AffineMap], parallel: list[int], strided: set[int], vector: int
) -> int:
    """Where no input holds the vector loop in its innermost index but one holds a
    reduction loop there, with a unit stride, that loop: a sum over rows (a global
    pool, a mean over the last dims) then vectorizes along the rows it reads, rather
    than gathering one element of each row per lane. -1 otherwise."""
    innermost = [m.results[-1] for m in inputs if len(m.results)]
    if vector < 0 or any(vector in expression_loops(e) for e in innermost):
        return -1
    rows = [
        e.position
        for e in innermost
        if isinstance(e, ir.AffineDimExpr)
        and e.position not in parallel
        and e.position not in strided
    ]
    return rows[0] if rows else -1


def parallel_loops(op: OpInfo) -> list[int]:
    """The positions of the op's parallel loops."""
    mask = op.attributes["parallel"]
    return [loop for loop in range(op.attributes["loops"]) if mask >> loop & 1]


def output_loops(op: OpInfo, vector: int, unroll: int, unroll2: int) -> list[int]:
    """Tile sizes of the op's loops for one register tile of the output: `vector` along
    the vector loop (where it is parallel), `unroll` and `unroll2` along the reuse loops,
    one along every other parallel loop, none (0) along the reductions."""
    sizes = [0] * op.attributes["loops"]
    for loop in parallel_loops(op):
        sizes[loop] = 1
    for name, size in (("vector_loop", vector), ("reuse_loop", unroll), ("reuse2_loop", unroll2)):
        if op.attributes[name] >= 0 and sizes[op.attributes[name]]:  # parallel ones
            sizes[op.attributes[name]] = size
    return sizes


def padded_input(op: ir.Operation) -> dict[str, int]:
    """Where an input of `op` is a tensor.pad with the same padding at both ends of its
    rows, its rank, row width and padding: the schedule materialises it once, rather
    than in every register tile the pad would otherwise be fused into."""
    for value in op.operands:
        if not is_padded(value):
            continue
        pad = value.owner
        low, high = (list(pad.attributes[a])[-1] for a in ("static_low", "static_high"))
        shape = ir.ShapedType(value.type).shape
        if low == high:
            return {"pad_rank": len(shape), "pad_row": shape[-1], "pad": low}
    return {}


def epilogue_length(op: ir.Operation) -> int | None:
    """How many element-wise ops of its own result's shape (a bias, an activation) lie
    between `op` and the stored output, each the only user of the one before; None where
    its result goes anywhere else."""
    value, length = op.results[0], 0
    while True:
        users = [use.owner for use in value.uses]
        if len(users) != 1:
            return None
        user = users[0]
        if user.name == "bufferization.materialize_in_destination":
            return length
        identity = ir.AffineMap.get_identity(len(ir.ShapedType(value.type).shape))
        if user.name != "linalg.generic" or user.results[0].type != value.type:
            return None
        if indexing_maps(user)[-1] != identity:
            return None
        value, length = user.results[0], length + 1
