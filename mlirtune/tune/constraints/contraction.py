"""Contraction spaces on the host CPU: the cache-tiled `contraction` schedule (matmul,
batch_matmul and MLP layers with fused epilogues) and the `packed_contraction` schedule.

Both run a broadcast/FMA micro-kernel over an MR x NR register tile; the constraints keep it
in the register file and its operands in the caches the HostCPU selector sizes them for, and
the cost models time it with the shared host model (see base).
"""

from __future__ import annotations

from typing import Any

import z3

from mlirtune.ir.roots import OpInfo
from mlirtune.targets.host_cpu import OUTPUT_BLOCK_BYTES
from mlirtune.tune.constraints.base import (
    ACCUMULATOR_CYCLES,
    L2_BROADCAST_CYCLES,
    TILE_CYCLES,
    Domains,
    HostGenerator,
    Knobs,
    Traffic,
    ceil_div,
    itemsize,
    narrow_tails,
    outer_product,
    rows_conflict_in_l1,
    seconds,
    step_cycles,
    tile_extents,
    vectors,
    whole_vectors,
)
from mlirtune.tune.space import Config, Constraint

# FMAs an unrolled K-step loop body may hold: past that, unrolling only adds code.
UNROLLED_FMAS = 32
# Entering a cache block (MC x NC x KC): its loops and operand slices.
BLOCK_CYCLES = 50.0


def _sizes(op: OpInfo) -> tuple[int, int, int, int, int, int]:
    """Batch, M, N, K and the input and output element sizes in bytes."""
    d = op.dims
    return (
        d.get("B", 1),
        d["M"],
        d["N"],
        d["K"],
        itemsize(op.element_type),
        itemsize(op.dtypes[-1]),
    )


class ContractionOnHost(HostGenerator):
    """Cache tile MC x NC x KC around an MR x NR register tile, K steps unrolled KU times."""

    schedule = "contraction"

    def constraints(
        self, op: OpInfo, target: Any, knobs: Knobs, domains: Domains
    ) -> list[Constraint]:
        f = target.features
        _, m, n, k, size_in, size_out = _sizes(op)
        lanes = self.lanes(op, target)
        mc, nc, kc, mr, nr, ku = (knobs[name] for name in ("MC", "NC", "KC", "MR", "NR", "KU"))
        v = vectors(nr, lanes)
        half_l1 = f.l1d_bytes // 2
        return [
            whole_vectors("NR", n, knobs, lanes),
            *outer_product("MR", "NR", knobs, domains, lanes, f.vector_registers),
            Constraint(
                "mr_within_mc", "MR <= MC: a register tile lies in its cache tile", mr <= mc
            ),
            Constraint(
                "nr_within_nc", "NR <= NC: a register tile lies in its cache tile", nr <= nc
            ),
            Constraint(
                "mc_multiple_of_mr",
                f"MC % MR == 0 or MC == {m}: whole register tiles in a cache tile, except in a "
                "tile spanning M whose last (peeled) register tile is partial",
                z3.Or(mc % mr == 0, mc == m),
            ),
            Constraint(
                "nc_multiple_of_nr",
                f"NC % NR == 0 or NC == {n}: whole register tiles in a cache tile, except in a "
                "tile spanning N whose last (peeled) register tile is partial",
                z3.Or(nc % nr == 0, nc == n),
            ),
            narrow_tails(
                "nr_tails", f"NC % NR and ({n} % NC) % NR", [nc % nr, (n % nc) % nr], lanes
            ),
            Constraint(
                "a_panel_in_l1",
                f"MR*KC*{size_in} <= {half_l1}: A's micro-panel, re-read by every register "
                "tile of a row, stays in half of L1 beside the B panels streaming past it",
                mr * kc * size_in <= half_l1,
            ),
            Constraint(
                "b_block_in_l2",
                f"KC*NC*{size_in} <= {f.l2_bytes}: the B block, re-read by every row of "
                "register tiles, stays in L2",
                kc * nc * size_in <= f.l2_bytes,
            ),
            Constraint(
                "output_block",
                f"MC*NC*{size_out} <= {OUTPUT_BLOCK_BYTES}, or MC == {m} and NC == {n} with "
                f"the output and an M x KC and KC x N panel in L2 ({f.l2_bytes} bytes): "
                "LLVM's compile time grows with the block (0.1 s for 64x64 f32, 0.5 s for "
                "128x128), for no gain once the block is past L1",
                z3.Or(
                    mc * nc * size_out <= OUTPUT_BLOCK_BYTES,
                    z3.And(
                        mc == m,
                        nc == n,
                        m * n * size_out + (m + n) * kc * size_in <= f.l2_bytes,
                    ),
                ),
            ),
            Constraint(
                "ku_divides_kc", "KC % KU == 0: the unrolled loop has no epilogue", kc % ku == 0
            ),
            Constraint(
                "ku_needs_whole_k_tiles",
                f"KU == 1 or {k} % KC == 0: the schedule unrolls only when KC divides K, so "
                "another KU would repeat the KU == 1 kernel",
                z3.Or(ku == 1, k % kc == 0),
            ),
            Constraint(
                "unrolled_body",
                f"KU*MR*ceil(NR/{lanes}) <= {UNROLLED_FMAS}: the unrolled K-step body holds at "
                f"most {UNROLLED_FMAS} FMAs, past which unrolling only adds code",
                ku * mr * v <= UNROLLED_FMAS,
            ),
        ]

    def cost(self, op: OpInfo, target: Any, config: Config) -> float:
        """Roofline of the micro-kernel against L2 and memory traffic, plus per-tile costs.

        Compute: K steps of every register tile, the partial (peeled) ones at their own
        width, each step bound by FMA throughput, load ports, FMA latency (too few
        accumulators) or, when A's rows (K elements apart) overfill an L1 set, broadcasts
        from L2; plus loop control shared by KU steps. Traffic: every row of register
        tiles streams the B block (from L2 while it fits), A's micro-panel is re-read by
        every register tile (free while it stays in L1 with a B panel), A and B blocks are
        swept once per NC and MC block, and the accumulators are loaded and stored once per
        K tile from wherever the output block lives. Each register tile and cache block
        costs fixed loop and set-up cycles, which penalises tiny tiles.
        """
        batch, m, n, k, size_in, size_out = _sizes(op)
        lanes = self.lanes(op, target)
        mc, nc, kc = min(config["MC"], m), min(config["NC"], n), min(config["KC"], k)
        mr, nr, ku = min(config["MR"], mc), min(config["NR"], nc), config["KU"]
        unroll = ku if kc % ku == 0 and k % kc == 0 else 1
        rows, cols = tile_extents(m, mc, mr), tile_extents(n, nc, nr)
        k_tiles = ceil_div(k, kc)
        tiles = [(r, c, rn * cn) for r, rn in rows.items() for c, cn in cols.items()]
        broadcast = L2_BROADCAST_CYCLES if rows_conflict_in_l1(mr, k * size_in, target) else 0.0
        compute = k * sum(
            count * step_cycles(r, c, lanes, unroll, broadcast) for r, c, count in tiles
        )
        accumulators = sum(count * r * ceil_div(c, lanes) for r, c, count in tiles)
        row_tiles, col_tiles = sum(rows.values()), sum(cols.values())
        blocks = ceil_div(m, mc) * ceil_div(n, nc) * k_tiles
        overhead = (
            k_tiles * (row_tiles * col_tiles * TILE_CYCLES + 2 * ACCUMULATOR_CYCLES * accumulators)
            + blocks * BLOCK_CYCLES
        )
        a_bytes, b_bytes, c_bytes = m * k * size_in, k * n * size_in, m * n * size_out
        traffic = Traffic(target)
        traffic.add(b_bytes * row_tiles, kc * nc * size_in)
        traffic.add(b_bytes * ceil_div(m, mc), b_bytes)
        traffic.add(a_bytes * col_tiles, (mr + nr) * kc * size_in)
        traffic.add(a_bytes * ceil_div(n, nc), mc * k * size_in)
        traffic.add(2 * c_bytes * k_tiles, mc * nc * size_out)
        cycles = max(compute, traffic.cycles()) + overhead
        return seconds(batch * cycles, target)


class PackedContractionOnHost(HostGenerator):
    """MR x NR register tile over operands packed in MR-, NR- and KB-sized blocks."""

    schedule = "packed_contraction"

    def constraints(
        self, op: OpInfo, target: Any, knobs: Knobs, domains: Domains
    ) -> list[Constraint]:
        f = target.features
        _, m, n, k, size_in, _ = _sizes(op)
        lanes = self.lanes(op, target)
        mr, nr, kb = knobs["MR"], knobs["NR"], knobs["KB"]
        half_l1 = f.l1d_bytes // 2
        return [
            whole_vectors("NR", n, knobs, lanes),
            *outer_product("MR", "NR", knobs, domains, lanes, f.vector_registers),
            Constraint(
                "mr_divides_m",
                f"{m} % MR == 0: the schedule packs without padding (another MR falls back "
                "to a smaller divisor)",
                m % mr == 0,
            ),
            Constraint("nr_divides_n", f"{n} % NR == 0: packed without padding", n % nr == 0),
            Constraint("kb_divides_k", f"{k} % KB == 0: packed without padding", k % kb == 0),
            Constraint(
                "block_panels_in_l1",
                f"(MR+NR)*KB*{size_in} <= {half_l1}: one KB-deep block of both packed panels "
                "stays in half of L1",
                (mr + nr) * kb * size_in <= half_l1,
            ),
        ]

    def cost(self, op: OpInfo, target: Any, config: Config) -> float:
        """Packing and unpacking copies, then the micro-kernel over whole MR x NR blocks
        (the shapes divide), its accumulators loaded and stored once per KB block, A's
        panel re-read for every NR block and B's for every MR block, from wherever they
        stay; loop and set-up cycles per block and per pack tile."""
        _, m, n, k, size_in, size_out = _sizes(op)
        lanes = self.lanes(op, target)
        mr, nr, kb = min(config["MR"], m), min(config["NR"], n), min(config["KB"], k)
        blocks = ceil_div(m, mr) * ceil_div(n, nr)
        k_blocks = ceil_div(k, kb)
        compute = blocks * k * step_cycles(mr, nr, lanes, 1)
        accumulators = mr * ceil_div(nr, lanes)
        pack_tiles = (ceil_div(m, mr) + ceil_div(n, nr)) * k_blocks * ceil_div(kb, 8)
        overhead = (
            blocks * k_blocks * (TILE_CYCLES + 2 * ACCUMULATOR_CYCLES * accumulators)
            + pack_tiles * TILE_CYCLES
        )
        a_bytes, b_bytes, c_bytes = m * k * size_in, k * n * size_in, m * n * size_out
        traffic = Traffic(target)
        traffic.add(2 * (a_bytes + b_bytes), a_bytes + b_bytes)
        traffic.add(2 * c_bytes, c_bytes)
        traffic.add(a_bytes * ceil_div(n, nr), mr * k * size_in)
        traffic.add(b_bytes * ceil_div(m, mr), b_bytes)
        cycles = max(compute, traffic.cycles()) + overhead
        return seconds(cycles, target)
