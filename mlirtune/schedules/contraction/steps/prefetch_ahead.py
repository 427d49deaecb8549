"""Prefetch the streamed B micro-panel a few K steps ahead, inside the micro-kernel.

In the packed contraction nest (schedules/contraction/packed.py) with A read in place, each
register tile's K loop reads one row of NR elements of B's packed panel per K step: a panel
that streams from L2 for every row of register tiles. Sampled on an AMD Zen 3 (2048^3 f32,
4 x 16), most of the micro-kernel's time fell on the FMAs waiting for those rows.

A schedule marks the rows-of-register-tiles loop with AHEAD_ATTRIBUTE. This step, run after
bufferization, finds under it each K loop that reads rows of packed panels (a 3-D
`memref.alloc` [panels, KC, NR] read at [panel, k, 0], k running over all of KC) and has
every K step prefetch, into L1, the row AHEAD_BYTES further on: of the same panel, then
past its last row the next panel's (the next NR tile's), read as one [panels x KC, NR] run
of rows. The last panel's steps prefetch their own rows instead (the row is clamped once
per tile, not per step). Compared on the same host: splitting the K loop at KC - ahead
instead, so that its last steps prefetch nothing, lost 5% (2048^3) to the split alone and
more to the missed rows; a clamp per step cost more than the prefetch won.

Registered as the descriptor step `prefetch-panel-ahead` (mlirtune.pipeline.steps).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, memref

from mlirtune.interfaces.dtype import element_bytes
from mlirtune.ir.prefetch import (
    KEEP_IN_ALL_CACHES,
    LINE_BYTES,
    inner_loops,
    loop_body,
    marked_loops,
    static_bounds,
)

AHEAD_ATTRIBUTE = "mlirtune.prefetch_panel_ahead"
# How far ahead of the K step the prefetches run: 32 rows of a 16-wide f32 panel. Against
# 1 KiB on the Zen 3 (one run each, not rotated): 256x11008x4096 0.88x -> 0.91x OpenBLAS,
# 256x4096x11008 0.88x -> 0.89x, 512x2048x2048 0.89x -> 0.88x.
AHEAD_BYTES = 2048


def prefetch_panel_ahead(module: ir.Module) -> None:
    """Add the prefetches to the panel-reading K loops under every marked loop of `module`,
    in place."""
    for row_loop in marked_loops(module, AHEAD_ATTRIBUTE):
        for column_loop in inner_loops(row_loop):
            for k_loop in inner_loops(column_loop):
                _prefetch(k_loop)


def _panel_row_read(k_loop: ir.Operation) -> ir.Operation | None:
    """The K loop's read of one row of a packed panel: a 3-D memref.alloc read at
    [panel, k, 0], k the loop's variable."""
    k = loop_body(k_loop).arguments[0]
    for op in loop_body(k_loop).operations:
        if op.name != "vector.transfer_read":
            continue
        source = op.operands[0]
        owner = source.owner
        if (
            isinstance(owner, ir.OpView)
            and owner.name == "memref.alloc"
            and ir.MemRefType(source.type).rank == 3
            and op.operands[2] == k
        ):
            return op
    return None


def _prefetch(k_loop: ir.Operation) -> None:
    read = _panel_row_read(k_loop)
    if read is None:
        return
    panel_type = ir.MemRefType(read.operands[0].type)
    panels, depth, width = panel_type.shape
    if static_bounds(k_loop) != (0, depth, 1) or panels == 1:
        return  # a loop over part of the panel, or one panel (its rows could only repeat)
    size = element_bytes(str(panel_type.element_type))
    ahead = max(1, AHEAD_BYTES // (width * size))
    k = loop_body(k_loop).arguments[0]
    with ir.InsertionPoint(read), k_loop.location:
        index = ir.IndexType.get()

        def constant(value: int) -> ir.Value:
            return arith.constant(index, value)

        # The panels as one run of rows, the next NR tile's panel after this one's last.
        rows_type = ir.MemRefType.get([panels * depth, width], panel_type.element_type)
        rows = memref.collapse_shape(rows_type, read.operands[0], [[0, 1], [2]])
        first = arith.addi(arith.muli(read.operands[1], constant(depth)), constant(ahead))
        first = arith.minui(first, constant((panels - 1) * depth))
        row = arith.addi(first, k)
        for column in range(0, width, max(1, LINE_BYTES // size)):
            memref.prefetch(rows, [row, constant(column)], False, KEEP_IN_ALL_CACHES, True)
