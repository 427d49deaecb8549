"""The convolution family's NCHW path for unit-stride convolutions (nchw_tiles.unit_taps):
channel x row tiles of broadcast x row FMAs.

The output is tiled into F_TILE channels x OH_TILE rows x OW_TILE contiguous pixels, the
fill fused, and each filter step is one tap of one channel: generalized, its unit loops
folded, it is out[f, oh, ow] += K[f] * I[oh, ow], a broadcast filter value times contiguous
input rows, and the accumulators stay in registers across the C, KH and KW loops. F_TILE
rows are the outermost loop (a memory-bound conv writes F_TILE output planes at a time);
a row's pixels past its whole OW_TILE tiles run in pieces of power-of-two widths
(`row_pieces`). An element-wise epilogue is tiled by the same rows, the conv fused into
them (epilogue.py).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import transform
from mlir.dialects.transform import structured

from mlirtune.interfaces.op import OpInfo
from mlirtune.schedules.builder import ScheduleBuilder
from mlirtune.schedules.convolution.epilogue import has_epilogue, row_chunks
from mlirtune.schedules.convolution.knob_values import ConvolutionKnobs
from mlirtune.schedules.unit_steps import vectorize_unit_steps

NCHW_OP = "linalg.conv_2d_nchw_fchw"


def channel_rows(
    s: ScheduleBuilder, op: OpInfo, conv: ir.Value, function: ir.Value, knobs: ConvolutionKnobs
) -> None:
    """Schedule the `linalg.conv_2d_nchw_fchw` handle `conv` (padding already materialized)
    into `s`, as the module docstring says."""
    d = op.dims
    ow_tile, f_tile = min(knobs.ow_tile, d["OW"]), min(knobs.f_tile, d["F"])
    oh_tile = knobs.oh_tile
    # The output rows are the epilogue's where the conv has one, the conv fused into them.
    rows, filter_loops = (
        (s.last_op(step="match_epilogue"), []) if has_epilogue(op) else (conv, [0] * 3)
    )
    if knobs.threads > 1:
        sizes = [1, 0, oh_tile, 0, *filter_loops]
        rows = s.fuse_with_loops(rows, sizes, step="parallel_rows", parallel=True)[0]
    sizes = [1, f_tile, oh_tile, 0, *filter_loops]
    rows, row_loops = s.fuse_with_loops(rows, sizes, step="output_rows")
    if has_epilogue(op):
        row_chunks(s, rows, d["OW"], step="epilogue_rows", fuse=False)
        with s.at("erase_fused_conv"):  # left behind, read by a dead slice of it alone
            transform.ApplyDeadCodeEliminationOp(function)
    conv = s.match(s.root, [NCHW_OP], step="match_conv_row")
    pieces = row_pieces(s, op, conv, ow_tile)
    for piece, (part, width) in enumerate(pieces):
        sizes = [0, 0, 0, width, 0, 0, 0]
        _, loops = s.fuse_with_loops(part, sizes, step=f"output_tile_{piece}")
        if len(pieces) == 1 and d["OW"] % width:  # a partial tile of several convs
            s.peel(loops[-1], step="peel_ow")
    function = s.match(s.root, ["func.func"], step="match_function_tiled")
    if len(pieces) > 1:  # the tail pieces read the row's fill, a row of pixels at a time
        fills = s.match(function, ["linalg.fill"], step="match_fills")
        s.tile(fills, [1, 1, 1, 0], step="fill_rows")
    if d["F"] % f_tile:  # after the pieces, so that the peel clones them all
        s.peel(row_loops[-2], step="peel_f")
    s.canonicalize(function, step="static_tile_shapes")
    conv = s.match(s.root, [NCHW_OP], step="match_conv_tiles")
    s.tile(conv, [0, 0, 0, 0, 1, 1, 1], step="filter_tile")  # one channel and tap a step
    function = s.match(s.root, ["func.func"], step="match_function_again")
    s.canonicalize(function, step="static_channel_tiles")
    conv = s.match(s.root, [NCHW_OP], step="match_conv_steps")
    with s.at("generalize"):
        structured.GeneralizeOp(conv)
    vectorize_unit_steps(s, function)


def row_pieces(
    s: ScheduleBuilder, op: OpInfo, conv: ir.Value, ow_tile: int
) -> list[tuple[ir.Value, int]]:
    """Split a unit-stride nchw conv along OW (loop 3) into the pixels of whole OW_TILE-wide
    tiles and the tail past them, in pieces of power-of-two widths (ScheduleBuilder.
    split_tail): a 24-wide tail of 32-wide tiles in one piece ran 14 ms against 3 (56x56
    3x3, 64 channels). The pieces past the first read the fill of their output row.
    Several convs in one handle (of other widths) stay one piece, their tail peeled.
    Returns (piece, its tile width) in order."""
    ow = op.dims["OW"]
    tail = ow % ow_tile
    if not tail or op.attributes.get("convs", 1) > 1:
        return [(conv, ow_tile)]
    main, pieces = s.split_tail(conv, 3, ow - tail, tail, step="split_row_tail")
    return [(main, ow_tile), *pieces]
