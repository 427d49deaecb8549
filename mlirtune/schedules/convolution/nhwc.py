"""The convolution family's NHWC / HWCF schedule (linalg.conv_2d_nhwc_hwcf), and its packed
filter (PACK_FILTER=1).

The output is tiled into one image row of OW_TILE x F_TILE outputs, and the filter window
is walked one tap and C_TILE channels at a time (see convolution.py).

With PACK_FILTER=1 the output is first cut into F_TILE channel blocks. Each block's slice
of the filter, [KH, KW, C, F_TILE], is copied once into a contiguous buffer: a nofold pad of
the register tile's filter operand, hoisted out of the pixel loops
(`transform.structured.hoist_pad`). Every pixel tile of the block then reads its weights
from that buffer. Otherwise the pixel tiles loop outside the channel tiles, so each reads
the whole filter, and a slice's rows, F elements apart, share a fraction of the cache sets.
A filter past half of L2 then streams from L3 for every pixel tile: conv2d 16x16x256 ->
256 (a 2.4 MB filter) on an Intel Xeon with a 2 MiB L2 ran at 92 GFLOP/s unpacked and 159
packed in one interleaved run, 0.80x -> 1.36x PyTorch. Where the filter stays in L2, the
copy and the input re-read by every channel block cost a few percent (58x58x64: 178
against 173 GFLOP/s), so the cost model decides (Convolution.cost_on).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import z3
from mlir import ir
from mlir.dialects import transform
from mlir.dialects.transform import structured

from mlirtune.interfaces.dtype import dtype_named
from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.schedule import Constraint, KnobVariables
from mlirtune.schedules.builder import ScheduleBuilder
from mlirtune.schedules.convolution.knob_values import ConvolutionKnobs

CONV_OP = "linalg.conv_2d_nhwc_hwcf"
# Input channels each vectorised copy of the filter slice moves.
COPY_CHANNELS = 8


def pack_filter_choices(op: OpInfo, lanes: int) -> list[int]:
    """PACK_FILTER candidates: 0, and 1 for an NHWC conv (the nchw paths have their own
    filter access)."""
    return [0] if op.attributes.get("nchw") else [0, 1]


def whole_tiles_constraint(op: OpInfo, knobs: KnobVariables) -> Constraint:
    """PACK_FILTER needs whole pixel and channel tiles: a peeled partial tile would hoist
    its copy over other loops than the whole tiles'."""
    d = op.dims
    return Constraint(
        "pack_filter_whole_tiles",
        f"PACK_FILTER == 0 or ({d['F']} % F_TILE == 0 and {d['OW']} % OW_TILE == 0): the "
        "packed filter takes whole pixel and channel tiles",
        z3.Or(
            knobs["PACK_FILTER"] == 0,
            z3.And(d["F"] % knobs["F_TILE"] == 0, d["OW"] % knobs["OW_TILE"] == 0),
        ),
    )


def packs_filter(loop_sizes: Sequence[int], knobs: ConvolutionKnobs) -> bool:
    """Whether the schedule packs the filter: PACK_FILTER=1 on whole tiles (clamped to the
    dims, as the schedule does)."""
    _, _, ow, f, _, _, _ = loop_sizes
    ow_tile, f_tile = min(knobs.ow_tile, ow), min(knobs.f_tile, f)
    return bool(knobs.pack_filter) and ow % ow_tile == 0 and f % f_tile == 0


def channel_blocks(s: ScheduleBuilder, conv: ir.Value, f_tile: int, parallel: bool) -> ir.Value:
    """The conv cut into F_TILE output-channel blocks (an scf.forall over the threads when
    `parallel`), the fill fused; returns the block's conv."""
    s.fuse_with_loops(conv, [0, 0, 0, f_tile, 0, 0, 0], step="channel_blocks", parallel=parallel)
    return s.match(s.root, [CONV_OP], step="match_conv_block")


def pack_filter(
    s: ScheduleBuilder,
    conv: ir.Value,
    loop_sizes: Sequence[int],
    tile: tuple[int, int],
    dtypes: Sequence[str],
) -> None:
    """Copy the filter slice of the register tiles `conv` (OW x F `tile`s of one channel
    block) into a contiguous buffer above the pixel loops: the N, OH and OW loops that were
    not folded away for a single iteration. With none (one tile per block) the filter is
    read in place."""
    n, oh, ow, _, _, _, c = loop_sizes
    ow_tile, f_tile = tile
    loops = (n > 1) + (oh > 1) + (ow > ow_tile)
    if not loops:
        return
    zeros = [dtype_named(name).zero() for name in dtypes]
    with s.at("pad_filter"):
        padded = structured.PadOp(
            conv,
            padding_values=zeros,
            padding_dimensions=list(range(7)),
            nofold_flags=[0, 1, 0],
            copy_back_op="none",
        ).padded
    pad = s.producer(padded, 1, step="match_filter_pad")
    with s.at("pack_filter"):
        packed = structured.HoistPadOp(transform.AnyOpType.get(), pad, loops).transformed
    rows = math.gcd(c, COPY_CHANNELS)
    tiled, _ = s.tile(packed, [1, 1, rows, 0], step="tile_filter_copy")
    with s.at("vectorize_filter_copy"):
        structured.VectorizeOp(tiled, vector_sizes=[1, 1, rows, f_tile])


def convolution_schedule(
    *,
    loop_sizes: Sequence[int],
    knobs: ConvolutionKnobs,
    dtypes: Sequence[str],
    padded: bool = False,
    name: str = "convolution",
) -> ir.Module:
    """Schedule for a payload whose last op is a `linalg.conv_2d_nhwc_hwcf` with loop sizes
    `loop_sizes` (N, OH, OW, F, KH, KW, C) and operand element types `dtypes`; tile sizes
    are clamped to those sizes. A `padded` input (a tensor.pad) is materialised first, one
    pixel's channels at a time."""
    _, _, ow, f, _, _, c = loop_sizes
    ow_tile, f_tile, c_tile = min(knobs.ow_tile, ow), min(knobs.f_tile, f), min(knobs.c_tile, c)
    packed = packs_filter(loop_sizes, knobs)
    with ScheduleBuilder(name) as s:
        if padded:
            function = s.match(s.root, ["func.func"], step="match_function_padded")
            s.materialize_padding(function, 4, c, 0)
        conv = s.match(s.root, [CONV_OP], step="match_conv")
        if packed:  # channel blocks outermost (over the threads), the pixel tiles inside
            conv = channel_blocks(s, conv, f_tile, parallel=knobs.threads > 1)
        elif knobs.threads > 1:
            # Output rows (N, OH) as one scf.forall spread over the threads, the fill fused.
            s.fuse_with_loops(conv, [1, 1, 0, 0, 0, 0, 0], step="parallel_rows", parallel=True)
            conv = s.match(s.root, [CONV_OP], step="match_conv_rows")
        sizes = [1, 1, ow_tile, 0 if packed else f_tile, 0, 0, 0]
        _, loops = s.fuse_with_loops(conv, sizes, step="output_tile")
        # Peel partial tiles (innermost loop first, so the outer peel clones both halves):
        # every tile then has a static shape and vectorizes.
        if not packed:  # (packed: whole tiles)
            ow_loop, f_loop = loops[-2:]
            if f % f_tile:
                s.peel(f_loop, step="peel_f")
            if ow % ow_tile:
                s.peel(ow_loop, step="peel_ow")
        function = s.match(s.root, ["func.func"], step="match_function")
        s.canonicalize(function, step="static_tile_shapes")
        conv = s.match(s.root, [CONV_OP], step="match_conv_tiles")
        if packed:
            pack_filter(s, conv, loop_sizes, (ow_tile, f_tile), dtypes)
            conv = s.match(s.root, [CONV_OP], step="match_conv_packed")
        conv, filter_loops = s.tile(conv, [0, 0, 0, 0, 1, 1, c_tile], step="filter_tile")
        with s.at("decompose_to_1d"):
            structured.DecomposeOp(conv)
        function = s.match(s.root, ["func.func"], step="match_function_again")
        if c % c_tile:
            s.peel(filter_loops[-1], step="peel_c")
            s.canonicalize(function, step="static_channel_tiles")
        # Not the insert_slice ops: a packed channel block's write-back into the output,
        # vectorized, is one vector<OH x OW x F_TILE> unrolled into a transfer per pixel
        # (58x58x64: 3136, 2.6 s of compile).
        s.vectorize_linalg(function)
        s.drop_leading_unit_dims(function)
        s.hoist_invariant_subsets(function)
        s.lower_vectors(function)
    return s.module
