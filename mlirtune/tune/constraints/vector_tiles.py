"""Vector-tile spaces on the host CPU: ROWS x COLS tiles of the `rowwise` schedule (row
reductions such as softmax) and of the `elementwise` schedule."""

from __future__ import annotations

import math
from typing import Any

from mlirtune.ir.roots import OpInfo
from mlirtune.tune.constraints.base import (
    LOAD_PORTS,
    TILE_CYCLES,
    Domains,
    HostGenerator,
    Knobs,
    Traffic,
    ceil_div,
    itemsize,
    seconds,
    tile_extents,
    vectors,
    whole_vectors,
)
from mlirtune.tune.space import Config, Constraint

# Memory streams a core's hardware prefetcher follows well. A tile runs its rows as separate
# unrolled runs, so every row of every operand is a stream of its own, and each stream past
# the first costs bandwidth (one-row tiles measured 1.8x faster than eight-row ones).
PREFETCH_STREAMS = 16


class VectorTilesOnHost(HostGenerator):
    """ROWS x COLS tiles whose values (`register_share` of the register file) stay in
    registers; `reduction` adds the per-row-tile merge of partial row results."""

    register_share = 1.0
    reduction = False

    def constraints(
        self, op: OpInfo, target: Any, knobs: Knobs, domains: Domains
    ) -> list[Constraint]:
        lanes = self.lanes(op, target)
        budget = int(target.features.vector_registers * self.register_share)
        return [
            whole_vectors("COLS", op.dims["COLS"], knobs, lanes),
            Constraint(
                "register_budget",
                f"ROWS*ceil(COLS/{lanes}) <= {budget}: a tile of values fits "
                f"{self.register_share:g} of the vector registers",
                knobs["ROWS"] * vectors(knobs["COLS"], lanes) <= budget,
            ),
        ]

    def cost(self, op: OpInfo, target: Any, config: Config) -> float:
        """Roofline of vector loads and stores (a partial vector costs a whole one) against
        the bytes every operand moves, derated for the streams of multi-row tiles; plus
        set-up cycles per tile and, for reductions, the merge of the partial row results."""
        lanes = self.lanes(op, target)
        rows_dim, cols_dim = op.dims["ROWS"], op.dims["COLS"]
        rows_tile, cols_tile = min(config["ROWS"], rows_dim), min(config["COLS"], cols_dim)
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
        nbytes = rows_dim * cols_dim * sum(itemsize(t) for t in op.dtypes)
        traffic = Traffic(target)
        streams = 1 + (rows_tile - 1) * operands / PREFETCH_STREAMS
        traffic.add(nbytes * streams, nbytes)
        return seconds(max(compute, traffic.cycles()) + overhead, target)


class RowwiseOnHost(VectorTilesOnHost):
    """Row tiles with row reductions: the partial row results stay live beside the loaded
    tile, so a tile gets half of the register file."""

    schedule = "rowwise"
    register_share = 0.5
    reduction = True


class ElementwiseOnHost(VectorTilesOnHost):
    """Element-wise tiles: a tile gets the whole register file."""

    schedule = "elementwise"
