"""The contraction family's paths on groups of K: dot products of bf16 or int8 pairs, AMX tiles.

One `vdpbf16ps` multiplies 16 pairs of bf16 values and adds each pair's two products to
one f32 lane: C[m, n:n+16] += A[m, k] * B[k, n:n+16] + A[m, k+1] * B[k+1, n:n+16], with
B's two rows interleaved (the VNNI layout, B_vnni[k // 2, n, k % 2]). The schedule packs
K by 2 (`transform.structured.pack`): A[M, K] becomes A[M, K/2, 2], a reshape, and B[K, N]
becomes B_vnni[K/2, N, 2], packed once per NC column block inside the timed call. The
cache and register tiles are those of the packed FMA path (packed.py); each register
tile's K step is unrolled into MR x NR/16 contractions of one row and 16 columns, which
the x86vector patterns turn into a broadcast of A's pair and one dot product each.

int8 matmuls take the same nest on int16 copies of their operands (widen.py), 8 columns
per contraction: the descriptor step `pair-products` (ir/pair_products.py) turns each into
one AVX2 `vpmaddwd` (8 pairs of int16 products, each pair summed into an int32 lane) and
an add.

B's pack interleaves two rows of B at a time into the pairs, as one shuffle.

The AMX path (UNIT=2) shares the packing and the cache tiles, with K in groups of 32 bits:
pairs of bf16, quads of int8 (taken as they are, not widened). Its register tile is up to
2 x 2 AMX tiles of C, 16 x 16 each, kept in tile registers across the K loop
(ir/amx_accumulators.py), and its K step 16 groups: one `tdpbf16ps` (or `tdpbssd`) per C
tile.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import transform
from mlir.dialects.transform import structured
from mlir.dialects.transform import vector as tvector

from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.op import OpInfo
from mlirtune.schedules.builder import ScheduleBuilder
from mlirtune.schedules.contraction.knob_values import UNIT_AMX, ContractionKnobs
from mlirtune.schedules.contraction.steps.amx_accumulators import (
    ACCUMULATE_ATTRIBUTE,
    LOADED_START,
    ZERO_START,
)
from mlirtune.schedules.contraction.steps.widen import vectorize_widening

# The K values a dot product pairs, and its lanes per operand type: the f32 lanes of one
# vdpbf16ps (a 512-bit register), the int32 lanes of one vpmaddwd (a 256-bit one).
DOT_PAIR = 2
DOT_LANES = {"bf16": 16, "i8": 8}
# An AMX tile product: C[16, 16] += A[16 rows, 16 groups] . B_vnni[16 groups, 16], a group
# being 32 bits of K: a pair of bf16 (tdpbf16ps, f32 sums) or a quad of int8 (tdpbssd, int32).
AMX_TILE, AMX_GROUPS = 16, 16
AMX_QUAD = 4
# AMX has 8 tile registers: an MR x NR register tile takes (MR/16)(NR/16) of C, MR/16 of
# A and NR/16 of B.
AMX_REGISTERS = 8
AMX_REGISTER_TILES = [
    (AMX_TILE * rows, AMX_TILE * columns)
    for rows in range(1, AMX_REGISTERS)
    for columns in range(1, AMX_REGISTERS)
    if rows * columns + rows + columns <= AMX_REGISTERS
]


def unpaired_layouts(op: OpInfo) -> list[str]:
    """The operands of `op` stored transposed (roots.py's `transpose_a` / `transpose_b`)
    that the pair paths cannot pack: A stored [K, M]. B stored [N, K] (a Linear layer's
    weight) is packed into the same groups, its pack's outer dims transposed
    (`transform.structured.pack_transpose`): each group is one 32-bit word of a row there
    (int8 on an AVX2 Zen 3, 256x4096x4096: 79 GOP/s against 47 on the int32 FMA path;
    bf16 on AMX tiles, Xeon with AMX, 2048^3: 820-925 GFLOP/s against 98 on the FMA
    path)."""
    return ["A"] if op.attributes.get("transpose_a") else []


def k_group(op: OpInfo, unit: int) -> int:
    """K values the micro-kernel `unit` packs into one 32-bit group of `op`: four int8 on
    AMX tiles, else a pair (bf16, or int8 widened to int16)."""
    amx_int8 = unit == UNIT_AMX and op.element_type == "i8"
    return AMX_QUAD if amx_int8 else DOT_PAIR


def dot_unusable(op: OpInfo, knobs: ContractionKnobs) -> str | None:
    """Why `knobs` cannot take their pair path (dot products or AMX tiles) on `op`
    (None: they can). The same conditions are the family's `dot_*` and `amx_*` constraints."""
    m, n, k = op.dims["M"], op.dims["N"], op.dims["K"]
    if op.kind != "matmul" or op.element_type not in DOT_LANES:
        return (
            f"dot_needs_pair_types: UNIT={knobs.unit} takes bf16 or i8 matmul roots, not "
            f"{op.kind} of {op.element_type}"
        )
    lanes = DOT_LANES[op.element_type]
    refused = unpaired_layouts(op)
    if refused:
        return (
            f"dot_needs_plain_layout: UNIT={knobs.unit} packs K pairs of A [M, K] and "
            f"B [K, N] (or B [N, K]) only, not {op.element_type} operands stored "
            f"transposed ({', '.join(refused)})"
        )
    group = k_group(op, knobs.unit)
    if k % group or knobs.kc % group:
        return f"dot_needs_k_pairs: K={k} and KC={knobs.kc} must be multiples of {group}"
    if knobs.nr % lanes:
        return f"dot_needs_whole_vectors: NR={knobs.nr} must be a multiple of {lanes}"
    amx_tile = (knobs.mr, knobs.nr) in AMX_REGISTER_TILES and knobs.kc % (group * AMX_GROUPS) == 0
    if knobs.unit == UNIT_AMX and not amx_tile:
        return (
            f"amx_needs_whole_tiles: UNIT={UNIT_AMX} takes MR and NR multiples of {AMX_TILE} "
            f"whose C, A and B tiles fit the {AMX_REGISTERS} tile registers, and KC a "
            f"multiple of {group * AMX_GROUPS} (got MR={knobs.mr}, NR={knobs.nr}, "
            f"KC={knobs.kc})"
        )
    if m % knobs.mc or n % knobs.nc or k % knobs.kc or knobs.mc % knobs.mr or knobs.nc % knobs.nr:
        return (
            f"dot_needs_whole_blocks: MC, NC and KC must divide M={m}, N={n} and K={k}, and "
            f"MR and NR divide MC and NC (got MC={knobs.mc}, NC={knobs.nc}, KC={knobs.kc}, "
            f"MR={knobs.mr}, NR={knobs.nr})"
        )
    return None


def dot_schedule(op: OpInfo, knobs: ContractionKnobs) -> ir.Module:
    """Schedule for an annotated bf16 or i8 matmul root `op` that `knobs` fit (see
    `dot_unusable`), with its fill and any element-wise epilogue."""
    problem = dot_unusable(op, knobs)
    if problem:
        raise UsageError(f"schedule contraction: {problem}", stage="schedule")
    group, amx = k_group(op, knobs.unit), knobs.unit == UNIT_AMX
    # AMX tiles over all of K at once start from zero in tile registers
    # (ir/amx_accumulators.py): the fill goes into their register tiles, where that step
    # drops it, rather than filling C's column block in a pass of its own (16 MiB of dead
    # stores per 2048^3 call).
    zero_start = amx and knobs.kc == op.dims["K"]
    # B stored [N, K] on AMX tiles: each group is a 32-bit word of a row of B, so the pack
    # is a transpose of words, 16 x 16 at a time (ir/word_transposes.py); a pair of K rows
    # at a time, it read 2 bf16 from each of NR rows.
    word_squares = amx and bool(op.attributes.get("transpose_b"))
    pack_tile = [AMX_GROUPS, AMX_TILE] if word_squares else [1, knobs.nr]
    with ScheduleBuilder("contraction_dot") as s:
        _pack_k_pairs(s, op, group)
        b_pack = _b_pack_per_column_block(s, op, knobs, pack_tile)
        contraction = _register_tiles(s, op, knobs, group, zero_start)
        if amx:
            _amx_k_steps(s, contraction, knobs, zero_start)
        else:
            contraction, _ = s.tile(contraction, [0, 0, 1, 0], step="k_step")
            # One dot product per row and vector of columns of the register tile, unrolled.
            lanes = DOT_LANES[op.element_type]
            _, vector_loops = s.tile(contraction, [1, lanes, 0, 0], step="dot_tile")
            s.unroll(vector_loops[1], knobs.nr // lanes, step="unroll_columns")
            s.unroll(vector_loops[0], knobs.mr, step="unroll_rows")
        _vectorize_pairs(s, op, b_pack, [*pack_tile, group], amx, word_squares)
    return s.module


def _pack_k_pairs(s: ScheduleBuilder, op: OpInfo, group: int) -> None:
    """Pack the contraction's K into groups (pairs, or AMX's quads of int8): A's pack only
    splits its rows' K, so it is lowered to a reshape; B stored [N, K] packs into
    [N, K/2, 2], its outer dims swapped so that its pairs lie as those of B [K, N] do (see
    unpaired_layouts)."""
    any_op = transform.AnyOpType.get()
    contraction = s.match_root(s.root, op.kind, step="match_contraction")
    with s.at("pack_k_pairs"):
        packed = structured.PackOp(
            transform.OperationType.get("linalg.generic"),
            contraction,
            [],
            static_packed_sizes=[0, 0, group],
        ).packed_op
    packs = s.match(s.root, ["linalg.pack"], step="match_packs")
    pack_type = transform.OperationType.get("linalg.pack")
    with s.at("reshape_a"):
        a_pack, b_pack = transform.SplitHandleOp([any_op, any_op], packs).results
        if op.attributes.get("transpose_b"):
            structured.PackTransposeOp(
                transform.OperationType.get("linalg.generic"),
                pack_type,
                transform.OperationType.get("linalg.unpack"),
                transform.CastOp(pack_type, b_pack).result,
                packed,
                outer_perm=[1, 0],
            )
        structured.LowerPackOp(
            transform.OperationType.get("tensor.pad"),
            transform.OperationType.get("tensor.expand_shape"),
            transform.OperationType.get("linalg.transpose"),
            transform.CastOp(pack_type, a_pack).result,
        )


def _b_pack_per_column_block(
    s: ScheduleBuilder, op: OpInfo, knobs: ContractionKnobs, pack_tile: list[int]
) -> ir.Value:
    """NC columns at a time of the last op, with the fill and the contraction fused, as on
    the packed path (an scf.forall spread over the threads when THREADS > 1); B's pairs are
    packed per column block, into a buffer NC pairs wide: its rows stay close in the TLB
    and spread over L1's sets, whatever N is. The pack is tiled before the contraction,
    whose tile-and-fuse would take it into the register tiles. B [K, N]'s pack copies one
    pair of K rows across the register tile's NR columns at a time: its transpose
    interleaves the two rows, one shuffle (as i16 for bf16: ir/bf16_shuffles.py), which
    LLVM lowers to unpacks and lane permutes (AVX2: 2 loads, 2 vpunpck, 2 vperm2i128 and 2
    stores per pair of rows). Element by element, in [8, 16, 2] blocks, the copy took 40%
    of the int8 kernel's time (AVX2 Zen 3: 512^3 55 -> 95 GOP/s, 2048^3 88 -> 98,
    128x4096x4096 26 -> 78) and a third of the AMX path's (Xeon with AMX, 512^3 bf16: 580
    -> 800 GFLOP/s)."""
    parallel = knobs.threads > 1
    _, column_loops = s.fuse_with_loops(
        s.output_op(op), [0, knobs.nc], step="cache_tile_n", parallel=parallel
    )
    b_pack = s.match(s.root, ["linalg.pack"], step="match_b_pack")
    b_pack = s.fuse_into(b_pack, column_loops[0], step="pack_b_per_column_block")
    b_pack, _ = s.tile(b_pack, pack_tile, step="tile_b_pack")
    return b_pack


def _register_tiles(
    s: ScheduleBuilder, op: OpInfo, knobs: ContractionKnobs, group: int, zero_start: bool
) -> ir.Value:
    """The fill's (unless AMX tiles start from zero) and the epilogue's register tiles, and
    the contraction's cache and register tiles, the NR loop outer and the MR loop inner."""
    mc, kc, mr, nr = knobs.mc, knobs.kc, knobs.mr, knobs.nr
    if not zero_start:
        fill = s.match(s.root, ["linalg.fill"], step="match_fill")
        s.tile(fill, [mr, nr], step="register_tile_fill")
    epilogue = s.match_generic(s.root, ["parallel"] * 2, step="match_epilogue")
    s.tile(epilogue, [mr, nr], step="register_tile_epilogue")
    iterators = ["parallel", "parallel", "reduction", "reduction"]
    contraction = s.match_generic(s.root, iterators, step="match_pairs_contraction")
    if zero_start:
        contraction = s.fuse(contraction, [mc, 0, 0, 0], step="cache_tile_m")
        contraction, _ = s.fuse_with_loops(
            contraction, [mr, nr, 0, 0], step="register_tile", interchange=[1, 0]
        )
    else:
        contraction, _ = s.tile(contraction, [0, 0, kc // group, 0], step="cache_tile_k")
        contraction, _ = s.tile(contraction, [mc, 0, 0, 0], step="cache_tile_m")
        contraction, _ = s.tile(
            contraction, [mr, nr, 0, 0], step="register_tile", interchange=[1, 0, 2, 3]
        )
    return contraction


def _amx_k_steps(
    s: ScheduleBuilder, contraction: ir.Value, knobs: ContractionKnobs, zero_start: bool
) -> None:
    """16 groups of K at a time, the register tile's 16 x 16 C tiles unrolled: one VNNI
    vector.contract each, which convert-vector-to-amx (lower_cpu.yaml) turns into tile
    loads and a tile product. The K loop is marked so that its C tiles stay in tile
    registers across it (ir/amx_accumulators.py); over all of K at once, they start from
    the fill's zeros, in registers, not loaded from memory."""
    contraction, k_steps = s.tile(contraction, [0, 0, AMX_GROUPS, 0], step="tile_k_steps")
    with s.at("mark_tile_accumulators"):
        start = ZERO_START if zero_start else LOADED_START
        param = transform.ParamConstantOp(
            transform.AnyParamType.get(), ir.StringAttr.get(start)
        ).param
        transform.AnnotateOp(k_steps[0], ACCUMULATE_ATTRIBUTE, param=param)
    _unroll_amx_tiles(s, contraction, knobs.mr, knobs.nr, step="amx_tiles")


def _vectorize_pairs(
    s: ScheduleBuilder,
    op: OpInfo,
    b_pack: ir.Value,
    pack_sizes: list[int],
    amx: bool,
    word_squares: bool,
) -> None:
    """Vectorize B's pack and the rest, then lower what the lowering passes cannot: the
    int8 products' sign extensions (AMX takes int8 operands), the bf16 dot products
    (x86vector's packed-type patterns), and the pack's transposes into shuffles."""
    bf16 = op.element_type == "bf16"
    function = s.match(s.root, ["func.func"], step="match_function")
    s.shrink_temporaries(function)  # a [K/2, NC, 2] buffer per block, not a slice of B's
    s.canonicalize_loops(function, step="fold_slices")
    with s.at("vectorize_b_pack"):
        structured.VectorizeOp(b_pack, vector_sizes=pack_sizes)
    if not bf16 and not amx:
        vectorize_widening(s)  # the int16 copies of the int8 operands (widen.py)
    s.vectorize_linalg(function)
    if amx and not bf16:
        # The int8 products' sign extensions folded into the contractions: AMX takes int8
        # operands and int32 sums (tdpbssd).
        s.apply_patterns(
            function, "fold_extensions", tvector.apply_patterns_vector_fold_arith_extension
        )
    if not amx:
        if bf16:  # int8 pairs: the pair-products step, after bufferization
            with s.at("dot_products"):
                patterns = transform.ApplyPatternsOp(function)
                with ir.InsertionPoint(patterns.patterns):
                    ir.Operation.create(
                        "transform.apply_patterns.x86vector.vector_contract_to_packed_type_dot_product"
                    )
        s.drop_leading_unit_dims(function)
        s.hoist_invariant_subsets(function)
    # The B pack's transposes become shuffles; transfers stay n-D here, to be flattened
    # after bufferization (lower_cpu.yaml: flatten-narrow-transfers). The int8 pairs'
    # contractions keep their broadcasts, which the pair-products step matches (lowered
    # with them, the rewrite did not terminate).
    lowerings = [tvector.apply_patterns_vector_lower_broadcast] if bf16 else []
    if not word_squares:  # those go as words, after bufferization
        lowerings.append(
            lambda: tvector.apply_patterns_vector_lower_transpose(
                lowering_strategy=tvector.VectorTransposeLowering.Shuffle1D
            )
        )
    if lowerings:
        s.apply_patterns(function, "lower_pack_transposes", *lowerings)


def _unroll_amx_tiles(s: ScheduleBuilder, contraction: ir.Value, mr: int, nr: int, step: str):
    """Tile an MR x NR register tile's K step into 16 x 16 AMX tiles of C, unrolled."""
    split = [extent for extent in (mr, nr) if extent > AMX_TILE]
    sizes = [AMX_TILE if extent > AMX_TILE else 0 for extent in (mr, nr)]
    _, loops = s.tile(contraction, [*sizes, 0, 0], step=step)
    # The inner loop first: unrolling the outer one invalidates the inner one's handle.
    for loop_handle, extent in reversed(list(zip(loops, split, strict=True))):
        s.unroll(loop_handle, extent // AMX_TILE, step=f"unroll_{step}")
