"""The contraction family's AMX path on the host CPU: when the target takes it, its blocks,
its constraints. The schedule is dot.py's (UNIT=2); the cost is host.py's, on the pair view.

The selector takes AMX tiles for a bf16 (int8) matmul where the CPU has AMX-BF16
(AMX-INT8), Linux grants this process tile state, and the shape is whole tiles (M and N in
16s, K in 32s, or 64s for int8). Its blocks come from the micro-kernel's traffic, measured
on a 2-core Intel Xeon with AMX (48 KiB L1d, 2 MiB L2), 2048^3 bf16, GFLOP/s:
- One K block spanning all of K: the C tiles start as zero tiles and are stored once
  (ir/amx_accumulators.py). With K blocks of 256 or 512 each block loads and stores every C
  tile again, rows a row of C apart: 680 and 740 against 930 (MC 128, NC 256 each).
- A's block (MC x K) in an eighth of L2: MC 64 ran 990, 128 890, 256 825, 512 610 (512^3:
  MC 256 940, 512 890; 128x4096x4096: MC 32 410, 64 380, 128 330).
- B's VNNI rows at most 1 KiB apart (NC <= 256 pairs of columns): a tile load reads 16 of
  them, which at 2 KiB fall into two L1 sets (NC 512: 550 against 890 at 256, MC 128).
- B's VNNI block (KC x NC) in half of L2's ways, as the packed path's B block
  (blocking.py): at K = 4096 that is NC = 128, where 256 spilled the block out of L2
  (128x4096x4096: 9.2 -> 5.9 ms; a Linear layer's 512x4096x4096: 45.6 -> 26.6 ms).
"""

from __future__ import annotations

import z3

from mlirtune.interfaces.dtype import element_bytes
from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.schedule import Config, Constraint, KnobVariables
from mlirtune.schedules.contraction.blocking import b_block_budget, whole_block
from mlirtune.schedules.contraction.dot import (
    AMX_GROUPS,
    AMX_REGISTER_TILES,
    AMX_REGISTERS,
    AMX_TILE,
    k_group,
    unpaired_layouts,
)
from mlirtune.schedules.contraction.knob_values import PACK_NONE, UNIT_AMX
from mlirtune.targets.host_cpu import AMX_UNITS, HostCPU

# Columns of B's VNNI block: its rows are NC pairs of 2 bytes apart, at most 1 KiB.
AMX_B_COLUMNS = 256
# Tile products per cycle against dot products, for the cost model: a tile product (16 x 16
# by 16 pairs, 4096 pair products) in about 16 cycles, against two 16-lane vdpbf16ps a cycle
# (32). Measured about 9x (512^3 bf16, Xeon with AMX: 980 against 104 GFLOP/s).
AMX_SPEEDUP = 8.0
# The vector micro-kernels' constraints (host.py) that the AMX path waives: its accumulators
# and operands are in tile registers, and its A panel streams from L2 (the blocks above).
AMX_WAIVES = {"register_budget", "min_accumulators", "a_panel_in_l1", "unrolled_body"}
# Register tiles by preference: the most C tiles first (a K step's A and B tiles then serve
# the most products), then the squarest.
PREFERRED_TILES = sorted(
    AMX_REGISTER_TILES, key=lambda tile: (-(tile[0] * tile[1]), abs(tile[0] - tile[1]))
)


def takes_amx(op: OpInfo, cpu: HostCPU) -> bool:
    """Whether the target multiplies `op` in AMX tiles: a bf16 or int8 matmul with a plain
    layout on a host with AMX for its type whose OS grants tile state."""
    if op.kind != "matmul" or unpaired_layouts(op):
        return False
    return cpu.has_amx(op.element_type)


def amx_k_step(op: OpInfo) -> int:
    """K elements of one tile product on `op`: 16 groups of 32 bits (32 bf16, 64 int8)."""
    return AMX_GROUPS * k_group(op, UNIT_AMX)


def amx_blocks(op: OpInfo, cpu: HostCPU) -> Config | None:
    """The AMX path's blocks for `op` (see the module docstring), or None where the target
    has no AMX tiles for it or the shape is not whole tiles."""
    m, n, k = op.dims["M"], op.dims["N"], op.dims["K"]
    step = amx_k_step(op)
    if not takes_amx(op, cpu) or k % step:
        return None
    tile = next(((mr, nr) for mr, nr in PREFERRED_TILES if m % mr == 0 and n % nr == 0), None)
    if tile is None:
        return None
    mr, nr = tile
    l2, size = cpu.features.l2_bytes, element_bytes(op.element_type)
    # All of K while one register tile's A and B micro-panels fit a quarter of L2.
    kc = whole_block(k, max(step, l2 // 4 // ((mr + nr) * size)), step)
    if kc is None:
        return None
    mc = whole_block(m, max(mr, l2 // 8 // (kc * size)), mr)
    nc_bound = min(AMX_B_COLUMNS, b_block_budget(cpu.features) // (kc * size))
    nc = whole_block(n, max(nr, nc_bound), nr, cpu.threads)
    if mc is None or nc is None:
        return None
    return {"MC": mc, "NC": nc, "KC": kc, "MR": mr, "NR": nr, "PACK": PACK_NONE, "UNIT": UNIT_AMX}


def amx_constraints(op: OpInfo, cpu: HostCPU, knobs: KnobVariables) -> list[Constraint]:
    """The AMX path's conditions on the target, the register tile (dot.dot_unusable) and
    B's block (the module docstring)."""
    mr, nr, kc, nc, unit = (knobs[name] for name in ("MR", "NR", "KC", "NC", "UNIT"))
    step, size = amx_k_step(op), element_bytes(op.element_type)
    budget = b_block_budget(cpu.features)
    return [
        Constraint(
            "amx_b_block_in_l2",
            f"UNIT != {UNIT_AMX} or KC*NC*{size} <= {budget}: B's VNNI block, which every "
            "row of register tiles streams, keeps to half of L2's ways",
            z3.Or(unit != UNIT_AMX, kc * nc * size <= budget),
        ),
        Constraint(
            "amx_needs_amx_tiles",
            f"UNIT != {UNIT_AMX} or a bf16 (int8) matmul on a host with AMX-BF16 (AMX-INT8) "
            "whose OS grants tile state",
            z3.Or(unit != UNIT_AMX, z3.BoolVal(takes_amx(op, cpu))),
        ),
        Constraint(
            "amx_needs_whole_tiles",
            f"UNIT != {UNIT_AMX} or ((MR, NR) in {AMX_REGISTER_TILES} and KC % {step} == 0): "
            f"one tile product is {AMX_TILE} x {AMX_TILE} by {step} of K, and the register "
            f"tile's C tiles and one K step's A and B tiles fit {AMX_REGISTERS} tile registers",
            z3.Or(
                unit != UNIT_AMX,
                z3.And(
                    z3.Or(*(z3.And(mr == r, nr == c) for r, c in AMX_REGISTER_TILES)),
                    kc % step == 0,
                ),
            ),
        ),
    ]


def amx_rows(op: OpInfo) -> list[int]:
    """MR candidates of the AMX path on `op`: the register tiles' rows that divide M."""
    return _extents(op, "M", 0)


def amx_columns(op: OpInfo) -> list[int]:
    """NR candidates of the AMX path on `op`: the register tiles' columns that divide N."""
    return _extents(op, "N", 1)


def _extents(op: OpInfo, dim: str, side: int) -> list[int]:
    if op.kind != "matmul" or op.element_type not in AMX_UNITS:
        return []
    return sorted({tile[side] for tile in AMX_REGISTER_TILES if op.dims[dim] % tile[side] == 0})
