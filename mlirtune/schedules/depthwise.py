"""The `depthwise` family: channels-first depthwise 2-D convolutions
(linalg.depthwise_conv_2d_nchw_chw).

A padded input is materialised once (ScheduleBuilder.materialize_padding). The output is
tiled into C_TILE channels x OH_TILE rows x OW_TILE pixels of a row (contiguous in NCHW),
fusing the zero fill (or an element-wise epilogue is tiled so, the conv fused into its
tiles), and each tile is split into one channel and one filter tap (kh, kw) per step. MLIR
has no 1-D decomposition or convolution vectorizer for the channels-first depthwise op, so
each step is generalized and its unit loops folded away: what is left is an element-wise
multiply-add of OH_TILE input rows (shifted by the tap) with the tap's weight, which
vectorizes along W. The accumulators stay in registers across the taps because
loop-invariant subsets are hoisted. A strided dim has no contiguous form: a step covers one
output along it (scalar along W for a W stride; an imported convolution strided along W
arrives as convolutions of W stride one over the phases of its rows, see
mlirtune.torch.to_linalg).
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import linalg
from mlir.dialects.transform import structured

from mlirtune.interfaces.dtype import element_bytes
from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.schedule import (
    Config,
    Constraint,
    Domains,
    Knob,
    KnobValues,
    KnobVariables,
)
from mlirtune.ir.roots import is_padded, padding, stored_epilogue
from mlirtune.schedules.builder import ScheduleBuilder
from mlirtune.schedules.convolution.epilogue import has_epilogue
from mlirtune.schedules.cpu_model import (
    LOAD_PORTS,
    TILE_CYCLES,
    HostFamily,
    Traffic,
    ceil_div,
    fit,
    seconds,
    tile_extents,
    vectors,
    whole_vectors,
)
from mlirtune.schedules.knobs import (
    powers_of_two,
    register_rows,
    threads_knob,
    vector_columns,
)
from mlirtune.targets.host_cpu import HostCPU

DEPTHWISE_OP = "linalg.depthwise_conv_2d_nchw_chw"
# The op's loop (N, OH, OW, C, KH, KW) of each loop of an element-wise epilogue (N, C, OH, OW).
EPILOGUE_LOOPS = [0, 3, 1, 2]
# Output rows per tile the selector aims for: each tap's weight is broadcast once for them.
TARGET_ROWS = 4


def row_tiles(op: OpInfo, lanes: int) -> list[int]:
    """OW_TILE candidates: one, two or four whole vectors, and the whole row when it is at
    most four vectors long (what the selector picks for a short row)."""
    ow = op.dims["OW"]
    tiles = vector_columns("OW", (1, 2, 4))(op, lanes)
    return sorted({*tiles, ow}) if ow <= 4 * lanes else list(tiles)


@dataclass(frozen=True)
class DepthwiseKnobs(KnobValues):
    """A tile of `c_tile` channels x `oh_tile` output rows x `ow_tile` outputs along W;
    `threads` the tiles are spread over."""

    ow_tile: int
    oh_tile: int
    c_tile: int
    threads: int


class Depthwise(HostFamily[DepthwiseKnobs]):
    """Register tiles of OH_TILE rows x OW_TILE pixels of one channel, one filter tap per
    step: broadcast the weight, FMA it with the shifted input rows."""

    name = "depthwise"
    description = "channel x output-row tiles, one filter tap per step, vectorized along W"
    root_kinds = ("depthwise",)
    owns = ("depthwise",)
    claims = ("linalg.depthwise_conv_2d_nchw_chw",)

    def recognise(
        self, op: ir.Operation, loops: list[int], dtypes: tuple[str, ...]
    ) -> OpInfo | None:
        return recognise_depthwise(op, loops, dtypes)

    def root_flops(self, op: OpInfo) -> int:
        """2 per multiply-add."""
        d = op.dims
        return 2 * d["N"] * d["C"] * d["OH"] * d["OW"] * d["KH"] * d["KW"]

    def summed_terms(self, op: OpInfo) -> int:
        return op.dims["KH"] * op.dims["KW"]

    knobs = (
        Knob("OW_TILE", "outputs along W per tile", 16, row_tiles),
        Knob("OH_TILE", "output rows per tile", 1, register_rows("OH")),
        Knob("C_TILE", "channels per tile", 1, powers_of_two("C", 8)),
        threads_knob(),
    )
    values_type = DepthwiseKnobs

    def build(self, op: OpInfo, parameters: Config) -> ir.Module:
        return depthwise_schedule(op, self.knob_values(op, parameters))

    def select_on(self, op: OpInfo, cpu: HostCPU) -> Config:
        """OW_TILE two whole vectors of a row (or all of a row shorter than a vector),
        OH_TILE rows so that the accumulators fill at most half the vector registers (at most
        TARGET_ROWS; one with an H stride, whose rows are computed one at a time anyway), one
        channel per tile (channels share nothing)."""
        lanes = cpu.lanes(op.element_type)
        ow, oh = op.dims["OW"], op.dims["OH"]
        ow_tile = fit(ow, 2 * lanes, step=min(lanes, ow))
        if ow_tile >= lanes:  # whole vectors: a masked tail on every row tile costs 4x
            ow_tile -= ow_tile % lanes
        budget = cpu.features.vector_registers // 2
        rows = min(TARGET_ROWS, max(1, budget // ceil_div(ow_tile, lanes)))
        oh_tile = 1 if op.attributes.get("stride_h", 1) > 1 else fit(oh, rows)
        return {"OW_TILE": ow_tile, "OH_TILE": min(oh_tile, rows), "C_TILE": 1}

    def constraints_on(
        self, op: OpInfo, cpu: HostCPU, knobs: KnobVariables, domains: Domains
    ) -> list[Constraint]:
        lanes = cpu.lanes(op.element_type)
        budget = cpu.features.vector_registers // 2
        return [
            whole_vectors("OW_TILE", op.dims["OW"], knobs, lanes),
            Constraint(
                "register_budget",
                f"OH_TILE*ceil(OW_TILE/{lanes}) <= {budget}: a tile's accumulators and the "
                "input rows they read fit the vector registers",
                knobs["OH_TILE"] * vectors(knobs["OW_TILE"], lanes) <= budget,
            ),
        ]

    def cost_on(self, op: OpInfo, cpu: HostCPU, knobs: DepthwiseKnobs) -> float:
        """Roofline of the taps' vector loads and FMAs (a partial vector costs a whole one;
        a W stride makes every output its own step) against the bytes read and written,
        plus set-up cycles per tile."""
        d = op.dims
        lanes = cpu.lanes(op.element_type)
        size = element_bytes(op.element_type)
        ow_tile = min(knobs.ow_tile, d["OW"])
        oh_tile, c_tile = min(knobs.oh_tile, d["OH"]), min(knobs.c_tile, d["C"])
        taps = d["KH"] * d["KW"]
        if op.attributes.get("stride", 1) > 1:
            steps = d["OW"]
        else:
            cols = tile_extents(d["OW"], d["OW"], ow_tile)
            steps = sum(n * ceil_div(c, lanes) for c, n in cols.items())
        loads = steps * d["N"] * d["C"] * d["OH"] * taps
        tiles = (
            ceil_div(d["OW"], ow_tile) * ceil_div(d["OH"], oh_tile) * ceil_div(d["C"], c_tile)
        ) * d["N"]
        rows = d["N"] * d["C"] * d["OH"]
        nbytes = rows * (d["IW"] * op.attributes.get("stride_h", 1) + d["OW"]) * size
        traffic = Traffic(cpu)
        traffic.add(nbytes, nbytes)
        return seconds(max(loads / LOAD_PORTS, traffic.cycles()) + tiles * TILE_CYCLES, cpu)


DEPTHWISE = Depthwise()


def depthwise_schedule(op: OpInfo, knobs: DepthwiseKnobs, name: str = "depthwise") -> ir.Module:
    """Schedule a depthwise payload whose root is `op` (see the module doc)."""
    d, attrs = op.dims, op.attributes
    ow_tile, oh_tile = min(knobs.ow_tile, d["OW"]), min(knobs.oh_tile, d["OH"])
    c_tile = min(knobs.c_tile, d["C"])
    with ScheduleBuilder(name) as s:
        function = s.match(s.root, ["func.func"], step="match_function")
        if attrs.get("padded", attrs.get("pad")):  # H-only padding has no W `pad`
            row = d["IW"] - attrs["pad"] - attrs.get("pad_after", attrs["pad"])
            pads = s.match(function, ["tensor.pad"], step="match_pad")
            s.materialize_pad(pads, 4, d["IW"], row=row)
        # Loops (n, oh, ow, c, kh, kw); tiles visited as n, c, oh, ow.
        sizes = [1, oh_tile, ow_tile, c_tile, 0, 0]
        extents = {1: d["OH"], 2: d["OW"], 3: d["C"]}
        _tile_output(s, sizes, extents, knobs.threads, has_epilogue(op))
        function = s.match(s.root, ["func.func"], step="match_function_tiled")
        s.canonicalize(function, step="static_tile_shapes")
        # One channel and one tap per step; a strided dim one output per step.
        steps = [1, int(attrs.get("stride_h", 1) > 1), int(attrs.get("stride", 1) > 1), 1, 1, 1]
        convs = s.match(function, [DEPTHWISE_OP], step="match_tiles")
        convs, _ = s.tile(convs, steps, step="taps")
        with s.at("generalize_taps"):
            structured.GeneralizeOp(convs)
        s.apply_patterns(
            function,
            "fold_unit_dims",
            structured.apply_patterns_linalg_fold_unit_extent_dims_via_slices,
        )
        s.vectorize_linalg(function, reductions_to_contract=False)
        s.drop_leading_unit_dims(function)
        s.hoist_invariant_subsets(function)
        s.allow_fma(function)
    return s.module


def _tile_output(
    s: ScheduleBuilder, sizes: list[int], extents: dict[int, int], threads: int, epilogue: bool
):
    """Tile the depthwise op by `sizes` (fusing the zero fill), its tile loops ordered
    channels, rows, columns; peel the partial tiles (`extents`: loop -> size). With threads,
    N and whole channel tiles become one scf.forall first. With an element-wise
    `epilogue` (convolution/epilogue.py), its tiles are the ones cut, the depthwise op
    fused into them: loops N, C, OH, OW, which EPILOGUE_LOOPS maps to the op's."""
    order = [0, 3, 1, 2, 4, 5]
    if epilogue:
        anchor = s.last_op(step="match_epilogue")
    else:
        anchor = s.match(s.root, [DEPTHWISE_OP], step="match_depthwise")

    def anchor_sizes(sizes: list[int]) -> list[int]:
        return [sizes[loop] for loop in EPILOGUE_LOOPS] if epilogue else sizes

    if threads > 1:
        whole = extents[3] % sizes[3] == 0
        parallel = [1, 0, 0, sizes[3] if whole else 0, 0, 0]
        anchor = s.fuse_with_loops(
            anchor, anchor_sizes(parallel), step="parallel_tiles", parallel=True
        )[0]
        sizes = [0, sizes[1], sizes[2], 0 if whole else sizes[3], 0, 0]
    tiled = [dim for dim in order if sizes[dim]]
    interchange = None if epilogue else order  # the epilogue's loops are in that order
    _, loops = s.fuse_with_loops(
        anchor, anchor_sizes(sizes), step="output_tiles", interchange=interchange
    )
    # Innermost first, so an outer peel clones the peeled inner loops too.
    for dim, loop_handle in reversed(list(zip(tiled, loops, strict=True))):
        if dim in extents and extents[dim] % sizes[dim]:
            s.peel(loop_handle, step="peel_partial_tiles")


def recognise_depthwise(op: ir.Operation, loops: list[int], dtypes: tuple[str, ...]) -> OpInfo:
    """A channels-first depthwise conv: loops N, OH, OW, C, KH, KW in the op's order, IW the
    (padded) input row; stride and dilation per dim, `pad` the input row's padding (and
    `pad_after` its padding after the row, where that differs)."""
    dims = dict(zip(("N", "OH", "OW", "C", "KH", "KW"), loops, strict=True))
    dims["IW"] = ir.ShapedType(op.operands[0].type).shape[-1]
    conv = linalg.infer_convolution_dimensions(op)
    (stride_h, stride_w), (dilation_h, dilation_w) = list(conv.strides), list(conv.dilations)
    attrs = {
        "stride_h": int(stride_h),
        "stride": int(stride_w),
        "dilation_h": int(dilation_h),
        "dilation": int(dilation_w),
        "pad": padding(op.operands[0]),
        "padded": int(is_padded(op.operands[0])),
    }
    after = padding(op.operands[0], "static_high")
    if after != attrs["pad"]:  # a phase of a strided convolution's row (torch.to_linalg)
        attrs["pad_after"] = after
    if stored_epilogue(op):
        attrs["epilogue"] = 1  # element-wise ops after it, tiled with it (`_tile_output`)
    return OpInfo("depthwise", dims, dtypes, op.name, attrs)
