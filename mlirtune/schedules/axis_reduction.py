"""The `axis_reduction` family: a reduction over a middle axis of an [OUTER, R, INNER] view.

The reduced loop has parallel loops inside it, so its rows are contiguous runs of INNER
elements. Each row of the OUTER loop is tiled over INNER by COLS columns (a row of vector
accumulators); a sequential loop steps through R, R_STEP rows at a time, carrying those
accumulators, so its body is plain vector adds (max, min, mul) of contiguous rows: no
horizontal reduction at all. With THREADS > 1, OUTER tiles of OUTER rows are one scf.forall.
Arg reductions (value and index outputs) step one row at a time: their unit dims are folded
away so that the select-based update vectorizes as an element-wise op. A gathered input
(an EmbeddingBag's sum of table rows) steps one row at a time too, its gather fused into
the R steps: each table row is then one contiguous vector load.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
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
from mlirtune.ir.gathers import gathers_in
from mlirtune.ir.inspect import defining_op
from mlirtune.ir.roots import has_reduction, is_windowed, product, reduction_loops
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
from mlirtune.schedules.knobs import divisors, powers_of_two, threads_knob, vector_columns
from mlirtune.targets.host_cpu import HostCPU

AXIS_REDUCTION = ("parallel", "reduction", "parallel")
# Accumulator rows of 1 to 16 vectors (16: half of a 32-register file), or all of INNER.
COLUMN_VECTORS = tuple(range(1, 17))


def _columns(op: OpInfo, lanes: int) -> list[int]:
    """COLS candidates: whole vectors, or the whole INNER loop when it is that short."""
    inner = op.dims["INNER"]
    whole = [inner] if inner <= COLUMN_VECTORS[-1] * lanes else []
    return [*vector_columns("INNER", COLUMN_VECTORS)(op, lanes), *whole]


@dataclass(frozen=True)
class AxisReductionKnobs(KnobValues):
    """`outer` OUTER rows per parallel tile, `cols` INNER columns of vector accumulators,
    `r_step` rows of R per step of the R loop, `threads` the OUTER tiles are spread over."""

    outer: int
    cols: int
    r_step: int
    threads: int


class AxisReduction(HostFamily[AxisReductionKnobs]):
    """Vector accumulators over INNER columns, carried through a sequential R loop."""

    name = "axis_reduction"
    description = "reduction over a middle axis: column accumulators stepped through R"
    root_kinds = ("axis_reduction",)
    owns = ("axis_reduction",)

    def recognise(
        self, op: ir.Operation, loops: list[int], dtypes: tuple[str, ...]
    ) -> OpInfo | None:
        """One reduced loop with parallel loops inside it (a sum over a middle axis): the
        reduction steps over whole rows of the inner loops, not along a row."""
        reduced = reduction_loops(op) if has_reduction(op) and not is_windowed(op) else []
        if len(reduced) != 1 or reduced[0] == len(loops) - 1 or len(loops) > 3:
            return None  # the schedule tiles [OUTER, R, INNER]; more loops: the generic's
        (r,) = reduced
        if [n for n in loops[r + 1 :] if n != 1][:-1]:  # with OUTER 1 its unit loops are
            return None  # folded away, so INNER must be one loop
        dims = {"OUTER": product(loops[:r]), "R": loops[r], "INNER": product(loops[r + 1 :])}
        # Two outputs: an arg reduction (value and index, see workloads/reduce.py).
        segments = "operandSegmentSizes"  # [inputs, outputs] of a DPS op
        outputs = list(ir.DenseI32ArrayAttr(op.attributes[segments]))[-1]
        attributes = {"outputs": outputs}
        if any(_gathered(value) for value in list(op.operands)[: len(op.operands) - outputs]):
            attributes["gathered"] = 1
        return OpInfo("axis_reduction", dims, dtypes, op.name, attributes)

    def root_flops(self, op: OpInfo) -> int:
        """One per element read."""
        return op.dims["OUTER"] * op.dims["R"] * op.dims["INNER"]

    def summed_terms(self, op: OpInfo) -> int:
        return op.dims["R"]

    knobs = (
        Knob(
            "OUTER",
            "OUTER rows per parallel tile (with THREADS > 1; a divisor of OUTER)",
            1,
            divisors("OUTER", 1 << 16),
        ),
        Knob(
            "COLS",
            "INNER columns of vector accumulators",
            64,
            _columns,
        ),
        Knob("R_STEP", "rows of R per step of the sequential R loop", 4, powers_of_two("R", 16)),
        threads_knob(),
    )
    values_type = AxisReductionKnobs

    def build(self, op: OpInfo, parameters: Config) -> ir.Module:
        shape = (op.dims["OUTER"], op.dims["R"], op.dims["INNER"])
        return axis_reduction_schedule(
            shape=shape,
            knobs=self.knob_values(op, parameters),
            outputs=op.attributes.get("outputs", 1),
            gathered=bool(op.attributes.get("gathered")),
            outer_loop=op.dims["OUTER"] > 1 or op.dims["INNER"] == 1,
        )

    def select_on(self, op: OpInfo, cpu: HostCPU) -> Config:
        """COLS: as many column vectors as the register file holds with their accumulators
        and a loaded row (see _registers_per_column); R_STEP: enough rows per step that a
        step loads as many vectors as the register file holds, amortising loop control;
        OUTER: the largest divisor of OUTER that gives every thread a tile (tiles that do
        not divide OUTER run on one thread)."""
        lanes = cpu.lanes(op.element_type)
        inner, r, outer = op.dims["INNER"], op.dims["R"], op.dims["OUTER"]
        registers = cpu.features.vector_registers
        per_column = _registers_per_column(op)
        cols = fit(inner, lanes * max(1, registers // per_column), step=min(lanes, inner), high=1.0)
        if _single_rows(op):
            r_step = 1
        else:
            r_step = fit(r, max(1, registers // ceil_div(cols, lanes)), high=1.0, pow2=True)
        share = ceil_div(outer, cpu.threads)
        outer_tile = max(d for d in range(1, share + 1) if outer % d == 0)
        return {"OUTER": outer_tile, "COLS": cols, "R_STEP": r_step}

    def constraints_on(
        self, op: OpInfo, cpu: HostCPU, knobs: KnobVariables, domains: Domains
    ) -> list[Constraint]:
        lanes = cpu.lanes(op.element_type)
        registers = cpu.features.vector_registers
        per_column = _registers_per_column(op)
        v = vectors(knobs["COLS"], lanes)
        constraints = [
            whole_vectors("COLS", op.dims["INNER"], knobs, lanes),
            Constraint(
                "register_budget",
                f"{per_column}*ceil(COLS/{lanes}) <= {registers}: the accumulators (value, "
                "and index for an arg reduction) and one loaded row fit the vector registers",
                per_column * v <= registers,
            ),
            Constraint(
                "step_size",
                f"R_STEP*ceil(COLS/{lanes}) <= {4 * registers}: an unrolled step of the R "
                "loop stays within a few register files of loads (code size)",
                knobs["R_STEP"] * v <= 4 * registers,
            ),
        ]
        if _single_rows(op):
            constraints.append(
                Constraint(
                    "single_row_steps",
                    "R_STEP == 1: an arg reduction's value and index update one row at a "
                    "time; a gathered input's rows are one contiguous load each only so",
                    knobs["R_STEP"] == 1,
                )
            )
        return constraints

    def cost_on(self, op: OpInfo, cpu: HostCPU, knobs: AxisReductionKnobs) -> float:
        """Vector loads of the input (a partial vector costs a whole one) against the bytes
        it moves, plus loop control per R step and set-up per column tile."""
        lanes = cpu.lanes(op.element_type)
        outer, r, inner = op.dims["OUTER"], op.dims["R"], op.dims["INNER"]
        cols = tile_extents(inner, inner, min(knobs.cols, inner))
        steps = tile_extents(r, r, min(knobs.r_step, r))
        loads = outer * r * sum(n * ceil_div(c, lanes) for c, n in cols.items())
        tiles = outer * sum(cols.values())
        control = tiles * (sum(steps.values()) * LOOP_CYCLES + TILE_CYCLES)
        nbytes = outer * r * inner * element_bytes(op.element_type)
        traffic = Traffic(cpu)
        traffic.add(nbytes, nbytes)
        return seconds(max(loads / LOAD_PORTS, traffic.cycles()) + control, cpu)


AXIS_REDUCTION_FAMILY = AxisReduction()


def _gathered(value: ir.Value) -> bool:
    """Whether `value` is the result of a gather (an embedding's lookup, `ir.gathers`)."""
    producer = defining_op(value)
    return producer is not None and producer.name == "linalg.generic" and gathers_in(producer)


def _single_rows(op: OpInfo) -> bool:
    """Whether the R loop must step one row at a time: an arg reduction's value and index
    (see the module docstring), or a gathered input, whose table rows a step of several
    read as one vector.gather (an EmbeddingBag's sum on an AMD Zen 3: 0.27x eager at
    R_STEP=2, 3.4x at 1)."""
    return op.attributes.get("outputs", 1) > 1 or bool(op.attributes.get("gathered"))


def _registers_per_column(op: OpInfo) -> int:
    """Vector registers one column vector of the tile takes: its accumulator and the loaded
    row, plus, for an arg reduction, int64 indices (8 / element bytes registers per vector
    of elements)."""
    if op.attributes.get("outputs", 1) > 1:
        return 2 + 8 // element_bytes(op.element_type)
    return 2


def axis_reduction_schedule(
    *,
    shape: tuple[int, int, int],
    knobs: AxisReductionKnobs,
    outputs: int = 1,
    gathered: bool = False,
    outer_loop: bool = True,
) -> ir.Module:
    """Schedule the one [OUTER, R, INNER] -> [OUTER, INNER] reduction generic (with its fills)
    whose result the payload writes (see the module docstring); a `gathered` input's gather
    (an embedding's lookup) is fused into the R steps. Without `outer_loop` (OUTER is 1 and
    INNER is not: a column sum) the unit loops are folded away first, leaving [R, INNER] ->
    [INNER]."""
    outer, r, inner = shape
    outer_tile = min(knobs.outer, outer)
    cols = min(knobs.cols, inner)
    r_step = 1 if outputs > 1 else min(knobs.r_step, r)
    parallel = knobs.threads > 1 and outer % outer_tile == 0 and outer > 1
    iterators = AXIS_REDUCTION if outer_loop else AXIS_REDUCTION[1:]

    def sizes(outer: int, r: int, inner: int) -> list[int]:
        return [outer, r, inner] if outer_loop else [r, inner]

    with ScheduleBuilder("axis_reduction") as s:
        if parallel:
            s.fuse_with_loops(s.last_op(), [outer_tile, 0, 0], "parallel_outer", parallel=True)
        function = s.match(s.root, ["func.func"], step="match_function")
        if not outer_loop:  # torch's [R, INNER], [1, R, INNER] or [R, 1, INNER]
            s.apply_patterns(
                function,
                "fold_unit_loops",
                structured.apply_patterns_linalg_fold_unit_extent_dims_via_slices,
            )
        reduction = s.match_generic(function, iterators, step="match_reduction")
        # One OUTER row at a time, COLS columns of accumulators; the fills are fused.
        _, loops = s.fuse_with_loops(reduction, sizes(1, 0, cols), "tile_columns")
        if inner % cols:
            s.peel(loops[-1], step="peel_columns")
        reduction = s.match_generic(function, iterators, step="match_column_tiles")
        if gathered:  # its rows fused into the R steps, not gathered whole per column tile
            _, (r_loop,) = s.fuse_with_loops(reduction, sizes(0, r_step, 0), step="tile_r")
        else:
            _, (r_loop,) = s.tile(reduction, sizes(0, r_step, 0), step="tile_r")
        if r % r_step:
            s.peel(r_loop, step="peel_r")
        s.canonicalize(function)  # static sizes for the peeled tiles
        if outputs > 1:
            # [1, 1, COLS] tiles: without the unit dims the update is element-wise.
            s.apply_patterns(
                function,
                "fold_unit_dims",
                structured.apply_patterns_linalg_fold_unit_extent_dims_via_slices,
            )
        # mean's sum of x * (1/R) must stay a multiply and a reduction, not become a
        # vector.contract (no host lowering of it is element-wise).
        function = s.vectorize_function(function, reductions_to_contract=False, gathers=gathered)
        s.hoist_invariant_subsets(function)
        s.drop_leading_unit_dims(function)
        # Each reduction over R_STEP rows becomes element-wise ops on those rows.
        s.apply_patterns(
            function,
            "lower_column_reductions",
            lambda: tvector.apply_patterns_vector_lower_multi_reduction(
                lowering_strategy=tvector.VectorMultiReductionLowering.InnerParallel
            ),
        )
    return s.module
