"""Remainders of the packed contraction nest (packed.py): the rows past M's last whole
register tile and the columns past N's are split off (`transform.structured.split`) into
nests of their own, so that the packed nest's tiles stay static; under an element-wise
epilogue, they are peeled off a loop of the epilogue's instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir

from mlirtune.interfaces.op import OpInfo
from mlirtune.schedules.builder import ScheduleBuilder
from mlirtune.schedules.contraction.fusion import POINTWISE
from mlirtune.schedules.contraction.knob_values import ContractionKnobs

# Columns and K rows of B's blocks in the row tail's nest (`schedule_row_tail`).
TAIL_BLOCK = (128, 256)
# The largest share of N that a column tail grown to share the tiles out over the threads
# may take (`column_tail`): it runs apart from the column blocks, C filled by a pass of its
# own. Two threads of an Intel Xeon, f32, ratios to numpy's two, packed with the grown tail
# against unpacked in whole blocks: N=1000 (40 columns) 0.93x against 0.21x (no whole
# blocks); N=3000 (56 columns) 0.99x against 0.25x; but N=300 (44 columns) at M=2048 and K
# from 128 to 1024, 0.46-0.85x against 0.93-1.00x.
THREADS_TAIL_SHARE = 0.05


@dataclass(frozen=True)
class PackedNest:
    """The packed nest's extents (`packed_schedule`): M and N less the row and column tails
    split off, its cache blocks and its register tiles."""

    m: int
    n: int
    k: int
    mc: int
    nc: int
    kc: int
    mr: int
    nr: int
    rows_past: int
    columns_past: int

    @property
    def partial(self) -> bool:
        """Partial cache blocks in M or N (K's need no padding: the first K block takes
        K's remainder)."""
        return bool(self.m % self.mc or self.n % self.nc)

    @property
    def partial_tiles(self) -> bool:
        """Register tiles partial in M or N, in the last block or inside whole blocks that
        MR or NR do not divide: dynamic, their fill and epilogue masked."""
        return bool(self.m % self.mr or self.n % self.nc or self.nc % self.nr)

    @property
    def padded(self) -> bool:
        """Whether every register tile is dynamic, its panels padded per tile and K block
        (unvectorized where A is read in place): partial blocks or tiles."""
        return self.partial or self.partial_tiles


def packed_nest(op: OpInfo, knobs: ContractionKnobs) -> PackedNest:
    """The packed nest `packed_schedule` builds for `op` with these knobs."""
    m, n, k = op.dims["M"], op.dims["N"], op.dims["K"]
    mr, nr = min(knobs.mr, knobs.mc, m), min(knobs.nr, knobs.nc, n)
    rows_past = row_tail(op, mr, nr, knobs.kc)
    columns_past = column_tail(op, mr, nr, knobs.threads)
    m, n = m - rows_past, n - columns_past
    mc, nc, kc = min(knobs.mc, m), min(knobs.nc, n), min(knobs.kc, k)
    mr, nr = min(knobs.mr, mc), min(knobs.nr, nc)
    return PackedNest(m, n, k, mc, nc, kc, mr, nr, rows_past, columns_past)


def row_tail(op: OpInfo, mr: int, nr: int, kc: int) -> int:
    """Rows past M's last whole MR-row register tile, which `packed_schedule` splits off so
    that the packed nest's tiles stay static: padded partial tiles ran at 0.23x OpenBLAS
    (2048^3 f32 at 6 x 16 on an AMD Zen 3), and a prime M, left unpacked, at 0.24x (4099 x
    2048 x 2048; packed 4 x 16 with a 3-row tail, 0.71x), an MLP's at 0.49x its three numpy
    ops (509x4096x1024 on an Intel Xeon). 0 where there are none or M is one tile; and,
    untried, where NR does not divide N, A is stored transposed or not f32. Where K is one
    KC block, only for a B stored [N, K] (a Linear layer's weight), which the unpacked nest
    reads a row apart per K step: ViT's 197 x 768 x 192, 1.18x numpy against 0.60x
    unpacked; a plain B is read in place as well unpacked (1021 x 256 x 256: 1.05x against
    0.92x with a row tail, on an Intel Xeon)."""
    m, n, k = op.dims["M"], op.dims["N"], op.dims["K"]
    f32 = op.dtypes[:2] == ("f32", "f32")
    k_blocks = k > kc or bool(op.attributes.get("transpose_b"))
    tried = f32 and k_blocks and n % nr == 0 and not op.attributes.get("transpose_a")
    # One row would be a [1, N, K] op, whose schedule ran out of memory: MR + 1 rows instead.
    tail = m % mr + (mr if m % mr == 1 else 0)
    return tail if m > tail + mr and tried else 0


def column_tail(op: OpInfo, mr: int, nr: int, threads: int = 1) -> int:
    """Columns past N's last whole NR-wide register tile, which `packed_schedule` splits off
    so that the packed nest's tiles stay static; on several `threads`, where those tiles do
    not share out evenly, past the last whole group of one tile per thread (the column
    blocks, one scf.forall, must: 1000^3 f32 on two threads of an Intel Xeon, unpacked for
    want of them, ran at 0.21x numpy's two; in padded blocks, 0.33x), where that tail is at
    most THREADS_TAIL_SHARE of N. 0 where there are none; where M has a partial register
    tile too (the tiles are dynamic anyway, padded per tile; a row tail needs whole
    columns)."""
    m, n = op.dims["M"], op.dims["N"]
    if m % mr or m <= mr:
        return 0
    shared = n % (nr * threads)
    return shared if (n // nr) % threads and shared <= THREADS_TAIL_SHARE * n else n % nr


def schedule_column_tail(
    s: ScheduleBuilder,
    contraction: ir.Value,
    columns: int,
    tail: int,
    mr: int,
    parallel: bool = False,
) -> ir.Value:
    """Split the contraction at `columns` and schedule the op over the `tail` columns past
    them, in pieces of power-of-two widths down to 8 and then the rest: MR rows at a time,
    a K step of one outer product, vectorized now so that the packed nest's later matches
    skip it; it reads C as filled by a pass of its own. Padding those columns to a register
    tile instead makes every tile of the nest dynamic, each padded unvectorized (measured
    1000x1008x1000 f32: 0.48x OpenBLAS, against 0.95x at N=1024); the pieces keep vector
    widths LLVM does not split into odd parts (1024x1013x1024 f32 with a 53-column tail:
    0.34x in one piece, 0.90x in pieces). With `parallel`, the MR-row tiles are an
    scf.forall, spread over the threads. Returns the handle of the op over the first
    `columns`."""
    main, rest = s.split(contraction, 1, columns, step="split_column_tail")
    _sweep_pieces(s, rest, tail, ([mr, 0, 0], [0, 0, 1]), "column_tail", parallel)
    return main


def schedule_row_tail(
    s: ScheduleBuilder,
    contraction: ir.Value,
    shape: tuple[int, int, int],
    tail: int,
    nr: int,
    parallel: bool = False,
) -> ir.Value:
    """Split the contraction (M x N x K: `shape`) at M's first `rows` and schedule the op
    over the `tail` rows past them: blocks of B of at most TAIL_BLOCK[1] rows by TAIL_BLOCK[0]
    columns (a whole number of NR-wide tiles dividing N), read in place, each swept in
    NR-wide register tiles along K, vectorized now so that the packed nest's later matches
    skip it; it reads C as filled by a pass of its own. A K block keeps the rows of B one
    tile reads within the TLB's reach: B's rows lie N elements apart. With `parallel`, the
    column blocks are an scf.forall, spread over the threads. Returns the handle of the op
    over the first rows."""
    rows, n, k = shape
    main, rest = s.split(contraction, 0, rows, step="split_row_tail")
    most_columns, depth = TAIL_BLOCK
    width = max(w for w in range(nr, min(most_columns, n) + 1, nr) if n % w == 0)  # static
    blocks, _ = tile_shared(
        s, rest, [0, width, 0], [0, 0, min(depth, k)], "block_row_tail", parallel
    )
    _, (columns, _) = s.tile(blocks, [0, nr, 1], step="tile_row_tail")
    s.vectorize_linalg(columns)
    return main


def schedule_epilogue_tails(
    s: ScheduleBuilder,
    output: ir.Value,
    kind: str,
    nest: tuple[int, int, int],
    past: tuple[int, int],
    tile: tuple[int, int],
    nc: int,
    parallel: bool = False,
) -> ir.Value:
    """`schedule_row_tail` or `schedule_column_tail` under an element-wise epilogue
    (`output`), which a split would leave reading a slice of one whole contraction that no
    later tiling fuses. The packed nest's M x N x K is `nest`, the rows or columns past it
    `past` (one of them 0), its register tile MR x NR `tile`. The epilogue is tiled by the
    nest's rows or columns, the contraction and the fill fused in, and that loop peeled.
    The tail's copy then runs as its split-off counterpart's does, its fill and epilogue in
    the same register tiles, vectorized now, before the main part (a column tail's MR-row
    tiles spread over the threads with `parallel`, a row tail's on one thread). The main
    part's epilogue is cut into NC-column blocks with its producers fused (`parallel`: one
    scf.forall, spread over the threads, which a peel cannot take: hence the tail first).
    Returns the handle of those column blocks: the packed nest's."""
    m, n, k = nest
    rows_past, columns_past = past
    mr, nr = tile
    sizes = [m, 0] if rows_past else [0, n]
    _, (tail_loop,) = s.fuse_with_loops(output, sizes, step="block_main_part")
    main_part, rest = s.peel(tail_loop, step="peel_tail")
    contraction = s.match_root(rest, kind, step="match_tail_contraction")
    others = [s.match(rest, [name], step=f"match_tail_{name}") for name in POINTWISE]
    epilogue = s.match(main_part, ["linalg.generic"], step="match_main_epilogue")
    # Fold the one-iteration loops, which gives the tail's ops static shapes.
    function = s.match(s.root, ["func.func"], step="match_function_to_fold_peeled")
    s.canonicalize(function, step="fold_peeled")
    if rows_past:  # in K blocks and NR-wide tiles
        k_blocks, _ = s.tile(contraction, [0, 0, min(TAIL_BLOCK[1], k)], step="block_row_tail")
        _, (loop_handle, _) = s.tile(k_blocks, [0, nr, 1], step="tile_row_tail")
        s.vectorize_linalg(loop_handle)
        for name, ops in zip(POINTWISE, others, strict=True):
            _, (loop_handle,) = s.tile(ops, [0, nr], step=f"tile_row_tail_{name}")
            s.vectorize_linalg(loop_handle)
    else:  # in pieces, MR rows at a time; the fill first: on several threads, the
        # contraction's tiles take in (fuse) a producer left standing, and the fill's own
        # handle is then empty where the tail is one piece (one split keeps it alive)
        fill, generic = zip(POINTWISE, others, strict=True)
        for name, ops in (fill, (kind, contraction), generic):
            sizes = ([mr, 0, 0], [0, 0, 1]) if name == kind else ([mr, 0], [0, 0])
            _sweep_pieces(s, ops, columns_past, sizes, f"column_tail_{name}", parallel)
    column_blocks, _ = s.fuse_with_loops(epilogue, [0, nc], step="cache_tile_n", parallel=parallel)
    return column_blocks


def _sweep_pieces(
    s: ScheduleBuilder,
    op: ir.Value,
    columns: int,
    sizes: tuple[list[int], list[int]],
    step: str,
    parallel: bool,
) -> None:
    """Cut `op`, static over a column tail of `columns`, into `ScheduleBuilder.split_pieces`
    and sweep each in tiles (`tile_shared`'s shared and inner `sizes`), vectorized now."""
    for piece, (part, _) in enumerate(s.split_pieces(op, 1, columns, step=f"split_{step}")):
        _, outer = tile_shared(s, part, *sizes, f"tile_{step}_{piece}", parallel)
        s.vectorize_linalg(outer)


def tile_shared(
    s: ScheduleBuilder, op: ir.Value, shared: list[int], inner: list[int], step: str, parallel: bool
) -> tuple[ir.Value, ir.Value]:
    """Tile `op` by `shared`, then by `inner` (in one tiling, on one thread); with
    `parallel`, the `shared` loop is an scf.forall, spread over the threads. Returns the
    tiled op and the outermost loop."""
    if not parallel:
        tiled, loops = s.tile(op, [a or b for a, b in zip(shared, inner, strict=True)], step=step)
        return tiled, loops[0]
    tiled, (forall,) = s.fuse_with_loops(op, shared, step=f"share_{step}", parallel=True)
    if any(inner):
        tiled, _ = s.tile(tiled, inner, step=step)
    return tiled, forall
