"""The packed nest's panels (packed.py): each K block's register-tile matmul padded to its
static size and the pads hoisted out of the loops their operand does not depend on, which
turns them into packing nests, and the packing copies vectorized a few K rows at a time.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import transform
from mlir.dialects.transform import structured
from mlir.dialects.transform import vector as tvector

from mlirtune.interfaces.op import OpInfo
from mlirtune.schedules.builder import ScheduleBuilder
from mlirtune.schedules.contraction.knob_values import ContractionKnobs
from mlirtune.schedules.contraction.packed_tails import PackedNest

# K rows (of B) or columns (of A) each vectorised packing copy moves.
COPY_ROWS = 8
# B stored [N, K] is transposed into its panels in squares of one register's f32 lanes,
# which MLIR lowers to register shuffles (the 16x16 sequence on AVX-512, AVX2's 8x8 one);
# as [NR, COPY_ROWS] blocks it went element by element (128x256x1024: 0.53 -> 0.46 ms).
# Keyed by VECTOR_BITS: (side, lowering strategy, AVX2 8x8 sequence).
TRANSPOSE_SQUARES = {
    512: (16, tvector.VectorTransposeLowering.Shuffle16x16, False),
    256: (8, tvector.VectorTransposeLowering.EltWise, True),
}


def _panel_dims(op: OpInfo, name: str, rows: int, width: int) -> tuple[list[int], list[int]]:
    """Tile sizes and vector sizes of one copy of operand `name`'s padded panel: `rows` of
    K by the panel's `width` (MR or NR), in the order the operand stores them. K is the
    outer dim of B [K, N] and of A stored as [K, M], the inner one of A [M, K] and of B
    stored as [N, K]."""
    k_outer = (name == "b") != bool(op.attributes.get(f"transpose_{name}"))
    return ([rows, 0], [rows, width]) if k_outer else ([0, rows], [width, rows])


def packing_nests(
    s: ScheduleBuilder,
    op: OpInfo,
    nest: PackedNest,
    pack_a: bool,
    n_outer: bool,
    zeros: list[ir.Attribute],
    blocks: int,
    copy_rows: list[int],
    square: int,
) -> dict[str, list[ir.Value]]:
    """Pad each K block's register-tile matmul (nofold) and hoist the pads into packing
    nests: B's above the NR, MR and MC loops; A's micro-panel copy above the NR loop that
    re-reads it. An A stored [K, M] is packed a whole MC x KC block at a time, above the MR
    loop too: copied a micro-panel at a time, its rows (a row of A apart) left the caches
    before the next panel's copy read them again (1024x2048x4096 f32: 180 against 142 ms).
    Loops of one iteration were folded away above and do not count. Where the NR loop was
    folded, B has no panels to pack (hoist_pad takes no nest without one): it is read in
    place, its pad folds away. Returns the packing ops per operand (none where it is read
    in place). `blocks` is the number of K blocks' ops; `n_outer`, whether the register tiles
    walk N outer (ORDER=2)."""
    transposed_a = bool(op.attributes.get("transpose_a"))
    # Whether the MR, NR and MC loops are there (more than one iteration).
    mr_loop, nr_loop, mc_loop = nest.mc > nest.mr, nest.nc > nest.nr, nest.m > nest.mc
    hoists = {
        "b": mr_loop + nr_loop + mc_loop if nr_loop else 0,
        "a": nr_loop + ((transposed_a or n_outer) and mr_loop) if pack_a else 0,
    }
    # B stored [N, K] is packed transposed (hoist_pad's `transpose`): see below.
    transposes = {"a": None, "b": [1, 0] if op.attributes.get("transpose_b") else None}
    packs: dict[str, list[ir.Value]] = {"a": [], "b": []}
    any_op = transform.AnyOpType.get()
    tiles = s.match_root(s.root, op.kind, step="match_register_tiles")
    for block, tile in enumerate(_split(s, tiles, blocks, step="split_register_tiles")):
        with s.at(f"pad_{block}"):
            padded = structured.PadOp(
                tile,
                padding_values=zeros,
                padding_dimensions=[0, 1, 2],
                nofold_flags=[int(hoists["a"] > 0), int(hoists["b"] > 0), 0],
                copy_back_op="none",
            ).padded
        for operand, name in ((1, "b"), (0, "a")):
            if hoists[name]:
                pad = s.producer(padded, operand, step=f"match_pack_{name}_{block}")
                with s.at(f"pack_{name}_{block}"):
                    packs[name].append(
                        structured.HoistPadOp(
                            any_op, pad, hoists[name], transpose=transposes[name]
                        ).transformed
                    )
        if transposes["b"] and hoists["b"]:
            packs["b"][-1] = _transposing_copy(s, packs["b"][-1], copy_rows[block], square, block)
    contraction = s.match_root(s.root, op.kind, step="match_micro_kernel")
    if transposes["b"]:
        s.fuse(contraction, [0, 0, 1], step="k_step")
    else:
        s.tile(contraction, [0, 0, 1], step="k_step")
    return packs


def _transposing_copy(
    s: ScheduleBuilder, pack: ir.Value, rows: int, square: int, block: int
) -> ir.Value:
    """B stored [N, K]: the packing nest transposes each [NR, KC] panel into the [KC, NR]
    layout of the plain path, in register squares where it can (TRANSPOSE_SQUARES), else a
    few K rows at a time (as the copies below), so the micro-kernel reads rows of NR
    contiguous elements; its transpose back, fused into the K step, is one [1, NR] row. The
    panel's copy is fused into the same loop: B's rows go straight into the transposes,
    not through a copy of the panel first (128x1024x256: 0.78-0.86 -> 0.71-0.76 ms). The
    packing transpose is the hoisted pad's consumer."""
    with s.at(f"match_pack_transpose_{block}"):
        packing = transform.GetConsumersOfResult(transform.AnyOpType.get(), pack, 0).result
    _, (*_, pack_loop) = s.tile(  # the innermost loop
        packing, [rows, square], step=f"tile_pack_transpose_{block}"
    )
    return s.fuse_into(pack, pack_loop, step=f"fuse_pack_copy_{block}")


def vectorize_copies(
    s: ScheduleBuilder,
    op: OpInfo,
    nest: PackedNest,
    packs: dict[str, list[ir.Value]],
    copy_rows: list[int],
    square: int,
) -> None:
    """Vectorize the packing copies, B's first (it is hoisted further out), a few K rows at
    a time (whole-panel vectors would unroll into KC rows of code per panel), each in its
    operand's stored layout (`_panel_dims`)."""
    for name in (name for name in ("b", "a") if packs[name]):
        for block, pack in enumerate(packs[name]):
            width = nest.mr if name == "a" else square or nest.nr
            tile, sizes = _panel_dims(op, name, copy_rows[block], width)
            tiled, copy_loops = s.tile(pack, tile, step=f"tile_pack_{name}_{block}")
            # Unrolled by LLVM, a KC x NC block's copies were one block of 768 loads and
            # stores, about a second of instruction scheduling.
            s.keep_rolled(copy_loops, step=f"keep_pack_{name}_{block}_rolled")
            with s.at(f"vectorize_pack_{name}_{block}"):
                structured.VectorizeOp(tiled, vector_sizes=sizes)


def transpose_square(op: OpInfo, knobs: ContractionKnobs, nr: int, depths: list[int]) -> int:
    """The side of the squares B's panels are transposed in (TRANSPOSE_SQUARES); 0 where B
    is not stored [N, K], its elements are not f32, the registers have no shuffle sequence,
    or a side does not divide NR and every K block's depth. All or none: beside a K block
    packed in [NR, 1] transposes (K = 53 = 5 + 3 x 16), the squares' lowering patterns ran
    out of memory."""
    side, _, _ = TRANSPOSE_SQUARES.get(knobs.vector_bits, (0, None, False))
    if not side or not op.attributes.get("transpose_b") or op.dtypes[1] != "f32":
        return 0
    whole = nr % side == 0 and all(depth % side == 0 for depth in depths)
    return side if whole else 0


def _split(s: ScheduleBuilder, handle: ir.Value, count: int, step: str) -> list[ir.Value]:
    """`handle`'s `count` ops, one handle each, in program order (the first K block's op
    comes first: the later blocks' op reads its result)."""
    if count == 1:
        return [handle]
    any_op = transform.AnyOpType.get()
    with s.at(step):
        return list(transform.SplitHandleOp([any_op] * count, handle).results)
