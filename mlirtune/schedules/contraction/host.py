"""The contraction family on the host CPU: its selector, constraints and cost model.

A cache tile MC x NC x KC around an MR x NR register tile whose K steps are unrolled KU
times. The selector sizes the register tile from the register file and the cache tile from
L1 and L2; the constraints keep any config within those resources, and the cost model times
the micro-kernel with the shared host model (mlirtune.schedules.cpu_model).
"""

from __future__ import annotations

from dataclasses import replace

from mlirtune.interfaces.dtype import element_bytes
from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.schedule import Config
from mlirtune.schedules.contraction import amx_host
from mlirtune.schedules.contraction.blocking import shared_blocks
from mlirtune.schedules.contraction.dot import DOT_PAIR
from mlirtune.schedules.contraction.dot_host import dot_blocks, pair_view
from mlirtune.schedules.contraction.knob_values import (
    PACK_AB,
    PACK_B,
    PACK_NONE,
    UNIT_AMX,
    UNIT_DOT,
    UNIT_FMA,
    ContractionKnobs,
)
from mlirtune.schedules.contraction.packed_host import (
    output_in_l2,
    packed_blocks,
    transposed_packs,
    unpacked_tile,
)
from mlirtune.schedules.contraction.packed_order import walk_n_outer
from mlirtune.schedules.contraction.packed_tails import packed_nest
from mlirtune.schedules.contraction.register_tiles import (
    fullest_register_tile,
    packed_register_tile,
)
from mlirtune.schedules.contraction.rows import UNIT_ROWS
from mlirtune.schedules.contraction.rows_host import rows_cost, rows_select
from mlirtune.schedules.contraction.steps.widen import widened_view
from mlirtune.schedules.cpu_model import (
    ACCUMULATOR_CYCLES,
    L2_BROADCAST_CYCLES,
    OUTPUT_BLOCK_BYTES,
    PAGE_BYTES,
    SKINNY_ROWS,
    TILE_CYCLES,
    Traffic,
    ceil_div,
    fit,
    register_tile,
    rows_conflict_in_l1,
    seconds,
    step_cycles,
    tile_extents,
)
from mlirtune.targets.host_cpu import HostCPU

# Entering a cache block (MC x NC x KC): its loops and operand slices.
BLOCK_CYCLES = 50.0
# Rows of B a skinny product's micro-kernel reads per K block: that many streams, which the
# hardware prefetchers follow (measured 1.4x numpy for 1x11008x4096 f32, against 0.35x for
# 2048-deep blocks of 64 columns).
SKINNY_K_BLOCK = 8
# Unpacked B rows N elements apart, each a page or more: every row of a micro-panel is its
# own TLB entry and they alias in L1, so streaming such a block costs about this many times
# its bytes (measured: 2048^3 f32 runs at 0.32x numpy unpacked, 0.9x packed).
STRIDED_PANEL_PENALTY = 3.0


def contraction_sizes(op: OpInfo) -> tuple[int, int, int, int, int, int]:
    """Batch, M, N, K and the input and output element sizes in bytes."""
    d = op.dims
    return (
        d.get("B", 1),
        d["M"],
        d["N"],
        d["K"],
        element_bytes(op.element_type),
        element_bytes(op.dtypes[-1]),
    )


def select(op: OpInfo, cpu: HostCPU, unit: int | None = None, *, n_outer: bool = True) -> Config:
    """The row-dot path for a product of one column (`rows_select`), AMX tiles or dot
    products where the host and shape allow them (`amx_blocks`, `dot_blocks`), else the FMA
    path (`_fma_select`); with `unit`, that path's blocks (the FMA path's where it has none).
    `n_outer`: the packed FMA nest may walk N outer (`walk_n_outer`)."""
    fma = {**_fma_select(op, cpu, n_outer), "UNIT": UNIT_FMA}
    paths = {UNIT_ROWS: rows_select, UNIT_AMX: amx_host.amx_blocks, UNIT_DOT: dot_blocks}
    order = [unit] if unit is not None else [UNIT_ROWS, UNIT_AMX, UNIT_DOT]
    chosen = next((c for u in order if u in paths and (c := paths[u](op, cpu))), fma)
    return {"PREFETCH": 0, "ORDER": 1, **chosen}


def _fma_select(op: OpInfo, cpu: HostCPU, n_outer: bool = True) -> Config:
    """Register tile MR x NR; then KC, then the MC x NC output block.

    The schedule runs the register tiles of a block row by row, so A's micro-panel
    (MR x KC) is re-read from L1 by every tile of a row while B's micro-panels stream
    past it from L2: KC keeps A's panel in a quarter of L1, leaving the rest to the
    streamed lines (and to conflict misses: A's rows are K elements apart, often a
    multiple of 4 KiB). The output block is the whole output when it stays in L2 with
    the M x KC and KC x N panels across the K loop. Otherwise the A block (MC x KC) is
    sized to half of L1, because every column tile of the block re-reads it, and the
    B block (KC x NC) to half of L2, within OUTPUT_BLOCK_BYTES of output: few rows,
    many columns (16 x 512 f32 on a 32 KiB L1 / 1 MiB L2 core, measured 1.00x numpy at
    1024^3 against 0.84x for a 64 x 128 block). A matmul with whole blocks takes the
    packed path instead where packing pays (packed_host.py); a shape with no whole blocks
    gets even blocks, its partial ones padded. Register tiles: register_tiles.py."""
    f = cpu.features
    m, n, k = op.dims["M"], op.dims["N"], op.dims["K"]
    dtype = op.element_type
    size_in, size_out = element_bytes(dtype), element_bytes(op.dtypes[-1])
    if m <= SKINNY_ROWS:
        return _skinny(op, cpu)
    mr, nr, kc = unpacked_tile(op, cpu)
    if output_in_l2(op, cpu, kc) and not transposed_packs(op, cpu):
        mc, nc = m, n
    else:  # packing pays (packing_pays); the nest reads widened operands (widen.py) wide
        nest_op = widened_view(op, PACK_B, UNIT_FMA)
        fullest = fullest_register_tile(nest_op, cpu)
        packed = fullest and packed_blocks(nest_op, cpu, *fullest, split_k_for_tail=True)
        if not packed:
            tile = packed_register_tile(nest_op, cpu, *register_tile(cpu, m, n, dtype))
            packed = packed_blocks(nest_op, cpu, *tile)
        if op.kind == "matmul" and packed is not None:
            return walk_n_outer(op, cpu, packed) if n_outer else packed
        block = OUTPUT_BLOCK_BYTES // size_out
        a_rows = f.l1d_bytes // 2 // (kc * size_in)
        mc = fit(m, max(mr, a_rows - a_rows % mr), step=mr, pow2=True)
        b_columns = f.l2_bytes // 2 // (kc * size_in)
        nc = fit(n, max(nr, min(b_columns, block // mc)), step=nr, pow2=True)
    if (k * size_in) % (f.l1d_bytes // f.l1d_ways) == 0:
        # A is read in place and its rows, a multiple of one way's bytes apart, fall into
        # one L1 set, which holds the MR rows of a micro-panel step: MR stays within its
        # ways (measured at 512 x 49 x 2048, a 1x1 conv of ResNet-50 in NCHW: MR=16 ran
        # at 39 GFLOP/s, MR=8 at 92).
        mr = min(mr, f.l1d_ways)
    mc, nc = shared_blocks(op, cpu.threads, mc, nc, mr, nr)
    mr, nr = min(mr, mc), min(nr, nc)
    return {"MC": mc, "NC": nc, "KC": kc, "MR": mr, "NR": nr, "PACK": PACK_NONE}


def _skinny(op: OpInfo, cpu: HostCPU) -> Config:
    """A product of at most SKINNY_ROWS rows: all of them in the register tile, as many
    vectors of columns as the register file takes (at most four), all of N in one block,
    and SKINNY_K_BLOCK rows of B per K block, so B streams from memory once."""
    m, n, k = op.dims["M"], op.dims["N"], op.dims["K"]
    lanes = cpu.lanes(op.element_type)
    registers = cpu.features.vector_registers
    vectors_per_row = next(
        (v for v in (4, 2) if v * (m + 1) + 1 <= registers and n % (v * lanes) == 0), 1
    )
    nr = min(n, vectors_per_row * lanes)
    return {"MC": m, "NC": n, "KC": fit(k, SKINNY_K_BLOCK), "MR": m, "NR": nr, "PACK": PACK_NONE}


# How many times slower a packed nest with padded register tiles runs
# (packed_tails.PackedNest.padded): the least slowdown measured on an Intel Xeon, f32,
# against the same shape's fastest whole nest in one tuning run. 1000x999x1001: NC=960
# 62 against 188 GFLOP/s, MR=12 17-62; 4096x4096x256 with K in one block (no row tail is
# split off then), MR=6 or 12: 18-48 against 215.
PADDED_NEST_SLOWDOWN = 3.0


def cost(op: OpInfo, cpu: HostCPU, knobs: ContractionKnobs) -> float:
    """Roofline of the micro-kernel against L2 and memory traffic, plus per-tile costs.

    Compute: K steps of every register tile, the partial (peeled) ones at their own
    width, each step bound by FMA throughput, load ports, FMA latency (too few
    accumulators) or, when A's rows (K elements apart) overfill an L1 set, broadcasts
    from L2; plus loop control shared by KU steps. Traffic: every row of register
    tiles streams the B block (from L2 while it fits), A's micro-panel is re-read by
    every register tile (free while it stays in L1 with a B panel), A and B blocks are
    swept once per NC and MC block, and the accumulators are loaded and stored once per
    K tile from wherever the output block lives (packed, the first K tile loads none;
    unpacked, the fill writes the block once more). Each register tile and cache block
    costs fixed loop and set-up cycles, which penalises tiny tiles. A packed nest whose
    tiles are padded costs PADDED_NEST_SLOWDOWN times as much.
    """
    unit = knobs.unit
    if unit == UNIT_ROWS:
        return rows_cost(op, cpu, knobs)
    if unit != UNIT_FMA:
        # A dot product over a bf16 pair costs what an FMA over an f32 does, on B packed
        # once (into pairs) and read from there; an AMX tile product, AMX_SPEEDUP times less.
        pairs = replace(knobs, kc=knobs.kc // DOT_PAIR, pack=PACK_B, unit=UNIT_FMA)
        return cost(pair_view(op), cpu, pairs) / (amx_host.AMX_SPEEDUP if unit == UNIT_AMX else 1)
    narrow_bytes = element_bytes(op.element_type)
    op = widened_view(op, knobs.pack, unit)  # the nest reads widened operands wide
    batch, m, n, k, size_in, size_out = contraction_sizes(op)
    lanes = cpu.lanes(op.element_type)
    mc, nc, kc = min(knobs.mc, m), min(knobs.nc, n), min(knobs.kc, k)
    mr, nr, ku = min(knobs.mr, mc), min(knobs.nr, nc), knobs.ku
    unroll = ku if kc % ku == 0 and k % kc == 0 else 1
    rows, cols = tile_extents(m, mc, mr), tile_extents(n, nc, nr)
    k_tiles = ceil_div(k, kc)
    tiles = [(r, c, rn * cn) for r, rn in rows.items() for c, cn in cols.items()]
    pack = knobs.pack
    # Broadcasts from A rows K elements apart overfill an L1 set; packed A panels do not.
    conflicts = pack != PACK_AB and rows_conflict_in_l1(mr, k * size_in, cpu)
    broadcast = L2_BROADCAST_CYCLES if conflicts else 0.0
    compute = k * sum(
        count * step_cycles(r, c, cpu, op.element_type, unroll, broadcast) for r, c, count in tiles
    )
    accumulators = sum(count * r * ceil_div(c, lanes) for r, c, count in tiles)
    row_tiles, col_tiles = sum(rows.values()), sum(cols.values())
    blocks = ceil_div(m, mc) * ceil_div(n, nc) * k_tiles
    overhead = (
        k_tiles * (row_tiles * col_tiles * TILE_CYCLES + 2 * ACCUMULATOR_CYCLES * accumulators)
        + blocks * BLOCK_CYCLES
    )
    a_bytes, b_bytes, c_bytes = m * k * size_in, k * n * size_in, m * n * size_out
    traffic = Traffic(cpu)
    strided = pack == PACK_NONE and n * size_in >= PAGE_BYTES
    penalty = STRIDED_PANEL_PENALTY if strided else 1.0
    # Every row of register tiles re-reads the B block, packed or in place.
    b_reread = kc * nc * size_in
    traffic.add(penalty * b_bytes * row_tiles, b_reread)
    if size_in > narrow_bytes:  # the widening copies: narrow values read, wide ones written
        traffic.add((a_bytes + b_bytes) * (1 + narrow_bytes / size_in), a_bytes + b_bytes)
    if pack != PACK_NONE:  # the packing copies: read once, written once
        traffic.add(2 * b_bytes, b_bytes)
        if pack == PACK_AB:
            traffic.add(2 * a_bytes * ceil_div(n, nc), a_bytes)
    traffic.add(b_bytes * ceil_div(m, mc), b_bytes)
    traffic.add(a_bytes * col_tiles, (mr + nr) * kc * size_in)
    traffic.add(a_bytes * ceil_div(n, nc), mc * k * size_in)
    # The packed nest's first K block starts from zero (packed.py): C is stored once per
    # K tile and loaded by the later ones; the unpacked one fills each output block first.
    c_passes = 2 * k_tiles - 1 if pack != PACK_NONE else 2 * k_tiles + 1
    traffic.add(c_passes * c_bytes, mc * nc * size_out)
    cycles = max(compute, traffic.cycles()) + overhead
    if pack != PACK_NONE and packed_nest(op, knobs).padded:
        cycles *= PADDED_NEST_SLOWDOWN
    return seconds(batch * cycles, cpu)
