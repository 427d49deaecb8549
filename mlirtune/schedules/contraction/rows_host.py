"""The contraction family's row-dot path (rows.py) on the host CPU: its selector,
constraints and cost model.

A product of one column (N == 1, A not stored transposed) takes it: MR rows at a time
(a few streams of A, which the prefetchers follow; one alone measured 0.65x the bandwidth
of four), each with KC / lanes vector accumulators, as many as keep the FMA pipes busy.
The accumulators are f32 whatever the operands are (bf16 products are widened).
"""

from __future__ import annotations

import math

import z3

from mlirtune.interfaces.dtype import element_bytes
from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.schedule import Config, Constraint, Domains, KnobVariables
from mlirtune.schedules.contraction.knob_values import PACK_NONE, ContractionKnobs
from mlirtune.schedules.contraction.rows import UNIT_ROWS
from mlirtune.schedules.cpu_model import (
    ACCUMULATORS,
    LOAD_PORTS,
    LOOP_CYCLES,
    TILE_CYCLES,
    Traffic,
    accumulator_floor,
    ceil_div,
    fma_latency,
    seconds,
    tile_extents,
    vectors,
)
from mlirtune.targets.host_cpu import FMA_UNITS, HostCPU

# Rows of A a register tile streams at once: x is loaded once for all of them, and four
# streams reached the memory bandwidth (measured 256x1x131072 f32: 4.4-4.6 ms with 2 or
# 4 rows, 4.8 ms with 8, 7.2 ms with 1).
ROWS = 4
# Vectors of K per row: past four, a step's loads outgrow what the accumulators hide.
MAX_ROW_VECTORS = 8
# Memory time of a one-row tile against several rows (the measurement above).
ONE_STREAM_PENALTY = 1.6


def takes_rows(op: OpInfo) -> bool:
    """Whether the row-dot path applies to `op`: one column, A's rows contiguous along K."""
    return op.dims["N"] == 1 and not op.attributes.get("transpose_a")


def _accumulator_lanes(op: OpInfo, cpu: HostCPU) -> int:
    return cpu.lanes(op.dtypes[-1])


def _x_registers(rows: int, row_vectors: int) -> int:
    """Registers a step keeps x's vectors in: all of them, reused by every row; one row
    uses each once, straight from its load."""
    return row_vectors if rows > 1 else 1


def rows_select(op: OpInfo, cpu: HostCPU) -> Config | None:
    """MR = ROWS rows (fewer in a shorter M), KC = as many vectors per row as make
    ACCUMULATORS accumulators (at least the FMAs in flight) within the register file; one
    MC block per thread. None where the path does not apply (`takes_rows`)."""
    if not takes_rows(op):
        return None
    m, k = op.dims["M"], op.dims["K"]
    lanes = _accumulator_lanes(op, cpu)
    registers = cpu.features.vector_registers
    mr = min(m, ROWS)
    row_vectors = min(
        MAX_ROW_VECTORS, max(ACCUMULATORS // mr, ceil_div(cpu.features.fma_in_flight, mr))
    )
    while row_vectors > 1 and mr * row_vectors + _x_registers(mr, row_vectors) + 1 > registers:
        row_vectors //= 2
    kc = min(k, row_vectors * lanes)
    mc = m
    if cpu.threads > 1:  # one block of whole row tiles per thread, where M has one
        share = ceil_div(m, cpu.threads)
        mc = next((b for b in range(share, m) if m % b == 0 and b % mr == 0), m)
    return {"MC": mc, "NC": 1, "KC": kc, "MR": mr, "NR": 1, "PACK": PACK_NONE, "UNIT": UNIT_ROWS}


def rows_k_steps(op: OpInfo, lanes: int) -> list[int]:
    """KC candidates of the row-dot path: 1, 2, 4 or 8 vectors of K per row."""
    if not takes_rows(op):
        return []
    return [v * lanes for v in (1, 2, 4, MAX_ROW_VECTORS) if v * lanes <= op.dims["K"]]


def rows_constraints(
    op: OpInfo, cpu: HostCPU, knobs: KnobVariables, domains: Domains
) -> list[Constraint]:
    """The row-dot path's conditions (rows.rows_unusable), its register budget, and no
    knob it ignores set to another value (that would repeat its kernel)."""
    m, k = op.dims["M"], op.dims["K"]
    mc, kc, mr = knobs["MC"], knobs["KC"], knobs["MR"]
    other = knobs["UNIT"] != UNIT_ROWS
    lanes = _accumulator_lanes(op, cpu)
    registers = cpu.features.vector_registers
    v = vectors(kc, lanes)
    reachable = max(domains["MR"], default=0) * ceil_div(max(domains["KC"], default=0), lanes)
    floor = accumulator_floor(cpu, reachable)
    return [
        Constraint(
            "rows_needs_one_column",
            f"UNIT != {UNIT_ROWS} or N == 1 (here {op.dims['N']}): the path vectorizes along "
            "K, for products of one column",
            z3.Or(other, z3.BoolVal(op.dims["N"] == 1)),
        ),
        Constraint(
            "rows_needs_rows_of_a",
            f"UNIT != {UNIT_ROWS} or A not stored transposed: the path reads A's rows along K",
            z3.Or(other, z3.BoolVal(not op.attributes.get("transpose_a"))),
        ),
        Constraint(
            "rows_whole_blocks",
            f"UNIT != {UNIT_ROWS}, or MC >= {m}, or MC divides {m} and MR divides MC: the "
            "path makes whole row blocks only (rows.row_blocks), so other values would "
            "repeat the MC >= M kernel",
            z3.Or(other, mc >= m, z3.And(m % mc == 0, mc % mr == 0)),
        ),
        Constraint(
            "rows_whole_vectors",
            f"UNIT != {UNIT_ROWS} or KC % {lanes} == 0 or KC == {k}: whole vectors of K",
            z3.Or(other, kc % lanes == 0, kc == k),
        ),
        Constraint(
            "rows_register_budget",
            f"UNIT != {UNIT_ROWS} or MR*v + x + 1 <= {registers} with v = ceil(KC/{lanes}) "
            "and x = v (1 for MR == 1): the accumulators, one step's vectors of x (kept for "
            "every row) and a loaded vector of A fit the vector registers",
            z3.Or(other, mr * v + z3.If(mr > 1, v, 1) + 1 <= registers),
        ),
        Constraint(
            "rows_min_accumulators",
            f"UNIT != {UNIT_ROWS} or MR*v >= {floor}: enough independent accumulators to "
            f"cover the FMAs the core keeps in flight ({cpu.features.fma_in_flight}), or the "
            "most the candidates reach",
            z3.Or(other, mr * v >= floor),
        ),
        Constraint(
            "rows_repeats_nothing",
            f"UNIT != {UNIT_ROWS} or (PACK == 0, KU == 1, ORDER == 1, and MC >= {m} unless "
            f"the kernel runs on several threads; here {cpu.threads}): the path ignores "
            "them, so other values would repeat its kernel",
            z3.Or(
                other,
                z3.And(
                    knobs["PACK"] == PACK_NONE,
                    knobs["KU"] == 1,
                    knobs["ORDER"] == 1,
                    z3.Or(mc >= m, z3.BoolVal(cpu.threads > 1)),
                ),
            ),
        ),
    ]


def rows_cost(op: OpInfo, cpu: HostCPU, knobs: ContractionKnobs) -> float:
    """Roofline of the K steps against A's stream and x's re-reads, plus the per-row sums.

    A step of an MR-row tile issues MR*v FMAs and MR*v + v loads (v = KC / lanes) and
    cannot be shorter than an FMA's latency. A (M x K) streams once; a one-row tile reads
    one stream, slower (ONE_STREAM_PENALTY). x (K) is re-read by every row tile, from
    wherever it stays. Each row's v accumulators are summed, then their lanes as a tree.
    """
    batch = op.dims.get("B", 1)
    m, k = op.dims["M"], op.dims["K"]
    size_in = element_bytes(op.element_type)
    lanes = _accumulator_lanes(op, cpu)
    mr, kc = min(knobs.mr, m), min(knobs.kc, k)
    tiles = tile_extents(m, m, mr)
    compute = 0.0
    for rows, count in tiles.items():
        for width, steps in ((kc, k // kc), (k % kc, 1)):
            v = ceil_div(width, lanes)
            step = max(rows * v / FMA_UNITS, (rows * v + v) / LOAD_PORTS, fma_latency(cpu))
            compute += count * steps * (step + LOOP_CYCLES) if width else 0.0
    row_tiles = sum(tiles.values())
    sums = m * (ceil_div(kc, lanes) + math.log2(lanes) * fma_latency(cpu))
    a_bytes, x_bytes = m * k * size_in, k * size_in
    traffic = Traffic(cpu)
    traffic.add(a_bytes * (ONE_STREAM_PENALTY if mr == 1 else 1.0), a_bytes)
    traffic.add(x_bytes * row_tiles, x_bytes)
    cycles = max(compute, traffic.cycles()) + sums + row_tiles * TILE_CYCLES
    return seconds(batch * cycles, cpu)
