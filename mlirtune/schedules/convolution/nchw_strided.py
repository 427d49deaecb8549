"""The convolution family's NCHW path for convolutions strided along W (stride_w > 1), and
for batches of deep unit-stride ones (nchw_tiles.unit_taps).

The unit-stride NCHW path vectorizes along the output row, each filter tap a broadcast
weight times a contiguous input row; with a stride along W that input row is strided (a
gather per tap), and MLIR's vectorized 1-D conv instead transposes its tiles at every
channel step. Here the output channels are made contiguous instead:
`transform.structured.pack` packs the F loop by F_TILE, so the filter becomes
[F/F_TILE, C, KH, KW, F_TILE] (packed once per call and F_TILE block) and the output
[N, F/F_TILE, OH, OW, F_TILE]. The output is tiled into F_TILE channels x OW_TILE pixels
of one row (each tile's unpack fused with its producers), and every pixel of a tile is
its own op: per tap, one input value broadcast times the tap's F_TILE weights, into an
accumulator that stays in a register across the C, KH and KW loops. The finished tile is
transposed back to NCHW rows (the vectorized unpack) and stored contiguously, or passed
to the tile of an element-wise epilogue (epilogue.py).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import transform
from mlir.dialects.transform import structured
from mlir.dialects.transform import tensor as ttensor

from mlirtune.interfaces.dtype import element_bytes
from mlirtune.interfaces.op import OpInfo
from mlirtune.schedules.builder import ScheduleBuilder
from mlirtune.schedules.convolution.epilogue import has_epilogue
from mlirtune.schedules.convolution.knob_values import ConvolutionKnobs
from mlirtune.schedules.convolution.nchw_tiles import unit_taps
from mlirtune.targets.host_cpu import HostCPU

# Register rows (output pixels) of a tile, each one vector of output channels.
STRIDED_PIXELS = 8
# Loops of the packed conv: N, F blocks, OH, OW, C, KH, KW, then the F_TILE channels.
# Its taps and pixels one at a time, the pixel loop innermost (inside the taps'), so
# that each tap's weights are loaded once for all pixels of a tile.
TAP_TILES = [0, 0, 0, 1, 1, 1, 1, 0]
PIXELS_INNERMOST = [0, 1, 2, 4, 5, 6, 3, 7]
# The packed conv's iterators (an epilogue's generic beside it has four parallel loops).
PACKED_CONV_LOOPS = ["parallel"] * 4 + ["reduction"] * 3 + ["parallel"]


def strided_channels_first(
    s: ScheduleBuilder, op: OpInfo, conv: ir.Value, function: ir.Value, knobs: ConvolutionKnobs
) -> None:
    """Schedule the `linalg.conv_2d_nchw_fchw` handle `conv` (padding already materialized)
    into `s`, as the module docstring says."""
    d = op.dims
    f_tile, ow_tile = min(knobs.f_tile, d["F"]), min(knobs.ow_tile, d["OW"])
    # The output is tiled by the epilogue's tiles where the conv has one, the unpack and
    # the conv fused into them (epilogue.py); else by the unpack's.
    epilogue = s.last_op(step="match_epilogue") if has_epilogue(op) else None
    unpack = _packed_output(s, conv, function, f_tile)
    tiled = epilogue or unpack
    if knobs.threads > 1 and d["F"] % f_tile == 0:
        tiled = s.fuse_with_loops(tiled, [1, 0, 0, 0], "parallel_images", parallel=True)[0]
    convs = _pixel_tiles(s, op, tiled, function, (f_tile, ow_tile), knobs.images_outer)
    for tile_conv, pixels in convs:
        with s.at("tap_and_pixel_loops"):
            tiled = structured.TileUsingForOp(
                tile_conv, sizes=TAP_TILES, interchange=PIXELS_INNERMOST
            )
        if pixels > 1:
            s.unroll(tiled.loops[-1], pixels, step="unroll_pixels")
    s.canonicalize_loops(function, step="fold_unrolled_pixels")
    _vectorize_pixels(s, function, d["F"] % f_tile == 0)


def _packed_output(s: ScheduleBuilder, conv: ir.Value, function: ir.Value, f_tile: int) -> ir.Value:
    """Pack the conv's output channels by F_TILE (its zero fill becomes a fill of the packed
    output). Returns the handle of the unpack that writes the NCHW output back. With
    threads, the caller makes the images (N) one scf.forall spread over them; not with a
    partial F block: the filter's packing, fused into the forall, would then be cut per
    block into dynamic shapes that do not vectorize (the image loop stays on one thread)."""
    with s.at("pack_output_channels"):
        structured.PackOp(
            transform.OperationType.get("linalg.generic"),
            conv,
            [],
            static_packed_sizes=[0, f_tile, 0, 0, 0, 0, 0],
        )
    s.apply_patterns(
        function, "fill_packed_output", structured.apply_patterns_tensor_fold_into_pack_and_unpack
    )
    return s.match(function, ["linalg.unpack"], step="match_unpack")


def _pixel_tiles(
    s: ScheduleBuilder,
    op: OpInfo,
    output: ir.Value,
    function: ir.Value,
    tile: tuple[int, int],
    images_outer: int,
) -> list[tuple[ir.Value, int]]:
    """The `output` op (the unpack, or the epilogue after it) in F_TILE channels x OW_TILE
    pixels of one row, F blocks outermost so that the filter's packing (fused per block) is
    hoisted out of the image and pixel loops; with IMAGES_OUTER, the images outermost, so
    that an image's input is re-read from L2 by its F blocks, and the filter is packed once
    per image (`images_outer`). Partial F blocks and pixel tiles are peeled,
    F first (peeling a loop invalidates the handles inside it), then each part's conv
    matched, before canonicalization inlines the one-iteration remainder loops. Returns
    each tile's conv and its pixel count."""
    d = op.dims
    f_tile, ow_tile = tile
    order = [0, 1, 2, 3] if images_outer else [1, 0, 2, 3]
    _, loops = s.fuse_with_loops(
        output, [1, f_tile, 1, ow_tile], step="output_tile", interchange=order
    )
    f_loop = loops[order.index(1)]
    f_parts = [f_loop]
    if d["F"] % f_tile:
        f_parts = list(s.peel(f_loop, step="peel_f"))
    convs = []
    for f_part in f_parts:
        tile_conv = s.match_generic(f_part, PACKED_CONV_LOOPS, step="match_block_conv")
        if d["OW"] % ow_tile == 0:
            convs.append((tile_conv, ow_tile))
            continue
        with s.at("pixel_tile_loop"):
            ow_loop = transform.GetParentOp(
                transform.AnyOpType.get(), tile_conv, op_name="scf.for"
            ).result
        main, rest = s.peel(ow_loop, step="peel_ow")
        for part, pixels in ((main, ow_tile), (rest, d["OW"] % ow_tile)):
            tile = s.match_generic(part, PACKED_CONV_LOOPS, step="match_tile_conv")
            convs.append((tile, pixels))
    s.canonicalize(function, step="static_tile_shapes")
    with s.at("hoist_filter_packing"):
        transform.apply_licm(s.match(function, ["scf.for"], step="match_loops"))
    return convs


def _vectorize_pixels(s: ScheduleBuilder, function: ir.Value, whole_f_blocks: bool) -> None:
    """Each pixel's op as acc[F_TILE] += x * w[F_TILE], its accumulator a register across
    the tap loops; the packings vectorized, the filter's one input channel at a time."""
    # Unit loops folded away: each pixel's accumulator is one rank-reduced slice of the
    # tile (not a slice of a slice), so that its final write lands in the tile in place.
    s.apply_patterns(
        function,
        "drop_unit_loops",
        structured.apply_patterns_linalg_fold_unit_extent_dims_via_slices,
    )
    s.apply_patterns(
        function,
        "merge_pixel_slices",
        ttensor.apply_patterns_tensor_merge_consecutive_insert_extract_slice,
    )
    # The filter's packing one input channel at a time (its F_TILE x KH x KW weights), so
    # that no vector spans the whole C x KH x KW x F_TILE block (at C=64 that block took
    # LLVM 90 s; at C=256 it did not finish). Where F has a partial block, the packing
    # stays whole: a tiled packing with padded rows does not vectorize.
    if whole_f_blocks:
        packing = s.match(function, ["linalg.pack"], step="match_filter_packing")
        s.tile(packing, [0, 1], step="filter_packing_per_channel")
    for name in ("linalg.unpack", "linalg.pack"):
        packing = s.match(function, [name], step="match_packing")
        with s.at("vectorize_packing"):
            structured.VectorizeOp(packing)
    # Each pixel's accumulator slice a value carried by the tap loops, then a register.
    s.hoist_invariant_subsets(function)
    s.vectorize_linalg(function, reductions_to_contract=False, minor_transfers=False)
    s.hoist_invariant_subsets(function)
    s.apply_patterns(
        function,
        "accumulators_into_tile",
        ttensor.apply_patterns_tensor_fold_tensor_subset_ops_into_vector_transfers,
    )
    s.allow_fma(function)


def strided_config(op: OpInfo, cpu: HostCPU) -> dict[str, int]:
    """The selector's config for this path: `strided_tile`, and `images_outer`."""
    ow_tile, f_tile = strided_tile(op, cpu)
    return {
        "OW_TILE": ow_tile,
        "F_TILE": f_tile,
        "C_TILE": 1,
        "OH_TILE": 1,
        "FLAT_ROWS": 0,
        "PACK_FILTER": 0,
        "IMAGES_OUTER": images_outer(op, cpu, f_tile),
    }


def strided_tile(op: OpInfo, cpu: HostCPU) -> tuple[int, int]:
    """The selector's (OW_TILE, F_TILE) for this path: STRIDED_PIXELS
    pixels x one vector of channels (measured on KernelBench 76 with 32 registers: 8 x 16
    f32 28 us, 16 x 16 29 us, 8 x 32 34 us, 1 x 16 36 us). Where the register file holds
    16 vectors (AVX2), half as many pixels x two vectors, where the pixels divide the row and
    the vectors the channels: the same accumulators, loaded with 6 loads per 8 FMAs instead
    of 9. On an AMD Zen 3, ResNet-18's convs at batch 8 against 8 x 8: 56x56x64 1.37x,
    stride 2 to 28x28x128 1.41x, 28x28x128 1.17x, the 7x7 stem 1.15x; with a partial tile
    at the row's end 14x14x256 0.96x (so those keep 8 x 8). Not measured on 32 registers."""
    dims, lanes = op.dims, cpu.lanes(op.element_type)
    pixels, vectors = STRIDED_PIXELS // 2, 2
    if (
        cpu.features.vector_registers <= 16
        and dims["OW"] % pixels == 0
        and dims["F"] % (vectors * lanes) == 0
    ):
        return pixels, vectors * lanes
    return min(STRIDED_PIXELS, dims["OW"]), min(lanes, dims["F"])


# Output pixels per image from which the strided path walks images outermost: the filter is
# then packed once per image, about 1 / (2 * OH * OW) of the image's FLOPs per weight (at
# 14 x 14 that cost 0.88x on an AMD Zen 3; at 28 x 28 and up it paid).
IMAGES_OUTER_PIXELS = 512


def images_outer_choices(op: OpInfo, lanes: int) -> list[int]:
    """IMAGES_OUTER candidates: 0, and 1 for a strided nchw conv of several images."""
    strided_path = op.attributes.get("nchw") and not unit_taps(op)
    return [0, 1] if strided_path and op.dims["N"] > 1 else [0]


def images_outer(op: OpInfo, cpu: HostCPU, f_tile: int) -> int:
    """1 where one image's input and one F block of the packed filter pass the L2 together:
    walked F blocks outermost, every block then re-reads all images' input from beyond the
    L2. Measured on an AMD Zen 3 (512 KiB L2) at batch 8 against F blocks outermost:
    ResNet-18's 56x56x64 conv 1.46x, its stride-2 conv to 28x28x128 2.31x, 28x28x128
    1.42x; its 14x14 and 7x7 convs fit (0.88x and 0.57x walked images outermost). The
    input's rows are counted at W's stride and dilation."""
    d, attributes = op.dims, op.attributes
    if 1 not in images_outer_choices(op, cpu.lanes(op.element_type)):
        return 0
    rows = (d["OH"] - 1) * attributes["stride_w"] + (d["KH"] - 1) * attributes["dilation_w"] + 1
    image = d["C"] * rows * attributes["IW"]
    filter_block = d["C"] * d["KH"] * d["KW"] * f_tile
    passes_l2 = (image + filter_block) * element_bytes(op.element_type) > cpu.features.l2_bytes
    return int(passes_l2 and d["OH"] * d["OW"] >= IMAGES_OUTER_PIXELS)
