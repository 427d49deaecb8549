"""The `elementwise` family: element-wise chains, tiled over rows and columns, vectorized.

The last op is tiled over its two innermost parallel dims with its producers fused, then
vectorized. Leading dims are tiled by 1 (unit dims not at all); partial tiles are peeled off.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mlir import ir

from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.schedule import Config, Knob
from mlirtune.ir.gathers import reads_rows
from mlirtune.ir.inspect import ops_named
from mlirtune.ir.maps import map_loops
from mlirtune.ir.roots import element_types, indexing_maps, loop_sizes, rows_cols
from mlirtune.schedules.builder import ScheduleBuilder
from mlirtune.schedules.cpu_model import ceil_div
from mlirtune.schedules.knobs import powers_of_two, threads_knob, vector_columns
from mlirtune.schedules.vector_tiles import VectorTileFamily, VectorTileKnobs
from mlirtune.targets.host_cpu import HostCPU

# Rows of a tile at most (the ROWS knob's largest power of two).
MAX_ROWS = 32


@dataclass(frozen=True)
class ElementwiseKnobs(VectorTileKnobs):
    """`rows` x `cols` tiles of the last op; `threads` the tiles' outer loops spread over."""

    threads: int


class Elementwise(VectorTileFamily[ElementwiseKnobs]):
    """Element-wise tiles: a tile gets the whole register file."""

    name = "elementwise"
    description = "2-D tiles of the last op with its producers fused, vectorized"
    root_kinds = ("elementwise",)
    owns = ("elementwise",)
    knobs = (
        Knob("ROWS", "rows per tile", 8, powers_of_two("ROWS", MAX_ROWS)),
        Knob("COLS", "columns per tile", 64, vector_columns("COLS", (1, 2, 4, 8))),
        threads_knob(),
    )
    values_type = ElementwiseKnobs

    def build(self, op: OpInfo, parameters: Config) -> ir.Module:
        knobs = self.knob_values(op, parameters)
        gathers = bool(op.attributes.get("row_gathers"))
        return elementwise_schedule(shape=chain_loops(op), knobs=knobs, gathers=gathers)

    def select_on(self, op: OpInfo, cpu: HostCPU) -> Config:
        # One row per tile: every row of a tile becomes its own unrolled run of vector ops,
        # and a single four-vector row streams best (measured 3-4.6x numpy on 1024^2 and
        # 300x500 chains, against 1.3-2.6x with eight-row tiles).
        _, cols = self.vector_tile(op, cpu)
        if not op.attributes.get("transposed_read"):
            return {"ROWS": 1, "COLS": cols}
        # An input read across rows (a transpose of the two innermost dims): a tile of up to
        # a vector's rows reads a block of that input whole, contiguous rows of it, and
        # transposes it in registers; one row per tile gathers its elements one by one.
        lanes = cpu.lanes(op.element_type)
        budget = int(cpu.features.vector_registers * self.register_share)
        cap = max(1, min(lanes, MAX_ROWS, budget // ceil_div(cols, lanes)))
        row_loop = chain_loops(op)[-2]  # the loop the schedule tiles by ROWS
        rows = min(1 << (row_loop - 1).bit_length(), 1 << (cap.bit_length() - 1))
        return {"ROWS": rows, "COLS": cols}


ELEMENTWISE = Elementwise()


def elementwise_schedule(
    *,
    shape: Sequence[int],
    knobs: ElementwiseKnobs,
    name: str = "elementwise",
    gathers: bool = False,
) -> ir.Module:
    """Tile the chain's last op (its root, of loop sizes `shape`; not any other generic,
    such as a broadcast of another rank feeding it) over its two innermost parallel dims,
    fuse producers, then vectorize. Leading dims are tiled by 1; a dim its tile covers
    whole gets no loop (a unit dim's loop of one iteration would be folded away under
    tile-and-fuse, which then aborts on the missing loop). Partial tiles are peeled off, so
    the main tiles have static shapes and vectorize even when the sizes do not divide the
    shape. `gathers`: the chain's table reads are rows (`ir.gathers.reads_rows`), each a
    vector load."""
    tiles = [1] * max(0, len(shape) - 2) + [knobs.rows] * (len(shape) > 1) + [knobs.cols]
    sizes = [size if size < dim else 0 for dim, size in zip(shape, tiles, strict=True)]
    # With THREADS > 1 and whole tiles in the outer dims, those are one scf.forall spread
    # over the threads, and the columns are tiled (and peeled) inside it.
    outer = [(dim, size) for dim, size in zip(shape[:-1], sizes[:-1], strict=True) if size]
    parallel = knobs.threads > 1 and bool(outer)
    parallel = parallel and all(dim % size == 0 for dim, size in outer)
    with ScheduleBuilder(name) as s:
        anchor = s.match_root(s.root, "elementwise", step="match_anchor")
        if parallel:
            outer_sizes = [*sizes[:-1], 0]
            s.fuse_with_loops(anchor, outer_sizes, step="parallel_rows", parallel=True)
            anchor = s.match_root(s.root, "elementwise", step="match_anchor_rows")
            sizes = [0] * (len(shape) - 1) + sizes[-1:]
        _, loops = s.fuse_with_loops(anchor, sizes, step="tile_and_fuse")
        tiled = [(dim, size) for dim, size in zip(shape, sizes, strict=True) if size]
        for (dim, size), loop_handle in reversed(list(zip(tiled, loops, strict=True))):
            if dim % size:
                s.peel(loop_handle, step="peel_partial_tiles")
        function = s.match(s.root, ["func.func"], step="match_function")
        s.canonicalize(function)  # folds the peeled tiles' sizes into static shapes
        function = s.vectorize_function(function, gathers=gathers)
        # Folding is left to the lowering passes: with a broadcast operand (a row vector),
        # broadcast lowering and canonicalization rewrite each other forever.
        s.lower_vectors(function, canonicalize=False)
    return s.module


def chain_root(op: ir.Operation) -> OpInfo:
    """The root of a purely element-wise payload: its last linalg op, `op`, which stands for
    the whole chain. ROWS x COLS are its tuned extents; past rank 2 the dims also hold every
    loop's size (L0, L1, ...), whose leading ones the schedule tiles by one."""
    loops = loop_sizes(op)
    dims = rows_cols(loops)
    if len(loops) > 2:
        dims |= {f"L{i}": size for i, size in enumerate(loops)}
    attributes = {"rank": len(loops)}
    function = op.parent
    chain = [op]
    if function is not None:
        if reads_rows(function):
            attributes["row_gathers"] = 1
        chain = [*ops_named(function, "linalg.generic"), *ops_named(function, "linalg.transpose")]
    if len(loops) > 1 and any(_reads_across_rows(member, len(loops)) for member in chain):
        attributes["transposed_read"] = 1
    return OpInfo("elementwise", dims, element_types(op), op.name, attributes)


def _reads_across_rows(op: ir.Operation, rank: int) -> bool:
    """Whether linalg op `op` of the chain (of result rank `rank`) reads an input whose
    innermost dim is the row loop (the second innermost) of its result, which it writes
    in loop order: a transpose of the two innermost dims."""
    maps = [map_loops(m) for m in indexing_maps(op)]
    inputs, outputs = maps[: -len(op.results)], maps[-len(op.results) :]
    if any(loops != list(range(rank)) for loops in outputs):
        return False
    # Not a broadcast along the rows' elements (a per-row scale, an embedding's ids).
    return any(loops and loops[-1] == rank - 2 and rank - 1 in loops for loops in inputs)


def chain_loops(op: OpInfo) -> list[int]:
    """The loop sizes of a chain's last op (see chain_root)."""
    rank = op.attributes.get("rank", 2)
    if rank > 2:
        return [op.dims[f"L{i}"] for i in range(rank)]
    return [op.dims["ROWS"], op.dims["COLS"]][-rank:]
