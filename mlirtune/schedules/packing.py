"""Packed matmul: operands repacked into register-tile blocks before the micro-kernel.

`transform.structured.pack` packs the matmul's M, N and K loops by MR, NR and KB, and
`pack_transpose` reorders the blocks: A becomes [M/MR, K/KB, KB, MR] (an MR column per K
step), B [N/NR, K/KB, KB, NR] (each KB x NR panel contiguous, a column of panels after each
other) and C [M/MR, N/NR, MR, NR]. The pack and unpack ops are lowered to reshapes and
transposes, which are tiled per block and vectorized; the packed
contraction is tiled to one MR x NR block and a K step of one, and vectorized like the plain
contraction's micro-kernel. Only shapes that the pack sizes divide are supported (there is
no padding): other sizes fall back to the largest divisor of the loop below them.
"""

from __future__ import annotations

import math

from mlir import ir
from mlir.dialects import transform
from mlir.dialects.transform import structured

from mlirtune.ir.roots import OpInfo
from mlirtune.schedules.builder import ScheduleBuilder
from mlirtune.schedules.knobs import Knob, cache_tiles, register_rows, vector_columns

PACKED_CONTRACTION_PARAMETERS = {"MR": 8, "NR": 32, "KB": 64}
PACKED_CONTRACTION_KNOBS = (
    Knob("MR", "rows of the register tile and of A's pack blocks", register_rows("M")),
    Knob(
        "NR",
        "columns of the register tile and of B's pack blocks",
        vector_columns("N", (1, 2, 4)),
    ),
    Knob("KB", "depth of the pack blocks (K loop step)", cache_tiles("K", floor=8)),
)


def _divisor(size: int, target: int) -> int:
    """The largest divisor of `size` that is at most `target`."""
    return next(d for d in range(min(size, target), 0, -1) if size % d == 0)


def packed_contraction_schedule(op: OpInfo, parameters: dict[str, int]) -> ir.Module:
    """Schedule for an annotated matmul root `op` with packed operands."""
    m, n, k = op.dims["M"], op.dims["N"], op.dims["K"]
    p = parameters
    # Pack sizes that do not divide their loop are lowered to the largest divisor (there is
    # no padding): a prime size packs by 1, slow but correct.
    mr, nr, kb = (_divisor(size, p[name]) for size, name in ((m, "MR"), (n, "NR"), (k, "KB")))
    any_op = transform.AnyOpType.get()

    def typed(name: str) -> ir.Type:
        return transform.OperationType.get(name)

    with ScheduleBuilder("packed_contraction") as s:
        contraction = s.match_root(s.root, op.kind, step="match_contraction")
        with s.at("pack"):
            packed = structured.PackOp(
                any_op, contraction, [], static_packed_sizes=[mr, nr, kb]
            ).result
        # A: [M/MR, K/KB, MR, KB] -> [M/MR, K/KB, KB, MR]: an MR column per K step.
        a_pack = s.producer(packed, 0, step="match_pack_a")
        with s.at("pack_transpose_a"):
            packed = structured.PackTransposeOp(
                any_op, any_op, any_op, a_pack, packed, inner_perm=[1, 0]
            ).packed_op
        # B: [K/KB, N/NR, NR, KB] -> [N/NR, K/KB, KB, NR]: a contiguous KB x NR panel per
        # block, rows of NR elements, and a column of blocks after each other.
        b_pack = s.producer(packed, 1, step="match_pack_b")
        with s.at("pack_transpose_b"):
            packed = structured.PackTransposeOp(
                any_op, any_op, any_op, b_pack, packed, outer_perm=[1, 0], inner_perm=[1, 0]
            ).packed_op
        # Folds the fill of C into its pack (a fill of the packed tensor).
        function = s.match(s.root, ["func.func"], step="match_function")
        s.canonicalize(function, step="fold_fill_into_pack")
        # Loops (m block, n block, k block, k step) around one MR x NR outer product.
        s.tile(packed, [1, 1, 1, 0, 0, 1], step="block_tile")
        fills = s.match(s.root, ["linalg.fill"], step="match_fill")
        s.tile(fills, [1, 1, 0, 0], step="tile_fill")
        with s.at("lower_pack"):
            packs = transform.CastOp(typed("linalg.pack"), s.match(s.root, ["linalg.pack"]))
            lowered = structured.LowerPackOp(
                typed("tensor.pad"),
                typed("tensor.expand_shape"),
                typed("linalg.transpose"),
                packs,
                lowerPadLikeWithInsertSlice=True,
            )
        s.tile(lowered.transpose_op, [1, 1, math.gcd(kb, 8), 0], step="tile_pack_transposes")
        with s.at("lower_unpack"):
            unpacks = transform.CastOp(typed("linalg.unpack"), s.match(s.root, ["linalg.unpack"]))
            unlowered = structured.LowerUnPackOp(
                typed("tensor.empty"),
                typed("linalg.transpose"),
                typed("tensor.collapse_shape"),
                typed("tensor.extract_slice"),
                unpacks,
                lowerUnpadLikeWithExtractSlice=True,
            )
        s.tile(unlowered.transpose_op, [1, 0, 1, 0], step="tile_unpack_transpose")
        copies = s.match(s.root, ["linalg.copy"], step="match_unpack_copy")
        s.tile(copies, [mr, nr], step="tile_unpack_copy")
        epilogue = s.match_generic(s.root, ["parallel", "parallel"], step="match_elementwise")
        s.tile(epilogue, [mr, nr], step="tile_elementwise")
        function = s.match(s.root, ["func.func"], step="match_function_again")
        s.apply_patterns(
            function,
            "fold_unit_dims",
            structured.apply_patterns_linalg_fold_unit_extent_dims_via_slices,
        )
        function = s.vectorize_function(function)
        s.drop_leading_unit_dims(function)
        s.hoist_invariant_subsets(function)
        # Packed kernels broadcast and transpose A's column: canonicalizing while lowering
        # broadcasts crashes the pattern driver; the host pipeline canonicalizes later.
        s.lower_vectors(function, canonicalize=False)
    return s.module
