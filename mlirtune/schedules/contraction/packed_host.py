"""The contraction family's packed path on the host CPU: its register tile and its cache
blocks. The schedule is packed.py's; the blocking model is blocking.py's.
"""

from __future__ import annotations

import dataclasses

from mlirtune.interfaces.dtype import element_bytes
from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.schedule import Config
from mlirtune.schedules.contraction.blocking import (
    MIN_PANEL_COLUMNS,
    blis_blocking,
    padded_block,
    whole_block,
)
from mlirtune.schedules.contraction.packed import PACK_AB, PACK_B, column_tail
from mlirtune.schedules.cpu_model import ACCUMULATORS
from mlirtune.targets.host_cpu import HostCPU

# Vectors per row of the packed micro-kernel's register tile (`packed_register_tile`).
PACKED_VECTORS = 4


def packed_register_tile(op: OpInfo, cpu: HostCPU, mr: int, nr: int) -> tuple[int, int]:
    """The packed micro-kernel's register tile: its ACCUMULATORS accumulators in rows of
    PACKED_VECTORS vectors, else of two, where the register file holds them and whole tiles
    of rows divide M; of those, the first whose column tail (split off, see
    packed.column_tail) is at most one vector or exactly two; else MR x NR.
    Wider rows take fewer loads per FMA: 4 x 4 vectors loads 4 B vectors and broadcasts 4
    elements of A per 16 FMAs, 8 x 2 vectors 2 and 8. Measured on an Intel Xeon, f32: the
    tuner's best for 1024^3 and 2048^3 was this tile at KC=1024, 1.08x and 1.10x the 8 x 2
    tile's blocks; benchmarks/gemm_shapes.py 0.97x -> 1.02x OpenBLAS (geometric mean). The
    Zen 4 library's tuned 1024^3 entry is this tile too. A wider tail costs the split-off
    nest more: 1000x999x1001 ran at 0.90x with 4 x 64 (a 39-column tail), 0.97x with 8 x 32
    (7 columns)."""
    lanes = cpu.lanes(op.element_type)
    m, n = op.dims["M"], op.dims["N"]
    tiles = [(ACCUMULATORS // v, v * lanes) for v in (PACKED_VECTORS, 2)]
    usable = [
        (rows, width)
        for rows, width in tiles
        if cpu.features.vector_registers >= ACCUMULATORS + width // lanes + 1
        and m % rows == 0
        and n >= width
    ]
    narrow = [(r, w) for r, w in usable if n % w <= lanes or n % w == 2 * lanes]
    return (narrow or usable or [(mr, nr)])[0]


def packed_blocks(op: OpInfo, cpu: HostCPU, mr: int, nr: int) -> Config | None:
    """Goto/BLIS blocks for operands past L2: the largest whole blocks within the analytical
    model's bounds (blocking.py), B packed and A too where the model says so. The packed
    nest splits off N's columns past the last whole register tile (`column_tail`) and takes
    K's remainder in its first K block, so NC need only divide the other columns and KC
    need not divide K. NC is tried within C's panel in L2, then within L3, and is at least
    MIN_PANEL_COLUMNS wide. A shape with no whole M or N blocks gets even blocks
    whose last one is padded, with A packed only: read in place (PACK=1), A's partial
    panels are padded per register tile, unvectorized (measured 0.16x numpy at 1000x999x1001
    against 0.97x unpacked), so then None. An A stored [K, M] is always packed, in blocks
    as wide as L3 allows: read in place, each K step's MR values lie a row of A apart, and
    every A block is re-packed once per column block (1024x2048x4096: 274 ms with A in
    place, 186 ms packed with NC=128, 120 ms with NC=2048, against 109 ms for A [M, K])."""
    m, n, k = op.dims["M"], op.dims["N"], op.dims["K"]
    bounds = blis_blocking(cpu.features, mr, nr, element_bytes(op.element_type), m)
    if op.attributes.get("transpose_a"):
        bounds = dataclasses.replace(bounds, nc=bounds.l3_nc, pack_a=True)
    columns = n - column_tail(op, mr, nr)
    per_thread = max(nr, columns // cpu.threads)  # a column block per thread
    mc = whole_block(m, bounds.mc, mr)
    wide_enough = min(per_thread, MIN_PANEL_COLUMNS)  # else A is re-read for few columns
    # As many column blocks for each thread (128x768x3072, two threads: 3 blocks of 256
    # took 3.1 ms, 4 of 192 2.3 ms).
    nc = next(
        (
            block
            for bound in (bounds.nc, bounds.l3_nc)
            if (block := whole_block(columns, min(bound, per_thread), nr, cpu.threads))
            and block >= wide_enough
        ),
        None,
    )
    if None in (mc, nc) and not bounds.pack_a:
        return None
    # Whole K blocks of 8 rows where K has them (so the packing copies move 8 rows at a
    # time), else even ones: the knob's candidates (see _k_blocks).
    kc = whole_block(k, bounds.kc, 8 if k % 8 == 0 else 1) or padded_block(k, bounds.kc, 1)
    return {
        "MC": mc or padded_block(m, bounds.mc, mr),
        "NC": nc or padded_block(columns, min(bounds.nc, per_thread), nr),
        "KC": kc,
        "MR": mr,
        "NR": nr,
        "PACK": PACK_AB if bounds.pack_a else PACK_B,
    }
