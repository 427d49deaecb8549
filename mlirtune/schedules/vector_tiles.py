"""ROWS x COLS vector tiles on the host CPU: the selector, constraints and cost model that the
`rowwise` and `elementwise` families share (each sets how much of the register file a tile
may hold, and whether row reductions are merged per tile)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TypeVar

from mlirtune.interfaces.dtype import element_bytes
from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.schedule import Constraint, Domains, KnobValues, KnobVariables
from mlirtune.schedules.cpu_model import (
    LOAD_PORTS,
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
from mlirtune.targets.host_cpu import HostCPU

# Memory streams a core's hardware prefetcher follows well. A tile runs its rows as separate
# unrolled runs, so every row of every operand is a stream of its own, and each stream past
# the first costs bandwidth (one-row tiles measured 1.8x faster than eight-row ones).
PREFETCH_STREAMS = 16


@dataclass(frozen=True)
class VectorTileKnobs(KnobValues):
    """The knobs every ROWS x COLS vector tile family has: `rows` rows per tile, `cols`
    columns per (vector) tile."""

    rows: int
    cols: int


TileT = TypeVar("TileT", bound=VectorTileKnobs)


class VectorTileFamily(HostFamily[TileT]):
    """ROWS x COLS tiles whose values (`register_share` of the register file) stay in
    registers; `reduction` adds the per-row-tile merge of partial row results."""

    register_share = 1.0
    reduction = False

    def vector_tile(
        self, op: OpInfo, cpu: HostCPU, row_vectors: int = 4, register_share: float | None = None
    ) -> tuple[int, int]:
        """ROWS x COLS: COLS spans `row_vectors` vectors (four: long contiguous runs for the
        prefetcher), ROWS fills `register_share` (default: the family's) of the register
        file with one tile of values."""
        lanes = cpu.lanes(op.element_type)
        rows, cols = op.dims["ROWS"], op.dims["COLS"]
        cols_tile = fit(cols, row_vectors * lanes, step=min(lanes, cols))
        tile_vectors = max(1, -(-cols_tile // lanes))
        share = self.register_share if register_share is None else register_share
        budget = int(cpu.features.vector_registers * share) // tile_vectors
        rows_tile = fit(rows, max(1, budget), high=1.0)
        return rows_tile, cols_tile

    def constraints_on(
        self, op: OpInfo, cpu: HostCPU, knobs: KnobVariables, domains: Domains
    ) -> list[Constraint]:
        lanes = cpu.lanes(op.element_type)
        budget = int(cpu.features.vector_registers * self.register_share)
        return [
            whole_vectors("COLS", op.dims["COLS"], knobs, lanes),
            Constraint(
                "register_budget",
                f"ROWS*ceil(COLS/{lanes}) <= {budget}: a tile of values fits "
                f"{self.register_share:g} of the vector registers",
                knobs["ROWS"] * vectors(knobs["COLS"], lanes) <= budget,
            ),
        ]

    def cost_on(self, op: OpInfo, cpu: HostCPU, knobs: TileT) -> float:
        """Roofline of vector loads and stores (a partial vector costs a whole one) against
        the bytes every operand moves, derated for the streams of multi-row tiles; plus
        set-up cycles per tile and, for reductions, the merge of the partial row results."""
        lanes = cpu.lanes(op.element_type)
        rows_dim, cols_dim = op.dims["ROWS"], op.dims["COLS"]
        rows_tile, cols_tile = min(knobs.rows, rows_dim), min(knobs.cols, cols_dim)
        rows, cols = (
            tile_extents(rows_dim, rows_dim, rows_tile),
            tile_extents(cols_dim, cols_dim, cols_tile),
        )
        operands = len(op.dtypes)
        vector_ops = sum(
            rn * r * cn * ceil_div(c, lanes) for r, rn in rows.items() for c, cn in cols.items()
        )
        compute = vector_ops * operands / LOAD_PORTS
        row_tiles, col_tiles = sum(rows.values()), sum(cols.values())
        overhead = row_tiles * col_tiles * TILE_CYCLES
        if self.reduction:
            overhead += rows_dim * (ceil_div(cols_tile, lanes) + math.log2(lanes))
        nbytes = rows_dim * cols_dim * sum(element_bytes(t) for t in op.dtypes)
        traffic = Traffic(cpu)
        streams = 1 + (rows_tile - 1) * operands / PREFETCH_STREAMS
        traffic.add(nbytes * streams, nbytes)
        memory = traffic.cycles()
        overlapped = self.memory_overlaps_compute(op, cpu, knobs)
        return seconds((max(compute, memory) if overlapped else compute + memory) + overhead, cpu)

    def memory_overlaps_compute(self, op: OpInfo, cpu: HostCPU, knobs: TileT) -> bool:
        """Whether memory streams while the tile computes (the roofline's max) rather than
        before it (their sum): a single pass streams."""
        return True
