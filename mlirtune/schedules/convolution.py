"""Default schedule for 2-D convolutions in NHWC / HWCF layout (linalg.conv_2d_nhwc_hwcf).

The output is tiled into one image row of OW_TILE x F_TILE outputs (fusing the zero fill), and
the filter window is walked one (kh, kw) tap and C_TILE channels at a time. A tile with unit
KH and OH is a 1-D convolution, which the vectorizer turns into outer products: broadcast an
input pixel, FMA with a row of filter weights. Accumulators stay in registers across the
filter loops because loop-invariant subsets are hoisted.
"""

from __future__ import annotations

from collections.abc import Sequence

from mlir import ir
from mlir.dialects.transform import structured

from mlirtune.schedules.builder import ScheduleBuilder
from mlirtune.schedules.knobs import Knob, divisors, register_rows, vector_columns

CONV_OP = "linalg.conv_2d_nhwc_hwcf"

# OW_TILE x F_TILE outputs per register tile; C_TILE input channels per filter-loop step.
CONVOLUTION_PARAMETERS = {"OW_TILE": 8, "F_TILE": 32, "C_TILE": 1}
CONVOLUTION_KNOBS = (
    Knob("OW_TILE", "output pixels of a row per register tile", register_rows("OW")),
    Knob("F_TILE", "output channels per register tile", vector_columns("F", (1, 2, 4))),
    Knob("C_TILE", "input channels per filter-loop step", divisors("C", 16)),
)


def convolution_parameters(itemsize: int) -> dict[str, int]:
    """Defaults for an element size in bytes: F_TILE spans 128 bytes (two AVX-512 registers),
    so the OW_TILE x F_TILE accumulators fit the register file for f32 and f64 alike."""
    return {**CONVOLUTION_PARAMETERS, "F_TILE": 128 // itemsize}


def convolution_schedule(
    *, loop_sizes: Sequence[int], parameters: dict[str, int], name: str = "convolution"
) -> ir.Module:
    """Schedule for a payload whose last op is a `linalg.conv_2d_nhwc_hwcf` with loop sizes
    `loop_sizes` (N, OH, OW, F, KH, KW, C); tile sizes are clamped to those sizes."""
    _, _, ow, f, _, _, c = loop_sizes
    p = parameters
    ow_tile, f_tile, c_tile = min(p["OW_TILE"], ow), min(p["F_TILE"], f), min(p["C_TILE"], c)
    with ScheduleBuilder(name) as s:
        conv = s.match(s.root, [CONV_OP], step="match_conv")
        _, loops = s.fuse_with_loops(conv, [1, 1, ow_tile, f_tile, 0, 0, 0], step="output_tile")
        # Peel partial tiles (innermost loop first, so the outer peel clones both halves):
        # every tile then has a static shape and vectorizes.
        _, _, ow_loop, f_loop = loops
        if f % f_tile:
            s.peel(f_loop, step="peel_f")
        if ow % ow_tile:
            s.peel(ow_loop, step="peel_ow")
        function = s.match(s.root, ["func.func"], step="match_function")
        s.canonicalize(function, step="static_tile_shapes")
        conv = s.match(s.root, [CONV_OP], step="match_conv_tiles")
        conv, filter_loops = s.tile(conv, [0, 0, 0, 0, 1, 1, c_tile], step="filter_tile")
        with s.at("decompose_to_1d"):
            structured.DecomposeOp(conv)
        function = s.match(s.root, ["func.func"], step="match_function_again")
        if c % c_tile:
            s.peel(filter_loops[-1], step="peel_c")
            s.canonicalize(function, step="static_channel_tiles")
        function = s.vectorize_function(function)
        s.drop_leading_unit_dims(function)
        s.hoist_invariant_subsets(function)
        s.lower_vectors(function)
    return s.module
