"""The contraction family's row-dot path (UNIT=3), for products of one column (N == 1).

A matrix-vector product y[m] = sum_k A[m, k] * x[k] has no vector along N. This path
vectorizes along K instead: MR rows at a time, each with KC / lanes vector accumulators
(independent FMA chains), and every vector of x loaded once per step for all MR rows.
`transform.structured.tile_reduction_using_for` turns the K loop into one of step KC that
accumulates an [MR, 1, KC] partial product element-wise; its accumulators are hoisted
into registers, and once per MR rows a merge sums each row's partial product across
lanes. A streams from memory once; x (K elements) stays in L2.

Rows are split into MC-row blocks where MC gives whole ones, an scf.forall over the
threads when THREADS > 1. A partial row tile is peeled, and the last K % KC steps are an
op of their own, so every tile has a static shape.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import transform

from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.op import OpInfo
from mlirtune.schedules.builder import ScheduleBuilder
from mlirtune.schedules.contraction.fusion import POINTWISE
from mlirtune.schedules.contraction.knob_values import ContractionKnobs

# UNIT knob value of this path (after dot.py's UNIT_FMA, UNIT_DOT and UNIT_AMX).
UNIT_ROWS = 3


def rows_unusable(op: OpInfo) -> str | None:
    """Why the row-dot path cannot take `op` (None: it can). The same conditions are the
    family's `rows_needs_*` constraints."""
    if op.dims["N"] != 1:
        return f"rows_needs_one_column: UNIT={UNIT_ROWS} takes N == 1, not N={op.dims['N']}"
    if op.attributes.get("transpose_a"):
        return (
            f"rows_needs_rows_of_a: UNIT={UNIT_ROWS} reads A's rows along K, not A stored "
            "transposed [K, M]"
        )
    return None


def row_blocks(op: OpInfo, knobs: ContractionKnobs) -> bool:
    """Whether the rows are split into MC-row blocks: only whole blocks of whole row tiles
    (MC divides M, MR divides MC); other MC values leave the rows in one block."""
    m, mc, mr = op.dims["M"], knobs.mc, knobs.mr
    return mc < m and m % mc == 0 and mc % mr == 0


def rows_schedule(op: OpInfo, knobs: ContractionKnobs) -> ir.Module:
    """Schedule for an annotated matmul or batch_matmul root `op` of one column (see
    `rows_unusable`), with its fill and any element-wise epilogue."""
    problem = rows_unusable(op)
    if problem:
        raise UsageError(f"schedule contraction: {problem}", stage="schedule")
    batch_dims = 1 if op.kind == "batch_matmul" else 0
    ones, zeros = [1] * batch_dims, [0] * batch_dims
    m, k = op.dims["M"], op.dims["K"]
    blocks = row_blocks(op, knobs)
    mc = knobs.mc if blocks else m
    mr, kc = min(knobs.mr, mc), min(knobs.kc, k)
    with ScheduleBuilder("contraction_rows") as s:
        if blocks:
            # Whole MC-row blocks of the last op, the fill and the contraction fused: an
            # scf.forall spread over the threads when THREADS > 1.
            s.fuse_with_loops(
                s.output_op(op), [*ones, mc, 0], step="row_blocks", parallel=knobs.threads > 1
            )
        function = s.match(s.root, ["func.func"], step="match_function")
        contraction = s.match_root(s.root, op.kind, step="match_contraction")
        contraction, row_loops = s.tile(contraction, [*ones, mr, 0, 0], step="row_tiles")
        others = s.match(s.root, POINTWISE, step="match_elementwise")
        _, elementwise_loops = s.tile(others, [*ones, mr, 0], step="row_tiles_elementwise")
        if k % kc and k > kc:
            # The last K % KC steps in an op of their own, which adds them to the main
            # op's result: summed straight into the rows, not through the accumulators.
            contraction, _ = s.split(contraction, batch_dims + 2, k - k % kc, step="split_k_tail")
        s.tile_reduction(contraction, [*zeros, 0, 0, kc], step="k_vector_accumulators")
        if mc % mr:
            for loop_handle in (row_loops[-1], elementwise_loops[-1]):
                s.peel(loop_handle, step="peel_row_tiles")
        s.canonicalize_loops(function, step="static_tiles")
        s.vectorize_linalg(function, reductions_to_contract=False)
        s.drop_leading_unit_dims(function)
        s.hoist_invariant_subsets(function)
        s.allow_fma(function)
        s.lower_row_reductions(function)
        # Each row's lanes summed as a tree, not lane after lane.
        with s.at("reassociate_row_sums"):
            sums = s.match(function, ["vector.reduction"], step="match_row_sums")
            fastmath = ir.Attribute.parse("#arith.fastmath<reassoc,contract>")
            param = transform.ParamConstantOp(transform.AnyParamType.get(), fastmath).param
            transform.AnnotateOp(sums, "fastmath", param=param)
    return s.module
