"""The `pooling` family: channels-first max / sum pooling (linalg.pooling_ncw_* and
pooling_nchw_*, and the separable 3-D form whose depth stage is a pooling_nwc_*).

A padded input is materialised once (ScheduleBuilder.materialize_pad; in 3-D each stage's
own): tensor.pad becomes a fill of the padded buffer and a linalg.copy of the input into
it, both tiled into rows and vectorized. The output is tiled into C_TILE channels x one
row x OW_TILE pixels along the innermost spatial dim (contiguous in NCHW), fusing the fill
and, for average pooling, the pooled sums into the divide. A 2-D tile is split into one
window row per step and decomposed into a 1-D pool, which MLIR's vectorizer unrolls over
the window: strided windows become strided reads of the input row. The depth stage of a
3-D pool is tiled into COLS contiguous (h, w) outputs of one plane.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import linalg
from mlir.dialects.transform import structured
from mlir.dialects.transform import vector as tvector

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
from mlirtune.ir.roots import is_padded, padding
from mlirtune.schedules.builder import ScheduleBuilder
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
from mlirtune.schedules.knobs import powers_of_two, threads_knob, vector_columns
from mlirtune.targets.host_cpu import HostCPU

# Elements of a padded row filled or copied per vector step.
ROW_CHUNK = 64


# Channels a strided 1-D max pool's tile vectorizes across (see Pooling.select_on).
CHANNELS = 8


def strided(op: OpInfo) -> bool:
    """Whether the pool's window moves more than one element along W per output."""
    return op.attributes.get("stride", 1) > 1


def across_channels(op: OpInfo) -> bool:
    """A 1-D max pool with a strided window: worth vectorizing across channels."""
    return op.attributes["spatial"] == 1 and strided(op) and not op.op_name.endswith("_sum")


def plane(op: OpInfo) -> int:
    """Outputs of one (h, w) plane: the contiguous columns of a 3-D pool's depth stage."""
    return op.dims.get("OH", 1) * op.dims["OW"]


def depth_columns(op: OpInfo, lanes: int) -> list[int]:
    """COLS candidates: whole vectors up to a plane, only where there is a depth stage."""
    if not op.attributes.get("then_pool"):
        return [64]
    size = plane(op)
    return [v * lanes for v in (1, 2, 4, 8) if v * lanes <= size] + ([size] if size < lanes else [])


@dataclass(frozen=True)
class PoolingKnobs(KnobValues):
    """A tile of `c_tile` channel rows x `ow_tile` outputs along the innermost spatial dim;
    `cols` (h, w) outputs per tile of a 3-D pool's depth stage; `threads` the tiles are
    spread over."""

    ow_tile: int
    c_tile: int
    cols: int
    threads: int


class Pooling(HostFamily[PoolingKnobs]):
    """Vector tiles of C_TILE channel rows x OW_TILE outputs, each a max or sum over the
    window unrolled into strided row reads."""

    name = "pooling"
    description = "channel x output-row tiles, window rows as 1-D pools, vectorized along W"
    root_kinds = ("pooling",)
    owns = ("pooling",)
    claims = ("linalg.pooling_",)

    def recognise(
        self, op: ir.Operation, loops: list[int], dtypes: tuple[str, ...]
    ) -> OpInfo | None:
        return recognise_pooling(op, loops, dtypes)

    def root_flops(self, op: OpInfo) -> int:
        """One per element of every window."""
        d = op.dims
        return d["N"] * d["C"] * d.get("OH", 1) * d["OW"] * d.get("KH", 1) * d["KW"]

    def summed_terms(self, op: OpInfo) -> int:
        return op.dims.get("KH", 1) * op.dims["KW"]

    knobs = (
        Knob(
            "OW_TILE",
            "outputs along the innermost spatial dim per tile",
            16,
            vector_columns("OW", (1, 2, 4)),
        ),
        Knob("C_TILE", "channels per tile", 1, powers_of_two("C", 8)),
        Knob("COLS", "(h, w) outputs per tile of a 3-D pool's depth stage", 64, depth_columns),
        threads_knob(),
    )
    values_type = PoolingKnobs

    def build(self, op: OpInfo, parameters: Config) -> ir.Module:
        return pooling_schedule(op, self.knob_values(op, parameters))

    def select_on(self, op: OpInfo, cpu: HostCPU) -> Config:
        """OW_TILE spans up to two vectors of a row (half of one for strided windows), one
        channel per tile (each channel is its own row, so more channels only unroll more
        independent chains); COLS four vectors of a plane.
        A strided 1-D max pool takes CHANNELS channels of two vectors of outputs instead: the
        vectorizer then reads a [C, W] block transposed to [W, C] and takes each window
        element as a vector across the channels, rather than a scalar of one row (a sum
        pays less for the scalar form than for the transposition)."""
        lanes = cpu.lanes(op.element_type)
        ow = op.dims["OW"]
        widest = _widest_tile(op, lanes)
        ow_tile = fit(ow, widest, step=min(lanes, widest, ow))
        cols = fit(plane(op), 4 * lanes, step=min(lanes, plane(op)))
        c_tile = 1
        if across_channels(op):
            c_tile = min(CHANNELS, 1 << (op.dims["C"].bit_length() - 1))
            budget = cpu.features.vector_registers // 2  # as the register_budget constraint
            ow_tile = min(ow, lanes * max(1, min(2, budget // c_tile)))
        return {"OW_TILE": ow_tile, "C_TILE": c_tile, "COLS": cols}

    def constraints_on(
        self, op: OpInfo, cpu: HostCPU, knobs: KnobVariables, domains: Domains
    ) -> list[Constraint]:
        lanes = cpu.lanes(op.element_type)
        budget = cpu.features.vector_registers // 2
        constraints = [
            whole_vectors("OW_TILE", op.dims["OW"], knobs, lanes),
            Constraint(
                "register_budget",
                f"C_TILE*ceil(OW_TILE/{lanes}) <= {budget}: a tile's accumulators and the "
                "input rows they read fit the vector registers",
                knobs["C_TILE"] * vectors(knobs["OW_TILE"], lanes) <= budget,
            ),
        ]
        if strided(op) and not across_channels(op):
            constraints.append(
                Constraint(
                    "strided_tile_in_one_vector",
                    f"OW_TILE <= {lanes}: a strided window's outputs are gathered one by one "
                    "from the row it reads, and past one vector LLVM builds them in memory "
                    "(3 x 3, stride 2, 8 x 64 x 114 x 114 on an AMD Zen 5: 2.1 ms at one "
                    "vector, 9.3 ms at two; AVX2 4.2 and 33 ms)",
                    knobs["OW_TILE"] <= lanes,
                )
            )
        if op.attributes.get("then_pool"):
            constraints.append(whole_vectors("COLS", plane(op), knobs, lanes))
        return constraints

    def cost_on(self, op: OpInfo, cpu: HostCPU, knobs: PoolingKnobs) -> float:
        """Roofline of the window's vector loads (a partial vector costs a whole one, a
        strided read `stride` vectors) against the bytes read and written, plus set-up
        cycles per tile."""
        d = op.dims
        lanes = cpu.lanes(op.element_type)
        size = element_bytes(op.element_type)
        ow_tile, c_tile = min(knobs.ow_tile, d["OW"]), min(knobs.c_tile, d["C"])
        cols = tile_extents(d["OW"], d["OW"], ow_tile)
        rows = d["N"] * d["C"] * d.get("OH", 1)
        window = d.get("KH", 1) * d["KW"]
        stride = op.attributes.get("stride", 1)
        loads = sum(n * ceil_div(c, lanes) for c, n in cols.items()) * rows * window * stride
        tiles = sum(cols.values()) * ceil_div(d["N"] * d["C"], c_tile) * d.get("OH", 1)
        nbytes = rows * (d["IW"] * d.get("KH", 1) + d["OW"]) * size
        traffic = Traffic(cpu)
        traffic.add(nbytes, nbytes)
        return seconds(max(loads / LOAD_PORTS, traffic.cycles()) + tiles * TILE_CYCLES, cpu)


POOLING = Pooling()


def _widest_tile(op: OpInfo, lanes: int) -> int:
    """The widest OW_TILE the selector takes: two vectors, and half of one for a strided
    window, whose outputs are gathered one by one (the strided_tile_in_one_vector
    constraint). 3 x 3 windows of stride 2 on an AMD Zen 5, AVX-512 (AVX2) tiles of 4, 8
    and 16 outputs: 8 x 64 x 114 x 114 3.4, 2.3 and 2.1 ms (2.9 and 4.1 ms at 4 and 8);
    8 x 256 x 27 x 27 0.67, 0.40 and 0.49 ms (1.01 and 0.97 ms)."""
    return max(1, lanes // 2) if strided(op) else 2 * lanes


def pooling_schedule(op: OpInfo, knobs: PoolingKnobs, name: str = "pooling") -> ir.Module:
    """Schedule a pooling payload whose first pooling root is `op` (see the module doc)."""
    d = op.dims
    spatial, then_pool = op.attributes["spatial"], op.attributes.get("then_pool", 0)
    average = op.op_name.endswith("_sum")
    ow_tile, c_tile = min(knobs.ow_tile, d["OW"]), min(knobs.c_tile, d["C"])
    threads = knobs.threads
    with ScheduleBuilder(name) as s:
        function = s.match(s.root, ["func.func"], step="match_function")
        depth_name = op.op_name.replace("nchw", "nwc")
        if then_pool:
            _pad_by_stage(s, op, depth_name)
        elif op.attributes.get("pad"):
            s.materialize_padding(function, 2 + spatial, d["IW"], op.attributes["pad"], ROW_CHUNK)
        # The image stage: the pool itself, or the divide it feeds (2-D and 1-D averages).
        anchor_name = "linalg.generic" if average and not then_pool else op.op_name
        windows = 0 if anchor_name == "linalg.generic" else spatial
        rows = [1] * (spatial - 1)  # one output row (OH) per tile
        sizes = [1, c_tile, *rows, ow_tile] + [0] * windows
        anchor = s.match(s.root, [anchor_name], step="match_image_stage")
        _tile_output(s, anchor, anchor_name, sizes, [d["C"], *rows, d["OW"]], threads)
        if then_pool:
            # The depth stage: [N*C, OD, OH*OW], pooled over OD along contiguous (h, w).
            depth_anchor = "linalg.generic" if average else depth_name
            cols = min(knobs.cols, plane(op))
            sizes = [1, 1, cols] + ([0] if depth_anchor == depth_name else [])
            anchor = s.match(s.root, [depth_anchor], step="match_depth_stage")
            _tile_output(s, anchor, depth_anchor, sizes, [1, plane(op)], threads)
        function = s.match(s.root, ["func.func"], step="match_function_tiled")
        s.canonicalize(function, step="static_tile_shapes")
        if spatial == 2:
            pools = s.match(function, [op.op_name], step="match_2d_tiles")
            pools, _ = s.tile(pools, [0, 0, 0, 0, 1, 0], step="window_rows")
            with s.at("decompose_to_1d"):
                structured.DecomposeOp(pools)
        # Linalg ops only: the insert_slice putting the copied rows into the padded buffer
        # stays one, so that bufferization writes the rows in place.
        s.vectorize_linalg(function)
        s.drop_leading_unit_dims(function)
        # The vectorizer's transposes of one channel's row into a column, as shape casts.
        s.apply_patterns(
            function, "drop_unit_dims", tvector.apply_patterns_vector_drop_unit_dims_with_shape_cast
        )
        s.hoist_invariant_subsets(function)
    return s.module


def _pad_by_stage(s: ScheduleBuilder, op: OpInfo, depth_name: str) -> None:
    """A separable 3-D pool's padding, each stage's padded input materialised on its own:
    the image stage's along H and W, the depth stage's along D (of planes already pooled
    down along H and W, so a smaller copy than padding the whole input in D)."""
    if op.attributes.get("then_padded"):
        depth = s.match(s.root, [depth_name], step="match_depth_pool")
        s.materialize_pad(s.producer(depth, 0), 3, plane(op), row=plane(op), chunk=ROW_CHUNK)
    if op.attributes.get("padded"):
        image = s.match(s.root, [op.op_name], step="match_image_pool")
        pad = op.attributes["pad"]
        row = op.dims["IW"] - 2 * pad
        s.materialize_pad(s.producer(image, 0), 4, op.dims["IW"], row=row, chunk=ROW_CHUNK)


def _tile_output(
    s: ScheduleBuilder,
    anchor: ir.Value,
    anchor_name: str,
    sizes: list[int],
    extents: list[int],
    threads: int,
) -> None:
    """Tile `anchor` by `sizes` (its producers fused) and peel the partial tiles of the
    loops after the first (`extents`: their sizes). With threads, the leading loops whose
    tiles divide them become one scf.forall first."""
    tiled = [size for size in sizes if size]
    if threads > 1:
        outer = 1 + (extents[0] % sizes[1] == 0)  # N, and C when its tiles are whole
        parallel = sizes[:outer] + [0] * (len(sizes) - outer)
        s.fuse_with_loops(anchor, parallel, step="parallel_tiles", parallel=True)
        anchor = s.match(s.root, [anchor_name], step="match_parallel_tiles")
        sizes = [0] * outer + sizes[outer:]
        extents = extents[outer - 1 :]
        tiled = tiled[outer:]
    _, loops = s.fuse_with_loops(anchor, sizes, step="output_tiles")
    # Innermost first, so an outer peel clones the peeled inner loops too.
    pairs = list(zip(extents, tiled[-len(extents) :], loops[-len(extents) :], strict=True))
    for extent, size, loop_handle in reversed(pairs):
        if extent % size:
            s.peel(loop_handle, step="peel_partial_tiles")


def recognise_pooling(op: ir.Operation, loops: list[int], dtypes: tuple[str, ...]) -> OpInfo | None:
    """A named pooling op (its batch and channel dims are both conv "batch" dims): loops
    named N, C, OH, OW, KH, KW in the op's loop order (1-D: N, C, OW, KW; channels-last:
    N, OW, C, KW). `then_pool` marks one whose result, reshaped, feeds another pooling op
    (the (H, W) stage of a separable 3-D pool; the D stage follows it)."""
    conv = linalg.infer_convolution_dimensions(op)
    if conv is None or len(conv.batch) != 2 or len(conv.output_image) > 2:
        return None
    spatial = len(conv.output_image)
    names = {d: name for d, name in zip(conv.batch, ("N", "C"), strict=True)}
    names.update(zip(conv.output_image, ("OH", "OW")[-spatial:], strict=True))
    names.update(zip(conv.filter_loop, ("KH", "KW")[-spatial:], strict=True))
    dims = {names[d]: loops[d] for d in sorted(names)}
    then = _next_pooling(op)
    attrs = {
        "stride": int(list(conv.strides)[-1]),
        "dilation": int(list(conv.dilations)[-1]),
        "spatial": spatial,
        "then_pool": int(then is not None),
        "pad": padding(op.operands[0]),
        "padded": int(is_padded(op.operands[0])),
    }
    if then is not None and is_padded(then.operands[0]):
        attrs["then_padded"] = 1  # the next stage (a 3-D pool's depth) reads a tensor.pad
    dims["IW"] = ir.ShapedType(op.operands[0].type).shape[-2 if "nwc" in op.name else -1]
    return OpInfo("pooling", dims, dtypes, op.name, attrs)


def _next_pooling(op: ir.Operation) -> ir.Operation | None:
    """The pooling op that `op`'s result reaches through reshapes and pads only, if any."""
    values = list(op.results)
    while values:
        for use in values.pop().uses:
            user = use.owner
            if user.name.startswith("linalg.pooling_"):
                return user
            if user.name in {"tensor.expand_shape", "tensor.collapse_shape", "tensor.pad"}:
                values.extend(user.results)
    return None
