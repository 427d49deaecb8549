"""The `convolution` family: 2-D convolutions in NHWC / HWCF layout (linalg.conv_2d_nhwc_hwcf,
nhwc.py, whose PACK_FILTER copies each channel block's filter slice contiguous once) and in
PyTorch's NCHW / FCHW layout (linalg.conv_2d_nchw_fchw, see `channels_first_schedule`:
unit stride along W, nchw_rows.py; strided, nchw_strided.py).

The output is tiled into one image row of OW_TILE x F_TILE outputs (fusing the zero fill), and
the filter window is walked one (kh, kw) tap and C_TILE channels at a time. A tile with unit
KH and OH is a 1-D convolution, which the vectorizer turns into outer products: broadcast an
input pixel, FMA with a row of filter weights. Accumulators stay in registers across the
filter loops because loop-invariant subsets are hoisted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import z3
from mlir import ir

from mlirtune.interfaces.dtype import element_bytes
from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.schedule import Config, Constraint, Domains, Knob, KnobVariables, Step
from mlirtune.schedules.builder import ScheduleBuilder
from mlirtune.schedules.convolution.flat_conv import flatten_conv_rows
from mlirtune.schedules.convolution.knob_values import ConvolutionKnobs
from mlirtune.schedules.convolution.nchw_flat import flat_channel_rows
from mlirtune.schedules.convolution.nchw_rows import NCHW_OP, channel_rows
from mlirtune.schedules.convolution.nchw_strided import (
    images_outer_choices,
    strided_channels_first,
    strided_config,
)
from mlirtune.schedules.convolution.nchw_tiles import (
    NCHW_ROWS,
    channel_row_tile,
    flat_rows_choices,
    flat_rows_considered,
    oh_tiles,
    plane_row,
    row_columns,
    unit_taps,
)
from mlirtune.schedules.convolution.nhwc import (
    convolution_schedule,
    pack_filter_choices,
    packs_filter,
    whole_tiles_constraint,
)
from mlirtune.schedules.convolution.root import convolution_flops, recognise_convolution
from mlirtune.schedules.cpu_model import (
    ACCUMULATOR_CYCLES,
    TILE_CYCLES,
    HostFamily,
    Traffic,
    ceil_div,
    fit,
    narrow_tails,
    outer_product,
    register_tile,
    seconds,
    step_cycles,
    tile_extents,
    vectors,
    whole_vectors,
)
from mlirtune.schedules.knobs import (
    Derivation,
    divisors,
    register_rows,
    threads_knob,
    vector_columns,
)
from mlirtune.targets.host_cpu import HostCPU

# FMAs one filter step (C_TILE channels of one tap) may unroll into.
STEP_FMAS = 64
# Shuffles per accumulator vector to transpose a strided nchw tile back to rows of pixels
# (a 16 x 16 f32 transpose is 64 two-source shuffles; an estimate, not measured).
TRANSPOSE_CYCLES = 4.0


def f_tile_default(op: OpInfo) -> int:
    """F_TILE spans 128 bytes (two AVX-512 registers), so the OW_TILE x F_TILE accumulators
    fit the register file for f32 and f64 alike; unit-stride nchw: NCHW_ROWS register rows;
    strided nchw: one 64-byte vector (each tile is transposed back to rows of pixels)."""
    if unit_taps(op):
        return NCHW_ROWS
    vector = 64 if op.attributes.get("nchw") else 128
    return vector // element_bytes(op.element_type)


def ow_tile_default(op: OpInfo) -> int:
    """Eight pixel rows; unit-stride nchw: one 64-byte vector of the contiguous output row."""
    return 64 // element_bytes(op.element_type) if unit_taps(op) else 8


def by_layout(nhwc: Derivation, nchw: Derivation) -> Derivation:
    """A knob's candidates by the register tile's orientation (unit-stride nchw swaps its
    rows and columns, see `pixel_rows`)."""
    return lambda op, lanes: (nhwc if pixel_rows(op) else nchw)(op, lanes)


def pixel_rows(op: OpInfo) -> bool:
    """Whether the register tile's rows are output pixels and its vectors output channels:
    NHWC, and NCHW strided along W (nchw_strided.py); unit-stride NCHW swaps them."""
    return not unit_taps(op)


def c_tiles(op: OpInfo, lanes: int) -> list[int]:
    """Divisors of C up to 16 (NHWC); nchw steps take one channel at a time."""
    return [1] if op.attributes.get("nchw") else divisors("C", 16)(op, lanes)


def channel_rows_config(op: OpInfo, cpu: HostCPU, *, flat: bool) -> Config:
    """The unit-stride nchw selector's config, computing the planes row by row or `flat`."""
    width, oh_tile, f_tile = channel_row_tile(op, cpu, flat)
    row = plane_row(op) if flat else op.dims["OW"]
    return {
        "OW_TILE": min(width * cpu.lanes(op.element_type), row),
        "F_TILE": f_tile,
        "C_TILE": 1,
        "OH_TILE": oh_tile,
        "FLAT_ROWS": int(flat),
        "PACK_FILTER": 0,
        "IMAGES_OUTER": 0,
    }


class Convolution(HostFamily[ConvolutionKnobs]):
    """A register tile of OW_TILE pixels x F_TILE channels (output pixels broadcast against
    filter rows), C_TILE input channels per filter-loop step."""

    name = "convolution"
    steps: ClassVar[Mapping[str, Step]] = {"flatten-conv-rows": flatten_conv_rows}
    description = "output-row tiles, per-tap 1-D decomposition, vectorized outer products"
    root_kinds = ("conv2d",)
    owns = ("conv2d",)
    knobs = (
        Knob(
            "OW_TILE",
            "output pixels of a row per register tile (nchw: the vector columns)",
            ow_tile_default,
            by_layout(register_rows("OW"), row_columns),
        ),
        Knob(
            "F_TILE",
            "output channels per register tile (nchw: the register rows)",
            f_tile_default,
            by_layout(vector_columns("F", (1, 2, 4)), register_rows("F")),
        ),
        Knob("C_TILE", "input channels per filter-loop step", 1, c_tiles),
        Knob("OH_TILE", "output rows per register tile (unit-stride nchw)", 1, oh_tiles),
        Knob(
            "FLAT_ROWS",
            "1: each output plane computed as one row over the input's width (unit-stride "
            "nchw, nchw_flat.py)",
            0,
            flat_rows_choices,
            minimum=0,
            alternatives=(0, 1),
        ),
        Knob(
            "PACK_FILTER",
            "1: each F_TILE slice of the filter copied contiguous once, the pixel tiles "
            "inside (NHWC, nhwc.py)",
            0,
            pack_filter_choices,
            minimum=0,
            alternatives=(0, 1),
        ),
        Knob(
            "IMAGES_OUTER",
            "1: images outside the output-channel blocks, the filter packed per image "
            "(strided nchw, nchw_strided.py)",
            0,
            images_outer_choices,
            minimum=0,
            alternatives=(0, 1),
        ),
        threads_knob(),
    )
    values_type = ConvolutionKnobs

    def recognise(
        self, op: ir.Operation, loops: list[int], dtypes: tuple[str, ...]
    ) -> OpInfo | None:
        return recognise_convolution(op, loops, dtypes)

    def root_flops(self, op: OpInfo) -> int:
        return convolution_flops(op)

    def summed_terms(self, op: OpInfo) -> int:
        return op.dims["C"] * op.dims["KH"] * op.dims["KW"]

    def build(self, op: OpInfo, parameters: Config) -> ir.Module:
        knobs = self.knob_values(op, parameters)
        if op.attributes.get("nchw"):
            return channels_first_schedule(op, knobs)
        return convolution_schedule(
            loop_sizes=list(op.dims.values()),
            knobs=knobs,
            dtypes=op.dtypes,
            padded=bool(op.attributes.get("padded")),
        )

    def select_on(self, op: OpInfo, cpu: HostCPU) -> Config:
        """An OW_TILE x F_TILE register tile like the contraction's MR x NR (output pixels
        broadcast against filter rows), and C_TILE channels per filter step: a divisor of C
        up to the vector width, so each step's unrolled FMAs stay within one L1 line of
        input channels per pixel."""
        dims = op.dims
        if op.attributes.get("nchw") and not unit_taps(op):
            return strided_config(op, cpu)
        if op.attributes.get("nchw"):
            # F_TILE channels x OH_TILE output rows of whole vectors (the row's tail split
            # off in pieces, nchw_rows.row_pieces), or of a plane's flat row where a row ends
            # in a partial vector and the cost model finds the flat row cheaper (its crop
            # re-reads and writes the output: not on large planes of few channels).
            rows = channel_rows_config(op, cpu, flat=False)
            if not flat_rows_considered(op, cpu):
                return rows
            flat = channel_rows_config(op, cpu, flat=True)
            return self._cheaper(op, cpu, flat, rows)
        ow_tile, f_tile = register_tile(cpu, dims["OW"], dims["F"], op.element_type)
        line_elements = 64 // element_bytes(op.element_type)
        c_tile = fit(dims["C"], min(4, line_elements), high=1.0)
        config = {
            "OW_TILE": ow_tile,
            "F_TILE": f_tile,
            "C_TILE": c_tile,
            "OH_TILE": 1,
            "FLAT_ROWS": 0,
            "PACK_FILTER": 0,
            "IMAGES_OUTER": 0,
        }
        # The filter packed where it can be and the cost model finds it cheaper (nhwc.py).
        packed = config | {"PACK_FILTER": 1}
        if not packs_filter(list(dims.values()), self.knob_values(op, packed)):
            return config
        return self._cheaper(op, cpu, packed, config)

    def _cheaper(self, op: OpInfo, cpu: HostCPU, first: Config, second: Config) -> Config:
        """`first` where the cost model finds it cheaper than `second`, else `second`."""
        costs = [self.cost_on(op, cpu, self.knob_values(op, c)) for c in (first, second)]
        return first if costs[0] < costs[1] else second

    def constraints_on(
        self, op: OpInfo, cpu: HostCPU, knobs: KnobVariables, domains: Domains
    ) -> list[Constraint]:
        f = cpu.features
        lanes = cpu.lanes(op.element_type)
        d = op.dims
        if op.attributes.get("nchw"):
            rows, columns = ("OW_TILE", "F_TILE") if pixel_rows(op) else ("F_TILE", "OW_TILE")
            dim = d["F"] if pixel_rows(op) else d["OW"]
            shared = [
                whole_vectors(columns, dim, knobs, lanes),
                *outer_product(rows, columns, knobs, domains, lanes, cpu),
                Constraint(
                    "c_tile_divides_c",
                    f"{d['C']} % C_TILE == 0: whole channel steps, no peeled remainder",
                    d["C"] % knobs["C_TILE"] == 0,
                ),
            ]
            if pixel_rows(op):
                return shared
            v = vectors(knobs["OW_TILE"], lanes)
            flat = knobs["FLAT_ROWS"] == 1
            split = [  # the flat path's threads take F / THREADS channels each
                Constraint(
                    "flat_rows_split_channels",
                    f"FLAT_ROWS == 0 with {cpu.threads} threads: {d['F']} output channels do "
                    "not split evenly over them",
                    z3.Not(flat),
                )
            ]
            return [
                *shared,
                *(split if d["F"] % cpu.threads else []),
                Constraint(
                    "ow_tile_within_row",
                    f"FLAT_ROWS == 1 or OW_TILE <= {d['OW']}: a tile wider than the output "
                    "row needs the plane computed as one flat row",
                    z3.Or(flat, knobs["OW_TILE"] <= d["OW"]),
                ),
                Constraint(
                    "flat_rows_one_row",
                    "FLAT_ROWS == 0 or OH_TILE == 1: a flat row is the whole plane",
                    z3.Or(z3.Not(flat), knobs["OH_TILE"] == 1),
                ),
                Constraint(
                    "oh_tile_registers",
                    f"OH_TILE*(F_TILE*v + v) + 1 <= {f.vector_registers} with v = "
                    f"ceil(OW_TILE/{lanes}): every row's accumulators and loaded input vectors "
                    "and the broadcast fit the registers",
                    knobs["OH_TILE"] * (knobs["F_TILE"] * v + v) + 1 <= f.vector_registers,
                ),
                Constraint(
                    "oh_tile_divides_oh",
                    f"{d['OH']} % OH_TILE == 0: whole row tiles",
                    d["OH"] % knobs["OH_TILE"] == 0,
                ),
            ]
        v = vectors(knobs["F_TILE"], lanes)
        return [
            whole_vectors("F_TILE", d["F"], knobs, lanes),
            whole_tiles_constraint(op, knobs),
            *outer_product("OW_TILE", "F_TILE", knobs, domains, lanes, cpu),
            narrow_tails("f_tile_tail", f"{d['F']} % F_TILE", [d["F"] % knobs["F_TILE"]], lanes),
            Constraint(
                "c_tile_divides_c",
                f"{d['C']} % C_TILE == 0: whole channel steps, no peeled remainder",
                d["C"] % knobs["C_TILE"] == 0,
            ),
            Constraint(
                "unrolled_step",
                f"C_TILE*OW_TILE*ceil(F_TILE/{lanes}) <= {STEP_FMAS}: a filter step unrolls "
                f"into at most {STEP_FMAS} FMAs",
                knobs["C_TILE"] * knobs["OW_TILE"] * v <= STEP_FMAS,
            ),
        ]

    def cost_on(self, op: OpInfo, cpu: HostCPU, knobs: ConvolutionKnobs) -> float:
        """Every register tile (partial ones at their own width; OH_TILE rows of tiles as
        one taller tile; a flat plane's tiles as one row per image) runs KH*KW*C
        outer-product steps with loop control shared by C_TILE channels, and loads and
        stores its accumulators once (strided nchw: and transposes them, TRANSPOSE_CYCLES a
        vector); the filter slice of a tile is re-read by every pixel tile and the input
        rows by every channel tile, from wherever they stay; a flat plane's crop reads and
        writes the output once more."""
        d = op.dims
        size = element_bytes(op.element_type)
        lanes = cpu.lanes(op.element_type)
        flat = bool(knobs.flat_rows)
        row = plane_row(op) if flat else d["OW"]  # a flat plane is one row per image
        ow_tile, f_tile = min(knobs.ow_tile, row), min(knobs.f_tile, d["F"])
        c_tile = min(knobs.c_tile, d["C"])
        cols = tile_extents(row, row, ow_tile)
        chans = tile_extents(d["F"], d["F"], f_tile)
        if not pixel_rows(op):  # rows of output channels, columns of pixels
            cols, chans = chans, cols
        oh_tile = knobs.oh_tile  # rows of a register tile, sharing broadcasts
        images = d["N"] if flat else d["N"] * d["OH"] // oh_tile
        steps = d["KH"] * d["KW"] * d["C"]
        tiles = [(r * oh_tile, c, rn * cn) for r, rn in cols.items() for c, cn in chans.items()]
        compute = steps * sum(
            n * step_cycles(r, c, cpu, op.element_type, c_tile) for r, c, n in tiles
        )
        accumulators = sum(n * r * ceil_div(c, lanes) for r, c, n in tiles)
        pixel_tiles, channel_tiles = sum(cols.values()), sum(chans.values())
        transposed = TRANSPOSE_CYCLES if op.attributes.get("nchw") and pixel_rows(op) else 0.0
        per_vector = 2 * ACCUMULATOR_CYCLES + transposed
        overhead = pixel_tiles * channel_tiles * TILE_CYCLES + per_vector * accumulators
        filter_bytes = steps * d["F"] * size
        input_row = (d["OW"] + d["KW"] - 1) * d["C"] * size
        traffic = Traffic(cpu)
        if flat:  # the crop reads and writes the output once more
            output = d["F"] * d["OH"] * d["OW"] * size
            traffic.add(2 * output, output)
        if packs_filter(list(d.values()), knobs):
            # Each channel block's slice is copied once (from wherever the whole filter
            # stays) and re-read from its buffer by every pixel tile; the input is re-read
            # by every channel block, the whole image in between.
            traffic.add(filter_bytes / images, filter_bytes)
            traffic.add(filter_bytes * pixel_tiles, steps * f_tile * size)
            image = d["N"] * (d["OH"] + d["KH"] - 1) * input_row
            traffic.add(input_row * d["KH"] * channel_tiles, image)
        else:  # NHWC: the pixel tiles outside the channel tiles read all of it (nchw: a slice)
            read = steps * (f_tile if op.attributes.get("nchw") else d["F"]) * size
            traffic.add(filter_bytes * pixel_tiles, read)
            traffic.add(input_row * d["KH"] * channel_tiles, input_row * d["KH"])
        cycles = max(compute, traffic.cycles()) + overhead
        return seconds(images * cycles, cpu)


CONVOLUTION = Convolution()


def channels_first_schedule(
    op: OpInfo, knobs: ConvolutionKnobs, name: str = "convolution"
) -> ir.Module:
    """Schedule a `linalg.conv_2d_nchw_fchw` (loops N, F, OH, OW, C, KH, KW). A padded input
    is materialised first (fill + row copies). With unit stride along W, channel x row tiles
    of broadcast filter values times contiguous input rows (nchw_rows.py); strided along W,
    vectors along F (nchw_strided.py)."""
    with ScheduleBuilder(name) as s:
        function = s.match(s.root, ["func.func"], step="match_function")
        if op.attributes.get("padded"):
            s.materialize_padding(function, 4, op.attributes["IW"], op.attributes["pad"])
        if knobs.flat_rows:
            flat_channel_rows(s, op, function, knobs)
            return s.module
        conv = s.match(s.root, [NCHW_OP], step="match_conv")
        if not unit_taps(op):
            strided_channels_first(s, op, conv, function, knobs)
            return s.module
        channel_rows(s, op, conv, function, knobs)
    return s.module
