"""Convolution spaces on the host CPU: the `convolution` schedule's OW_TILE x F_TILE register
tile (output pixels broadcast against filter rows) and C_TILE channels per filter step."""

from __future__ import annotations

from typing import Any

from mlirtune.ir.roots import OpInfo
from mlirtune.tune.constraints.base import (
    ACCUMULATOR_CYCLES,
    TILE_CYCLES,
    Domains,
    HostGenerator,
    Knobs,
    Traffic,
    ceil_div,
    itemsize,
    narrow_tails,
    outer_product,
    seconds,
    step_cycles,
    tile_extents,
    vectors,
    whole_vectors,
)
from mlirtune.tune.space import Config, Constraint

# FMAs one filter step (C_TILE channels of one tap) may unroll into.
STEP_FMAS = 64


class ConvolutionOnHost(HostGenerator):
    """Register tile of OW_TILE pixels x F_TILE channels, C_TILE input channels per step."""

    schedule = "convolution"

    def constraints(
        self, op: OpInfo, target: Any, knobs: Knobs, domains: Domains
    ) -> list[Constraint]:
        f = target.features
        lanes = self.lanes(op, target)
        d = op.dims
        v = vectors(knobs["F_TILE"], lanes)
        return [
            whole_vectors("F_TILE", d["F"], knobs, lanes),
            *outer_product("OW_TILE", "F_TILE", knobs, domains, lanes, f.vector_registers),
            narrow_tails("f_tile_tail", f"{d['F']} % F_TILE", [d["F"] % knobs["F_TILE"]], lanes),
            Constraint(
                "c_tile_divides_c",
                f"{d['C']} % C_TILE == 0: whole channel steps, no peeled remainder",
                d["C"] % knobs["C_TILE"] == 0,
            ),
            Constraint(
                "unrolled_step",
                f"C_TILE*OW_TILE*ceil(F_TILE/{lanes}) <= {STEP_FMAS}: a filter step unrolls "
                f"into at most {STEP_FMAS} FMAs",
                knobs["C_TILE"] * knobs["OW_TILE"] * v <= STEP_FMAS,
            ),
        ]

    def cost(self, op: OpInfo, target: Any, config: Config) -> float:
        """Every register tile (partial ones at their own width) runs KH*KW*C outer-product
        steps with loop control shared by C_TILE channels, and loads and stores its
        accumulators once; the filter slice of a tile is re-read by every pixel tile and the
        input rows by every channel tile, from wherever they stay."""
        d = op.dims
        size = itemsize(op.element_type)
        lanes = self.lanes(op, target)
        ow_tile, f_tile = min(config["OW_TILE"], d["OW"]), min(config["F_TILE"], d["F"])
        c_tile = min(config["C_TILE"], d["C"])
        cols = tile_extents(d["OW"], d["OW"], ow_tile)
        chans = tile_extents(d["F"], d["F"], f_tile)
        images = d["N"] * d["OH"]
        steps = d["KH"] * d["KW"] * d["C"]
        tiles = [(r, c, rn * cn) for r, rn in cols.items() for c, cn in chans.items()]
        compute = steps * sum(n * step_cycles(r, c, lanes, c_tile) for r, c, n in tiles)
        accumulators = sum(n * r * ceil_div(c, lanes) for r, c, n in tiles)
        pixel_tiles, channel_tiles = sum(cols.values()), sum(chans.values())
        overhead = pixel_tiles * channel_tiles * TILE_CYCLES + 2 * ACCUMULATOR_CYCLES * accumulators
        filter_bytes = steps * d["F"] * size
        input_row = (d["OW"] + d["KW"] - 1) * d["C"] * size
        traffic = Traffic(target)
        traffic.add(filter_bytes * pixel_tiles, steps * f_tile * size)
        traffic.add(input_row * d["KH"] * channel_tiles, input_row * d["KH"])
        cycles = max(compute, traffic.cycles()) + overhead
        return seconds(images * cycles, target)
