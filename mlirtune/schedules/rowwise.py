"""The `rowwise` family: row-wise payloads with row reductions (softmax and the like).

A row tile (ROWS rows, every column) of the last op fuses all its producers, so each row tile
is read from memory once. Inside it, every op is tiled over COLS columns: element-wise ops
plainly, reductions into a [ROWS, COLS] partial result that is merged once per row tile, so the
inner loops are pure vector code. Partial tiles are peeled off to keep main tiles static.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import linalg, transform
from mlir.dialects.transform import structured

from mlirtune.interfaces.dtype import element_bytes
from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.schedule import Config, Knob
from mlirtune.ir.prefetch import PREFETCH_ATTRIBUTE
from mlirtune.ir.roots import has_reduction, is_windowed, reduction_loops, rows_cols
from mlirtune.schedules.builder import ScheduleBuilder
from mlirtune.schedules.knobs import choices, powers_of_two, threads_knob, vector_columns
from mlirtune.schedules.vector_tiles import TileT, VectorTileFamily, VectorTileKnobs
from mlirtune.targets.host_cpu import HostCPU


@dataclass(frozen=True)
class RowwiseKnobs(VectorTileKnobs):
    """`rows` rows per row tile (producers fused per tile), `cols` columns per vector tile
    inside it; `prefetch` 1 prefetches the next row tile; `threads` the row tiles are
    spread over."""

    prefetch: int
    threads: int


class RowTiles(VectorTileFamily[TileT]):
    """Row tiles with row reductions: the partial row results stay live beside the loaded
    tile, so a tile gets half of the register file (`rowwise`, `full_reduction`)."""

    root_kinds = ("reduction",)
    register_share = 0.5
    reduction = True

    def row_tile(self, op: OpInfo, cpu: HostCPU) -> tuple[int, int]:
        """ROWS x COLS of a row tile. A payload with an expanded exp or log (softmax) keeps
        several values live per vector of the tile: one vector per row, an eighth of the
        registers (4 x 16 f32 on AVX-512). Measured on Zen 4, softmax 4096 x 4096 and
        512 x 1024 ran in 10.9 and 0.20 ms with 4 x 16 tiles, 13.7 and 0.28 ms with 4 x 64."""
        if op.attributes.get("transcendentals"):
            return self.vector_tile(op, cpu, row_vectors=1, register_share=self.register_share / 4)
        rows, cols = self.vector_tile(op, cpu)
        return rows, min(cols, vectors_per_step(op, cpu) * cpu.lanes(op.element_type))


class Rowwise(RowTiles[RowwiseKnobs]):
    """Row tiles with row reductions, the next row tile prefetched where it pays."""

    name = "rowwise"
    description = "row tiles fusing row reductions (softmax), column-tiled vector loops"
    owns = ("reduction",)

    def recognise(
        self, op: ir.Operation, loops: list[int], dtypes: tuple[str, ...]
    ) -> OpInfo | None:
        """A reduction along rows (after the axis reductions have had their say): rows of
        COLS elements, and how many transcendentals the function holds (a softmax's exp)."""
        if not has_reduction(op) or is_windowed(op):  # a window is no row
            return None
        if len(loops) < 2:  # nor is one vector summed whole (a mean of a loss's terms)
            return None
        reduced = reduction_loops(op)
        if reduced != [len(loops) - 1] and len(reduced) < len(loops):  # a global pool's
            return None  # two reduced loops are no row: the generic family's (a loss's
            # full reduction stays a row reduction, which its own pipeline schedules)
        product = linalg.infer_contraction_dimensions(op)
        if product is not None and len(product.m) and len(product.n):  # no row sum: a
            return None  # product over several batch dims (attention's), the generic's
        transcendentals = _transcendentals(op)
        attrs = {"transcendentals": transcendentals} if transcendentals else {}
        if len(loops) > 2:  # rows of rows (attention scores per head): the inner row loop
            attrs["rank"], attrs["inner_rows"] = len(loops), loops[-2]
        return OpInfo("reduction", rows_cols(loops), dtypes, op.name, attrs)

    knobs = (
        Knob(
            "ROWS",
            "rows per row tile (producers fused per tile)",
            4,
            powers_of_two("ROWS", 16),
        ),
        Knob(
            "COLS",
            "columns per vector tile inside a row tile",
            64,
            vector_columns("COLS", (1, 2, 4, 8)),
        ),
        Knob(
            "PREFETCH",
            "prefetch the next row tile during the second column pass (1) or not (0)",
            0,
            choices(0, 1),
            minimum=0,
        ),
        threads_knob(),
    )
    values_type = RowwiseKnobs

    def select_on(self, op: OpInfo, cpu: HostCPU) -> Config:
        """The row tile (`row_tile`). Inputs larger than the L2 prefetch the next tile where
        two tiles fit in half of it (softmax 4096 x 4096: 11.4 ms without, 9.4-9.9 ms with;
        no change measured on inputs within the L2)."""
        rows, cols = self.row_tile(op, cpu)
        # The prefetched tile waits in the L2 beside the current one.
        tiles_fit = 2 * _bytes(op, rows) <= cpu.features.l2_bytes // 2
        return {"ROWS": rows, "COLS": cols, "PREFETCH": int(tiles_fit and not input_in_l2(op, cpu))}

    def memory_overlaps_compute(self, op: OpInfo, cpu: HostCPU, knobs: RowwiseKnobs) -> bool:
        """A row tile's later passes read the cache: memory works alongside them only when
        the next tile is prefetched, or the input is in the L2 anyway."""
        return bool(knobs.prefetch) or input_in_l2(op, cpu)

    def build(self, op: OpInfo, parameters: Config) -> ir.Module:
        shape = [op.attributes.get("inner_rows", op.dims["ROWS"]), op.dims["COLS"]]
        knobs = self.knob_values(op, parameters)
        return rowwise_schedule(shape=shape, knobs=knobs, rank=op.attributes.get("rank", 2))


def vectors_per_step(op: OpInfo, cpu: HostCPU) -> int:
    """Vectors of a row each step of a plain row reduction reads (the tile keeps its rows):
    four on rows of 64 vectors or more, fewer on shorter ones, where each row's tile ends by
    merging its vectors and then their lanes. Measured on a Zen 5 (a mean over rows, torch's
    time over ours, 4-row tiles, four vectors a step against the rule's): rows of 8 vectors
    0.40-0.41x against 1.15-1.18x, of 16 vectors 0.58x against 1.12x, of 32 vectors
    0.63-0.74x against 0.82-0.95x; restricted to AVX2 (2-row tiles), rows of 16 vectors
    0.68x against 0.90x. At 4096 columns 4 x 64 tiles stayed best (1.22x; 8 x 32 and 16 x 16
    1.02-1.03x)."""
    row_vectors = -(-op.dims["COLS"] // cpu.lanes(op.element_type))
    return 4 if row_vectors >= 64 else 2 if row_vectors >= 32 else 1


def _bytes(op: OpInfo, rows: int) -> int:
    """Bytes of `rows` whole rows of the op's input."""
    return rows * op.dims["COLS"] * element_bytes(op.element_type)


def input_in_l2(op: OpInfo, cpu: HostCPU) -> bool:
    return _bytes(op, op.dims["ROWS"]) <= cpu.features.l2_bytes


ROWWISE = Rowwise()

PARALLEL = ("parallel", "parallel")
ROW_REDUCTION = ("parallel", "reduction")


def rowwise_schedule(
    *, shape: Sequence[int], knobs: RowwiseKnobs, name: str = "rowwise", rank: int = 2
) -> ir.Module:
    """Schedule a payload whose ops are row-parallel (linalg.generic with iterators all
    parallel, or parallel then one reduction) and whose last op writes the output: 2-D, of
    `shape` rows and columns, or of `rank` loops whose leading ones are tiled by one and
    dropped, leaving 2-D row tiles of the innermost two (`shape`)."""
    m, n = shape
    rows, cols = min(knobs.rows, m), min(knobs.cols, n)
    leading = [1] * (rank - 2)
    # With THREADS > 1 and whole row tiles, the row tiles are one scf.forall spread over the
    # threads (a partial tile is peeled, which takes an scf.for).
    parallel = knobs.threads > 1 and m % rows == 0
    with ScheduleBuilder(name) as s:
        _, (*_, row_loop) = s.fuse_with_loops(
            s.last_op(), [*leading, rows, 0], step="tile_rows_and_fuse", parallel=parallel
        )
        if knobs.prefetch and not parallel and not leading:
            with s.at("mark_prefetch"):  # the prefetch-next-tile step adds the prefetches
                transform.AnnotateOp(row_loop, PREFETCH_ATTRIBUTE)
        function = s.match(s.root, ["func.func"], step="match_function")
        with s.at("dedup_fused_producers"):
            # A producer with two consumers (exp feeds the sum and the divide) is fused once
            # per use; the copies are identical, so CSE keeps one.
            transform.apply_cse(function)
        if leading:  # the tiles' unit leading dims dropped: 2-D ops on rank-reduced slices
            s.apply_patterns(
                function,
                "drop_leading_dims",
                structured.apply_patterns_linalg_fold_unit_extent_dims_via_slices,
            )
        if m % rows:
            s.peel(row_loop, step="peel_rows")
        # Static row counts in every row tile before the column loops are made (they cannot
        # carry a tile that becomes static later), and per-tile buffers for intermediates.
        s.shrink_temporaries(function)
        # Tiles of one row under leading dims lost their row dim too: 1-D ops (a GroupNorm's
        # [4, 8, 25200] rows were matched by neither, and vectorized 25200 columns at once).
        one_row = bool(leading) and rows == 1
        columns = [cols] if one_row else [0, cols]
        elementwise = s.match_generic(function, PARALLEL[one_row:], step="match_elementwise")
        reductions = s.match_generic(function, ROW_REDUCTION[one_row:], step="match_reductions")
        _, col_loops = s.tile(elementwise, columns, step="tile_columns")
        _, _, reduction_loops = s.tile_reduction(reductions, columns, step="tile_reductions")
        if n % cols:
            for loop_handle in (*col_loops, reduction_loops):
                s.peel(loop_handle, step="peel_columns")
        s.canonicalize(function)  # static sizes for the peeled column tiles
        # Not vectorize_function: it would copy each finished row tile into the output
        # through one vector the size of the tile (which LLVM cannot even hold past 2^23 bits).
        s.vectorize_linalg(function, reductions_to_contract=False, gathers=True)
        s.hoist_invariant_subsets(function)
        s.lower_row_reductions(function)
    return s.module


# Math ops the host pipeline expands into a polynomial of some twenty vector ops each.
TRANSCENDENTALS = frozenset({"math.exp", "math.log", "math.log1p", "math.erf", "math.tanh"})


def _transcendentals(op: ir.Operation) -> int:
    """How many transcendental math ops the function around `op` holds (a softmax's exp):
    their expansions keep several values live per vector, which bounds the tile."""
    function = op.parent
    while function.name != "func.func":
        function = function.parent
    count = 0

    def visit(inner: ir.Operation) -> ir.WalkResult:
        nonlocal count
        count += inner.name in TRANSCENDENTALS
        return ir.WalkResult.ADVANCE

    function.walk(visit)
    return count
