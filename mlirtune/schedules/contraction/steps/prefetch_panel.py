"""Prefetch the next row of register tiles' broadcast panel while the current row runs.

In the packed contraction nest (schedules/contraction/packed.py) with A read in place, a
row of register tiles broadcasts A's MR x KC micro-panel for every NR tile of the column
block. Its first NR tile waits on that panel from L3 or memory, and a column block has
few NR tiles (NC / NR = 8 at NC = 128), so the wait is a large share: on an AMD Zen 3,
2048x128x2048 f32 (A's panels read once) ran at 80.9 GFLOP/s, 2048^3 (read by 16 column
blocks) at 73.6.

A schedule marks the MR loop with PANEL_ATTRIBUTE. This step, run after bufferization,
spreads over that loop's NR tiles one `memref.prefetch` into L2 per cache line of the next
row's panel: at the start of NR tile j, lines j x C to (j + 1) x C - 1 of each of its MR
rows, C the lines of a row over the NR tiles. The panel is the 2-D function argument of
static shape whose rows the K loop reads MR x 1 vectors of, at a row and a column computed
from the loop variables by `affine.apply` (or the variables themselves); rows past the
argument's last are clamped. Loops of other shapes are left as they are.

Registered as the descriptor step `prefetch-next-panel` (mlirtune.pipeline.steps).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import affine, arith, memref, scf

from mlirtune.interfaces.dtype import element_bytes
from mlirtune.ir.prefetch import (
    LINE_BYTES,
    inner_loops,
    loop_body,
    marked_loops,
    static_bounds,
)

PANEL_ATTRIBUTE = "mlirtune.prefetch_next_panel"
KEEP_IN_L2 = 2  # the locality hint of prefetcht1: the panel is read after this row's tiles


def prefetch_next_panel(module: ir.Module) -> None:
    """Add the prefetches to every marked scf.for of `module`, in place."""
    for row_loop in marked_loops(module, PANEL_ATTRIBUTE):
        column_loops = inner_loops(row_loop)
        if len(column_loops) == 1:
            k_loops = inner_loops(column_loops[0])
            if len(k_loops) == 1:
                _prefetch(row_loop, column_loops[0], k_loops[0])


def _panel_read(k_loop: ir.Operation) -> ir.Operation | None:
    """The K loop's read of MR x 1 vectors from a 2-D function argument: the panel."""
    for op in loop_body(k_loop).operations:
        if op.name != "vector.transfer_read":
            continue
        source = op.operands[0]
        shape = ir.VectorType(op.results[0].type).shape
        if (
            isinstance(source, ir.BlockArgument)
            and source.owner.owner.operation.name == "func.func"
            and ir.MemRefType(source.type).rank == 2
            and len(shape) == 2
            and shape[1] == 1
            and ir.AffineMapAttr(op.attributes["permutation_map"]).value
            == ir.AffineMap.get_minor_identity(2, 2)  # rows of A, not of a transposed A
        ):
            return op
    return None


def _index_at(
    index: ir.Value, substitutions: dict[ir.Value, ir.Value], k_loop: ir.Operation
) -> ir.Value | None:
    """`index` recomputed with loop variables replaced (at the insertion point): the
    variable itself, or one `affine.apply` of values defined outside the K loop; None for
    other forms."""
    replaced = _replacement(index, substitutions)
    if replaced is not None:
        return replaced
    owner = index.owner
    if not isinstance(owner, ir.OpView):
        return index  # a variable of an outer loop
    if owner.name != "affine.apply":
        return None
    operands = []
    for value in owner.operands:
        replaced = _replacement(value, substitutions)
        if replaced is None and _defined_in(value, k_loop):
            return None
        operands.append(replaced or value)
    return affine.apply(owner.attributes["map"], operands)


def _replacement(value: ir.Value, substitutions: dict[ir.Value, ir.Value]) -> ir.Value | None:
    """What `substitutions` replaces `value` with (compared as values: their Python
    wrappers differ), else None."""
    return next((new for old, new in substitutions.items() if value == old), None)


def _defined_in(value: ir.Value, loop: ir.Operation) -> bool:
    """Whether `value` is the result of an op of `loop`'s body."""
    owner = value.owner
    return isinstance(owner, ir.OpView) and owner.parent.operation == loop.operation


def _prefetch(row_loop: ir.Operation, column_loop: ir.Operation, k_loop: ir.Operation) -> None:
    row_bounds, column_bounds, k_bounds = (
        static_bounds(loop) for loop in (row_loop, column_loop, k_loop)
    )
    read = _panel_read(k_loop)
    if read is None or None in (row_bounds, column_bounds, k_bounds) or k_bounds[2] != 1:
        return
    panel = read.operands[0]
    panel_type = ir.MemRefType(panel.type)
    if not panel_type.has_static_shape:  # its last row and column clamp the addresses
        return
    rows = ir.VectorType(read.results[0].type).shape[0]
    per_line = max(1, LINE_BYTES // element_bytes(str(panel_type.element_type)))
    lines = -(-(k_bounds[1] - k_bounds[0]) // per_line)
    tiles = -(-(column_bounds[1] - column_bounds[0]) // column_bounds[2])
    chunk = -(-lines // tiles)
    row, column, k = (loop_body(loop).arguments[0] for loop in (row_loop, column_loop, k_loop))
    with ir.InsertionPoint.at_block_begin(loop_body(column_loop)), column_loop.location:
        index = ir.IndexType.get()

        def constant(value: int) -> ir.Value:
            return arith.constant(index, value)

        next_row = arith.addi(row, constant(row_bounds[2]))
        at_next = {row: next_row, k: constant(k_bounds[0])}
        first_row = _index_at(read.operands[1], at_next, k_loop)
        first_column = _index_at(read.operands[2], at_next, k_loop)
        if first_row is None or first_column is None:
            return
        first_column_tile, _, column_step = column_bounds
        tile = arith.divui(arith.subi(column, constant(first_column_tile)), constant(column_step))
        start = arith.muli(tile, constant(chunk))
        stop = arith.minui(arith.addi(start, constant(chunk)), constant(lines))
        last_row, last_column = (constant(size - 1) for size in panel_type.shape)
        line_loop = scf.ForOp(start, stop, constant(1))
        with ir.InsertionPoint(line_loop.body):
            offset = arith.muli(line_loop.induction_variable, constant(per_line))
            at = arith.minsi(arith.addi(first_column, offset), last_column)
            for r in range(rows):
                ahead = arith.minsi(arith.addi(first_row, constant(r)), last_row)
                memref.prefetch(panel, [ahead, at], False, KEEP_IN_L2, True)
            scf.yield_([])
