"""The `channel_norm` family: normalisations over non-trailing axes (workloads/channel_norm.py).

The payload is a 3-D loop nest (a, b, s), s the contiguous H*W. Its last op (one multiply-add
per element) is tiled by one `a` (rms: one `a` and S_TILE columns of s, as its statistics
are per column) and every producer is fused into that tile: the statistics, centred second
pass included, come from the tile's own elements, read from memory once and re-read from
cache. Inside a tile:
- row sums over s (iterators parallel, parallel, reduction) are tiled by one b and COLS
  columns of partial vector sums, merged once per row;
- rms's sum over b (parallel, reduction, parallel) steps through b R_STEP rows at a time
  and, in each step, along the tile's row of sums COLS columns at a time: every row of X is
  read as one contiguous run (a column-first order reads C strided runs at once, which the
  prefetcher follows badly: measured 1.35x slower at 16x64x256x256);
- the last op is tiled by one b and COLS columns; the small ops between (statistics of a
  few values, per-row scale and shift) are vectorized whole.
Partial column tiles are peeled. With THREADS > 1 the outer tiles are one scf.forall.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import transform
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
from mlirtune.schedules.builder import ScheduleBuilder
from mlirtune.schedules.cpu_model import (
    LOAD_PORTS,
    LOOP_CYCLES,
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
from mlirtune.schedules.knobs import cache_tiles, threads_knob
from mlirtune.targets.host_cpu import HostCPU

P, R = "parallel", "reduction"
ELEMENTWISE = (P, P, P)
ROW_SUMS = (P, P, R)
CHANNEL_SUMS = (P, R, P)
# Vectors per COLS candidate: 1 to 8 (what the selector's `fit` picks among), or all of s.
COLUMN_VECTORS = tuple(range(1, 9))
R_STEP_CAP = 16


def per_column(op: OpInfo) -> bool:
    """Whether the statistics are per column of s (rms: a sum over b, an axis_reduction)."""
    return op.kind == "axis_reduction"


def columns(op: OpInfo) -> int:
    """The extent of s, the contiguous loop."""
    return op.dims["INNER"] if per_column(op) else op.dims["COLS"]


def _cols(op: OpInfo, lanes: int) -> list[int]:
    """COLS candidates: whole vectors, or all of s when it is that short."""
    size = columns(op)
    whole = [size] if size <= COLUMN_VECTORS[-1] * lanes else []
    return [v * lanes for v in COLUMN_VECTORS if v * lanes <= size] + whole


def _r_steps(op: OpInfo, lanes: int) -> list[int]:
    """Powers of two up to b (and b itself when short) for rms; 1 otherwise (unused)."""
    if not per_column(op):
        return [1]
    size = op.dims["R"]
    powers = [1 << i for i in range(R_STEP_CAP.bit_length()) if 1 << i <= min(size, R_STEP_CAP)]
    return powers + ([size] if size <= R_STEP_CAP else [])


def _s_tiles(op: OpInfo, lanes: int) -> list[int]:
    """rms: powers of two from 16 vectors up to s, and s itself; 1 otherwise (unused)."""
    if not per_column(op):
        return [1]
    return cache_tiles("INNER", floor=16, in_lanes=True)(op, lanes)


@dataclass(frozen=True)
class ChannelNormKnobs(KnobValues):
    """`cols` columns of s per vector tile; rms only (1 otherwise): `r_step` rows of b per
    step of the channel sum, `s_tile` columns of s per outer tile; `threads` the outer
    tiles are spread over."""

    cols: int
    r_step: int
    s_tile: int
    threads: int


class ChannelNorm(HostFamily[ChannelNormKnobs]):
    """Tiles of one `a` (rms: and S_TILE columns) with every statistic fused."""

    name = "channel_norm"
    description = "normalisation over non-trailing axes: statistics fused per outer tile"
    # The first root op of the payload: rms's channel sum (axis_reduction), the row sums of
    # batch_train and group (reduction), batch's last op (elementwise: it has no statistics).
    root_kinds = ("axis_reduction", "reduction", "elementwise")
    knobs = (
        Knob("COLS", "columns of s per vector tile", 64, _cols),
        Knob(
            "R_STEP",
            "rms: rows of b per step of the channel sum (1 for the other kinds)",
            lambda op: 4 if per_column(op) else 1,
            _r_steps,
        ),
        Knob(
            "S_TILE",
            "rms: columns of s per outer tile (1 for the other kinds)",
            lambda op: min(1024, columns(op)) if per_column(op) else 1,
            _s_tiles,
        ),
        threads_knob(),
    )
    values_type = ChannelNormKnobs

    def build(self, op: OpInfo, parameters: Config) -> ir.Module:
        return channel_norm_schedule(
            per_column=per_column(op),
            columns=columns(op),
            channels=op.dims.get("R", 1),
            knobs=self.knob_values(op, parameters),
        )

    def select_on(self, op: OpInfo, cpu: HostCPU) -> Config:
        """COLS: four vectors (long contiguous runs). rms only: S_TILE, the largest block of
        C rows whose X fits L2, from where the last op re-reads it (at 16x64x256x256 a 1 MiB
        block on a 1 MiB L2 ran 10% faster than a 512 KiB one, and as fast as 2 MiB);
        R_STEP, enough rows per step that a step loads about a register file of vectors."""
        lanes = cpu.lanes(op.element_type)
        size = columns(op)
        cols = fit(size, 4 * lanes, step=min(lanes, size))
        if not per_column(op):
            return {"COLS": cols, "R_STEP": 1, "S_TILE": 1}
        row_bytes = op.dims["R"] * element_bytes(op.element_type)
        blocks = _s_tiles(op, lanes)
        fitting = [b for b in blocks if b * row_bytes <= cpu.features.l2_bytes]
        s_tile = max(fitting, default=min(blocks))
        loads = cpu.features.vector_registers // ceil_div(cols, lanes)
        r_step = max((r for r in _r_steps(op, lanes) if r <= loads), default=1)
        return {"COLS": min(cols, s_tile), "R_STEP": r_step, "S_TILE": s_tile}

    def constraints_on(
        self, op: OpInfo, cpu: HostCPU, knobs: KnobVariables, domains: Domains
    ) -> list[Constraint]:
        lanes = cpu.lanes(op.element_type)
        registers = cpu.features.vector_registers
        v = vectors(knobs["COLS"], lanes)
        constraints = [
            whole_vectors("COLS", columns(op), knobs, lanes),
            Constraint(
                "register_budget",
                f"2*ceil(COLS/{lanes}) <= {registers}: a row of partial sums and one loaded "
                "row fit the vector registers",
                2 * v <= registers,
            ),
        ]
        if per_column(op):
            constraints += [
                Constraint(
                    "step_size",
                    f"R_STEP*ceil(COLS/{lanes}) <= {4 * registers}: an unrolled step of the "
                    "channel sum stays within a few register files of loads (code size)",
                    knobs["R_STEP"] * v <= 4 * registers,
                ),
                Constraint(
                    "columns_in_block",
                    "COLS <= S_TILE: vector columns tile the block of s",
                    knobs["COLS"] <= knobs["S_TILE"],
                ),
            ]
        return constraints

    def cost_on(self, op: OpInfo, cpu: HostCPU, knobs: ChannelNormKnobs) -> float:
        """Vector loads of every pass over X (a partial vector costs a whole one) against the
        bytes they move: X read from memory and out written once; the later passes of a
        tile re-read it through L2 (rms: from memory when its block outgrows L2);
        plus loop control per column tile and, for rms, per step and per block."""
        lanes = cpu.lanes(op.element_type)
        size = columns(op)
        itemsize = element_bytes(op.element_type)
        passes = {"axis_reduction": 2, "elementwise": 1}.get(op.kind, 3)
        rows = op.dims["OUTER"] * op.dims["R"] if per_column(op) else op.dims["ROWS"]
        block = min(knobs.s_tile, size) if per_column(op) else size
        blocks = tile_extents(size, size, block)
        cols = {
            c: n * count
            for extent, count in blocks.items()
            for c, n in tile_extents(extent, extent, min(knobs.cols, extent)).items()
        }
        loads = passes * rows * sum(n * ceil_div(c, lanes) for c, n in cols.items())
        control = passes * rows * sum(cols.values()) * LOOP_CYCLES
        nbytes = rows * size * itemsize
        traffic = Traffic(cpu)
        traffic.add(2 * nbytes, 2 * nbytes)
        if per_column(op):
            control += rows / max(1, knobs.r_step) * sum(blocks.values()) * LOOP_CYCLES
            control += op.dims["OUTER"] * sum(blocks.values()) * TILE_CYCLES
            # The last op's re-read hits L2 while the block fits all of it (see select_on);
            # Traffic's threshold is half of L2.
            traffic.add(nbytes, op.dims["R"] * block * itemsize // 2)
        else:
            traffic.l2 += (passes - 1) * nbytes  # a tile's re-reads come from L2 or L3
        return seconds(max(loads / LOAD_PORTS, traffic.cycles()) + control, cpu)


CHANNEL_NORM = ChannelNorm()


def channel_norm_schedule(
    *, per_column: bool, columns: int, channels: int, knobs: ChannelNormKnobs
) -> ir.Module:
    """Schedule a channel_norm payload (see the module docstring): `columns` is the extent
    of s, `channels` that of b when `per_column` (rms)."""
    block = min(knobs.s_tile, columns) if per_column else columns
    cols = min(knobs.cols, block)
    r_step = min(knobs.r_step, channels) if per_column else 1
    outer = [1, 0, block] if per_column else [1]
    # A partial S_TILE block is peeled, which takes an scf.for: then one thread.
    parallel = knobs.threads > 1 and columns % block == 0
    with ScheduleBuilder("channel_norm") as s:
        _, outer_loops = s.fuse_with_loops(
            s.last_op(), outer, step="tile_outer_and_fuse", parallel=parallel
        )
        function = s.match(s.root, ["func.func"], step="match_function")
        with s.at("dedup_fused_producers"):
            # A statistic with two consumers (the mean: the centred sum and the shift) is
            # fused once per use; CSE keeps one copy.
            transform.apply_cse(function)
        s.shrink_temporaries(function)
        last = s.match_generic(function, ELEMENTWISE, step="match_last_op")
        _, (_, col_loop) = s.tile(last, [0, 1, cols], step="tile_last")
        column_loops = [col_loop]
        if per_column:
            column_loops += _channel_sums(s, function, cols, r_step, channels)
        else:
            row_sums = s.match_generic(function, ROW_SUMS, step="match_row_sums")
            row_sums, _ = s.tile(row_sums, [0, 1, 0], step="tile_row_sums")
            _, _, sum_loop = s.tile_reduction(row_sums, [0, 0, cols], step="tile_row_sum_columns")
            column_loops.append(sum_loop)
            # group's per-channel weight and bias, broadcast over n: one row of C/G at a time.
            broadcasts = s.match(function, ["linalg.broadcast"], step="match_broadcasts")
            s.tile(broadcasts, [1, 1, 0], step="tile_broadcasts")
        # The column tiles are peeled while a partial block still has a dynamic size (a
        # loop whose static trip count its step divides cannot be peeled), then the block.
        if block % cols or columns % block:
            for loop_handle in column_loops:
                s.peel(loop_handle, step="peel_columns")
        if columns % block:
            s.peel(outer_loops[-1], step="peel_blocks")
        s.canonicalize_loops(function)  # static sizes for the peeled tiles
        s.vectorize_linalg(function, reductions_to_contract=False)
        s.hoist_invariant_subsets(function)
        s.drop_leading_unit_dims(function)
        # rms: a sum over R_STEP rows becomes element-wise adds of rows; the others: one
        # horizontal sum per row of partial sums.
        strategy = tvector.VectorMultiReductionLowering
        s.apply_patterns(
            function,
            "lower_reductions",
            lambda: tvector.apply_patterns_vector_lower_multi_reduction(
                lowering_strategy=strategy.InnerParallel if per_column else strategy.InnerReduction
            ),
        )
    return s.module


def _channel_sums(
    s: ScheduleBuilder, function: ir.Value, cols: int, r_step: int, channels: int
) -> list[ir.Value]:
    """rms: the sum over b in steps of R_STEP rows, each step along the row of sums COLS
    columns at a time; that row's zero fill and the per-column scale op in COLS columns too.
    Returns the column loops (peeled by the caller when COLS does not divide S_TILE)."""
    sums = s.match_generic(function, CHANNEL_SUMS, step="match_channel_sums")
    _, (b_loop,) = s.tile(sums, [0, r_step, 0], step="tile_channel_steps")
    if channels % r_step:
        s.peel(b_loop, step="peel_channel_steps")
    sums = s.match_generic(function, CHANNEL_SUMS, step="match_channel_steps")
    _, (sum_loop,) = s.tile(sums, [0, 0, cols], step="tile_sum_columns")
    fills = s.match(function, ["linalg.fill"], step="match_sum_fill")
    _, (fill_loop,) = s.tile(fills, [0, cols], step="tile_sum_fill")
    scales = s.match_generic(function, (P, P), step="match_scales")
    _, (scale_loop,) = s.tile(scales, [0, cols], step="tile_scales")
    return [sum_loop, fill_loop, scale_loop]
