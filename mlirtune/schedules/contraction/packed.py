"""The contraction family's packed path: a Goto/BLIS loop nest with packed panels.

Loops, outermost first: N by NC, K by KC, M by MC, then the register tiles, M by MR outer
and N by NR inner, around a K loop of step 1. The MR x NR x KC matmul of a register tile
is padded (`transform.structured.pad`, nofold) and the pads are hoisted out of the loops
their operand does not depend on (`transform.structured.hoist_pad`), which turns them into
packing loop nests:
- B's KC x NR micro-panels are packed once per KC x NC block, before the MC loop, into a
  contiguous [NC/NR, KC, NR] buffer that every row of register tiles then streams from L2;
- A's MR x KC micro-panel (PACK=2) is copied once per row of register tiles, before the
  NR loop that re-reads it from L1; an A stored [K, M] is packed per MC x KC block.
This is BLIS's order with A and B in each other's roles, because here B's rows are the
vectors and A's elements the broadcasts: the broadcast micro-panel stays in L1 while the
vector panels stream. With the NR loop outer, B's micro-panel streamed from L2 for every
MR tile, and C's tiles of consecutive calls lay rows apart (2048^3 f32 on an Intel Xeon:
0.98x -> 1.04x OpenBLAS; Llama 256x11008x4096 1.03x -> 1.08x). The micro-kernel is the
broadcast/FMA outer product of the unpacked path, its accumulators hoisted into
registers. Packing happens inside the timed call, as numpy's does.

ORDER=2 (with PACK=2) turns the register tiles' loops around, N by NR outer and M by MR
inner: BLIS's own order, which the selector takes where packed_order.py says (AVX2's
narrow tiles, A's rows in one L1 set). A is packed a whole MC x KC block at a time (into
L2); B's KC x NR micro-panel, where KC x NR fits L1, then stays there for the MC / MR
tiles that reuse it, and only A's MR elements per K step stream from L2. C's column panel
is re-read from L3 every K block, where M x NC passes L2.

Remainders: the rows past M's last whole register tile and the columns past N's are split
off into nests of their own (packed_tails.py), and the first K block takes K's
remainder, so that shapes whose M and N blocks are whole keep a static nest. Partial M and
N blocks and register tiles are padded: the register-tile matmul is padded to the static
MR x NR x KC, so the micro-kernel stays full-size; the packing copies of a partial panel
are masked and write zeros past its edge, and the fill and epilogue tiles of a partial
block are masked vectors. What is left unvectorized is the pad of a partial C tile (and of
A's partial panel with PACK=1), once per such tile and K block. MR and NR must divide MC
and NC (the packed buffers' panel counts).

The contraction is split (`transform.structured.split`) into the first K block and the
later ones, each with its own nest. The fill is tiled and fused into the first block's
register tiles: their accumulators start at zero, so C is neither filled by a pass of its
own nor read back before the first K block (4096x4096x256 f32, where C is 64 MB: 0.94x ->
1.07x OpenBLAS; 2048^3 0.98x -> 1.03x). An element-wise epilogue (bias, ReLU) is fused
into the NC loop. Where K is one block and the blocks and register tiles are whole, the
epilogue's register tiles take the contraction's in: it applies to the accumulators in
registers and C is stored once (MLP 512x4096x1024 f32 on an Intel Xeon: 1.09x -> 1.12x
numpy's three ops). Otherwise it runs as register-tiled loops over the column block's C
panel after its K blocks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import transform
from mlir.dialects.transform import loop, structured
from mlir.dialects.transform import tensor as ttensor
from mlir.dialects.transform import vector as tvector

from mlirtune.interfaces.dtype import dtype_named
from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.op import OpInfo
from mlirtune.schedules.builder import ScheduleBuilder
from mlirtune.schedules.contraction.fusion import POINTWISE
from mlirtune.schedules.contraction.knob_values import PACK_AB, ContractionKnobs
from mlirtune.schedules.contraction.packed_panels import (
    COPY_ROWS,
    TRANSPOSE_SQUARES,
    packing_nests,
    transpose_square,
    vectorize_copies,
)
from mlirtune.schedules.contraction.packed_tails import (
    PackedNest,
    packed_nest,
    schedule_column_tail,
    schedule_epilogue_tails,
    schedule_row_tail,
    tile_shared,
)
from mlirtune.schedules.contraction.steps.prefetch_ahead import AHEAD_ATTRIBUTE
from mlirtune.schedules.contraction.steps.prefetch_panel import PANEL_ATTRIBUTE
from mlirtune.schedules.contraction.steps.widen import vectorize_widening, widened_view


def unpackable(op: OpInfo, knobs: ContractionKnobs) -> str | None:
    """Why `knobs` cannot take the packed path on `op` (None: they can). The same
    conditions are the family's `pack_*` constraints."""
    if op.kind != "matmul":
        return f"pack_needs_matmul: PACK > 0 packs matmul roots only, not {op.kind}"
    if knobs.order == 2 and knobs.pack != PACK_AB:
        return f"pack_unrolls_nothing: ORDER=2 (N outer) packs A per block, with PACK={PACK_AB}"
    m, n = op.dims["M"], op.dims["N"]
    if (knobs.mc % knobs.mr and knobs.mc < m) or (knobs.nc % knobs.nr and knobs.nc < n):
        return (
            f"pack_needs_whole_panels: MR must divide MC and NR must divide NC (got "
            f"MR={knobs.mr}, MC={knobs.mc}, NR={knobs.nr}, NC={knobs.nc})"
        )
    return None


@dataclass(frozen=True)
class _Packed:
    """What every step of `packed_schedule` reads: the root, its knobs and the nest."""

    op: OpInfo
    knobs: ContractionKnobs
    nest: PackedNest
    depths: list[int]  # K extents of the first K block and, past it, of each later block
    pack_a: bool  # PACK=2: A's micro-panels are packed too
    prefetch: int  # PREFETCH where A is read in place, else 0
    tile_order: list[int]  # the register tiles' loops: [] for M outer, N inner
    zeros: list[ir.Attribute]  # padding values, in the (widened) operand types
    widened: bool  # the operands are widened copies (widen.py), vectorized here
    parallel: bool  # THREADS > 1: the column blocks are an scf.forall

    @property
    def tails(self) -> bool:
        return bool(self.nest.rows_past or self.nest.columns_past)

    @property
    def epilogue(self) -> bool:
        return bool(self.op.attributes.get("epilogue"))

    @property
    def epilogue_in_registers(self) -> bool:
        """An epilogue on one K block of whole tiles takes the accumulators in registers."""
        whole = not (self.nest.partial or self.nest.partial_tiles)
        return self.epilogue and len(self.depths) == 1 and whole


def packed_schedule(op: OpInfo, knobs: ContractionKnobs) -> ir.Module:
    """Schedule for an annotated matmul root `op` whose M, N and K the cache tiles divide
    (see `unpackable`)."""
    problem = unpackable(op, knobs)
    if problem:
        raise UsageError(f"schedule contraction: {problem}", stage="schedule")
    plan = _packed_plan(op, knobs)
    with ScheduleBuilder("contraction_packed") as s:
        column_block = _column_blocks(s, plan)
        function, blocks, copy_rows, square = _k_blocks(s, plan, column_block)
        _pointwise_tiles(s, plan, function)
        args = (plan.pack_a, bool(plan.tile_order), plan.zeros, len(blocks), copy_rows, square)
        packs = packing_nests(s, plan.op, plan.nest, *args)
        _vectorize_and_lower(s, plan, packs, copy_rows, square)
    return s.module


def _packed_plan(narrow: OpInfo, knobs: ContractionKnobs) -> _Packed:
    """The nest (M and N less the tails split off, `packed_tails.py`) and the choices its
    steps share, on the operands as the nest reads them: widened (widen.py: bf16 to f32,
    int8 to int32), they are padded with wide zeros and the nest is the wide type's."""
    op = widened_view(narrow, knobs.pack, knobs.unit)
    pack_a = knobs.pack == PACK_AB
    transposed_a = bool(op.attributes.get("transpose_a"))
    nest = packed_nest(op, knobs)
    return _Packed(
        op=op,
        knobs=knobs,
        nest=nest,
        depths=_k_block_depths(op.dims["K"], nest.kc),
        pack_a=pack_a,
        # A [M, K] read in place: each row of register tiles prefetches the next row's A
        # panel, and with PREFETCH=2 its K loops B's panel rows ahead.
        prefetch=knobs.prefetch if not (pack_a or transposed_a) else 0,
        # ORDER=2 with A packed: the register tiles walk N outer, M inner (module docstring).
        tile_order=[1, 0, 2] if pack_a and knobs.order == 2 else [],
        zeros=[dtype_named(name).zero() for name in op.dtypes],
        widened=op is not narrow,
        parallel=knobs.threads > 1,
    )


def _column_blocks(s: ScheduleBuilder, plan: _Packed) -> ir.Value:
    """NC columns at a time of the last op (the epilogue, else the contraction), with its
    producers fused: the fill, the contraction and the epilogue of one column block run in
    turn while its C panel is in cache; an scf.forall over the threads with THREADS > 1.
    The tails are split off first."""
    op, nest = plan.op, plan.nest
    m, n, k, nc = nest.m, nest.n, nest.k, nest.nc
    output = s.output_op(op)
    if plan.tails and plan.epilogue:
        past, tile = (nest.rows_past, nest.columns_past), (nest.mr, nest.nr)
        return schedule_epilogue_tails(s, output, op.kind, (m, n, k), past, tile, nc, plan.parallel)
    # Tails are split off the contraction, the output op where there are any.
    if nest.rows_past:
        output = schedule_row_tail(s, output, (m, n, k), nest.rows_past, nest.nr, plan.parallel)
    if nest.columns_past:
        output = schedule_column_tail(s, output, n, nest.columns_past, nest.mr, plan.parallel)
    column_block, _ = s.fuse_with_loops(
        output, [0, nc], step="cache_tile_n", parallel=plan.parallel
    )
    return column_block


def _k_blocks(
    s: ScheduleBuilder, plan: _Packed, column_block: ir.Value
) -> tuple[ir.Value, list[ir.Value], list[int], int]:
    """The M and register tiles of each K block: the first takes the fill in (tile and
    fuse), so its accumulators start at zero and C is not filled, then read back, by a pass
    of its own; the later blocks accumulate onto its C. Returns the function, the K blocks'
    ops, the K rows each packing copy of a block moves, and B's transposed squares' side."""
    op, nest, knobs = plan.op, plan.nest, plan.knobs
    mc, kc, mr, nr = nest.mc, nest.kc, nest.mr, nest.nr
    # An epilogue on one K block of whole tiles is the op the M and register tiles are cut
    # from, the contraction and the fill fused into its tiles: it takes the accumulators in
    # registers, and C is stored once (see the module docstring).
    if plan.epilogue_in_registers:
        rows = s.fuse(column_block, [mc, 0], step="cache_tile_m")
        _, (row_loop, _) = s.fuse_with_loops(
            rows,
            [mr, nr],
            step="register_tile",
            interchange=plan.tile_order[:2],  # M, N only
        )
        _prefetch_next_panels(s, row_loop, plan.prefetch)
    # Drop what the fusion left behind (the unfused contraction, when NC is all of N).
    function = s.match(s.root, ["func.func"], step="match_function")
    s.canonicalize(function, step="drop_fused_originals")
    contraction = s.match_root(s.root, op.kind, step="match_contraction")
    blocks = _first_k_block_apart(s, function, contraction, plan.depths)
    # The side of B's transposed squares (0: none), and per K block the K rows each
    # packing copy moves.
    square = transpose_square(op, knobs, nr, plan.depths)
    copy_rows = [square or math.gcd(depth, COPY_ROWS) for depth in plan.depths]
    if not plan.epilogue_in_registers:
        first = s.fuse(blocks[0], [mc, 0, 0], step="cache_tile_m")
        _, (row_loop, _) = s.fuse_with_loops(
            first, [mr, nr, 0], step="register_tile", interchange=plan.tile_order
        )
        _prefetch_next_panels(s, row_loop, plan.prefetch)
    if len(blocks) > 1:  # the later K blocks accumulate onto the first's C
        rest, _ = s.tile(blocks[1], [0, 0, kc], step="cache_tile_k")
        rest, _ = s.tile(rest, [mc, 0, 0], step="cache_tile_m_rest")
        _, (row_loop, _) = s.tile(
            rest, [mr, nr, 0], step="register_tile_rest", interchange=plan.tile_order
        )
        _prefetch_next_panels(s, row_loop, plan.prefetch)
    return function, blocks, copy_rows, square


def _pointwise_tiles(s: ScheduleBuilder, plan: _Packed, function: ir.Value) -> None:
    """Register tiles of the epilogue, and of a fill that could not be fused (a partial
    column block's slice of it is not folded away): its own pass over C. Then the slices
    of slices the tiling left are folded, which hoisting cannot see through."""
    nest = plan.nest
    for name in () if plan.epilogue_in_registers else POINTWISE:
        others = s.match(s.root, [name], step=f"match_{name}")
        # All of C's fill, outside the column blocks' forall: its rows in one too.
        share = plan.parallel and plan.tails and not plan.epilogue and name == "linalg.fill"
        step = f"register_tile_{name}"
        tiled, _ = tile_shared(s, others, [nest.mr, 0], [0, nest.nr], step, share)
        if nest.partial_tiles or plan.tails:  # with tails, the fill is all of C's
            with s.at(f"vectorize_{name}"):
                structured.VectorizeOp(tiled, vector_sizes=[nest.mr, nest.nr])
    if plan.tails and not nest.partial_tiles:
        # The masked fill tiles' masks go into each transfer (see fold_masks), before the
        # packing copies exist: these patterns turn a whole panel's copy into slices, which
        # bufferize into a generic memref.copy (1000x999x1001 f32: 15.9 ms with them,
        # against 13.5 ms for the 992 whole columns alone).
        s.apply_patterns(
            function, "fold_tile_masks", tvector.apply_patterns_vector_lower_masked_transfers
        )
    s.apply_patterns(
        function,
        "fold_slices",
        loop.apply_patterns_scf_for_loop_canonicalization,
        ttensor.apply_patterns_tensor_merge_consecutive_insert_extract_slice,
    )


def _vectorize_and_lower(
    s: ScheduleBuilder,
    plan: _Packed,
    packs: dict[str, list[ir.Value]],
    copy_rows: list[int],
    square: int,
) -> None:
    """Vectorize the packing copies (`vectorize_copies`), then the rest of the function, and
    lower the micro-kernel's contractions to broadcasts and FMAs."""
    op, nest, knobs = plan.op, plan.nest, plan.knobs
    function = s.match(s.root, ["func.func"], step="match_function_again")
    s.canonicalize(function, step="fold_unit_pads")
    vectorize_copies(s, op, nest, packs, copy_rows, square)
    if nest.partial or nest.partial_tiles:
        # Masked copies (a partial panel) and masked fill and epilogue tiles: the mask goes
        # into each transfer, before later patterns rewrite the masked op into several (a
        # mask left around a fill's write fails to lower).
        s.apply_patterns(
            function, "fold_masks", tvector.apply_patterns_vector_lower_masked_transfers
        )
    if plan.widened:
        vectorize_widening(s)
    s.vectorize_linalg(function)
    if square:
        _, strategy, avx2 = TRANSPOSE_SQUARES[knobs.vector_bits]
        s.apply_patterns(
            function,
            "lower_pack_transposes",
            lambda: tvector.apply_patterns_vector_lower_transpose(
                lowering_strategy=strategy, avx2_lowering_strategy=avx2
            ),
            canonicalize=False,
        )
    if nest.mr == 1:
        # One-row register tiles: their accumulators' unit leading dim made lower_vectors
        # loop without end (past 14 GB for a 1 x 4096 x 11008 matrix-vector product), as on
        # the unpacked path (contraction_schedule in transform.py): drop it first.
        s.drop_leading_unit_dims(function)
    s.hoist_invariant_subsets(function)
    # One-column register tiles: see contraction_schedule (transform.py).
    s.lower_vectors(function, canonicalize=nest.nr != 1)


def _prefetch_next_panels(s: ScheduleBuilder, row_loop: ir.Value, prefetch: int) -> None:
    """Mark a loop over rows of register tiles (MR outer, NR inner) whose A is read in
    place, where PREFETCH > 0: the prefetch-next-panel step (ir/prefetch_panel.py) has each
    row prefetch the next row's A panel over its NR tiles; with PREFETCH=2, the
    prefetch-panel-ahead step (ir/prefetch_ahead.py) has their K loops prefetch B's panel
    rows ahead too (see packed_host.prefetch_level)."""
    marks = ((1, PANEL_ATTRIBUTE, "mark_prefetch_panel"), (2, AHEAD_ATTRIBUTE, "mark_ahead"))
    for level, attribute, step in marks:
        if prefetch >= level:
            with s.at(step):
                transform.AnnotateOp(row_loop, attribute)


def _k_block_depths(k: int, kc: int) -> list[int]:
    """K extents of the first K block's op and, where K is more than one block, of each
    block of the later blocks' op. The first block takes K's remainder, so that KC divides
    the rest and every block is static (a partial last block is padded per register tile,
    unvectorized where A is read in place: 1000x1024x1001 f32 at KC=500 ran at 0.16x
    OpenBLAS, against 0.95x at K=1000)."""
    return [k] if k <= kc else [k % kc or kc, kc]


def _first_k_block_apart(
    s: ScheduleBuilder, function: ir.Value, contraction: ir.Value, depths: list[int]
) -> list[ir.Value]:
    """The contraction as one op when K is one block, else split after the first block
    (`_k_block_depths`) into its op (which reads the fill) and the later blocks' op (which
    reads the first's C)."""
    if len(depths) == 1:
        return [contraction]
    blocks = s.split(contraction, 2, depths[0], step="split_first_k_block")
    # The split slices the fill's result whole; fold that, so tile and fuse finds the fill.
    s.canonicalize(function, step="fold_split")
    return list(blocks)
