"""The convolution family's NCHW path over flat rows (FLAT_ROWS=1, flat_conv.py):
the step `flatten-conv-rows` has rewritten the conv as a generic over each output plane as
one row of (OH - 1) * IW + OW positions, and this schedules it like `nchw_rows` schedules
one output row: F_TILE channels x OW_TILE positions per register tile, the fill fused, one
channel and tap per filter step, out[f, p] += K[f] * I[p + offset] once its unit loops are
folded. The plane's tail past whole OW_TILE tiles runs in power-of-two pieces;
the op that crops the planes back to OW pixels a row is tiled into rows and vectorized,
within an element-wise epilogue's rows where the conv has one (epilogue.py). With
THREADS > 1, each thread takes F / THREADS channels of every plane (an scf.forall), and of
the crop.
"""

from __future__ import annotations

from mlir import ir

from mlirtune.interfaces.op import OpInfo
from mlirtune.schedules.builder import ScheduleBuilder
from mlirtune.schedules.convolution.epilogue import has_epilogue, row_chunks
from mlirtune.schedules.convolution.flat_conv import FLAT_CROP_ATTRIBUTE
from mlirtune.schedules.convolution.knob_values import ConvolutionKnobs
from mlirtune.schedules.convolution.nchw_tiles import plane_row
from mlirtune.schedules.unit_steps import vectorize_unit_steps

# The crop: a copy, or an add into a conv's init that is not a fill (its producer fused).
CROP_OPS = ["linalg.copy", "linalg.generic"]


def flat_channel_rows(
    s: ScheduleBuilder, op: OpInfo, function: ir.Value, knobs: ConvolutionKnobs
) -> None:
    """Schedule the flattened conv of `op` (padding already materialized) into `s`."""
    d = op.dims
    length = plane_row(op)
    width, f_tile = min(knobs.ow_tile, length), min(knobs.f_tile, d["F"])
    conv = s.match_root(s.root, "conv2d", step="match_flat_conv")
    channels, threads = d["F"], knobs.threads
    if threads > 1:  # each thread its share of the channels (F % THREADS == 0), whole planes
        channels //= threads
        s.fuse_with_loops(conv, [1, channels, 0, 0, 0, 0], step="parallel_channels", parallel=True)
        conv = s.match_root(s.root, "conv2d", step="match_flat_share")
    _, loops = s.fuse_with_loops(conv, [1, f_tile, width, 0, 0, 0], step="plane_tiles")
    if tail := length % width:
        # The partial tile (static once peeled) runs in power-of-two pieces, its fill fused.
        _, remainder = s.peel(loops[2], step="peel_plane_tail")
        last = s.match(remainder, ["linalg.generic"], step="match_plane_tail")
        s.split_pieces(last, 2, tail, step="split_plane_tail")
    if channels % f_tile:  # after the pieces, so that the peel clones them all
        s.peel(loops[1], step="peel_f")
    # The crop's rows, or the epilogue's with the crop fused: a thread's channels each.
    rows = s.match(function, CROP_OPS, step="match_crop", attributes=[FLAT_CROP_ATTRIBUTE])
    if has_epilogue(op):
        rows = s.last_op(step="match_epilogue")
    if threads > 1:
        rows = s.fuse_with_loops(rows, [1, channels, 0, 0], "parallel_crop", parallel=True)[0]
    row_chunks(s, rows, d["OW"], step="crop_rows", fuse=True)
    function = s.match(s.root, ["func.func"], step="match_function_tiled")
    s.canonicalize(function, step="static_tile_shapes")
    conv = s.match_root(s.root, "conv2d", step="match_flat_tiles")
    s.tile(conv, [0, 0, 0, 1, 1, 1], step="filter_tile")  # one channel and tap a step
    function = s.match(s.root, ["func.func"], step="match_function_again")
    s.canonicalize(function, step="static_channel_tiles")
    vectorize_unit_steps(s, function)
