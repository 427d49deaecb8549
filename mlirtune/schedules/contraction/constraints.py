"""The contraction family's constraints on its knobs, on a host CPU: the register tile in
the register file, whole tiles in their blocks, each block in the cache that re-reads it,
a useful unroll, and each path's own (the packed nest's here; the dot, AMX and row-dot
paths' in their *_host.py modules)."""

from __future__ import annotations

import z3

from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.schedule import Constraint, Domains, KnobVariables
from mlirtune.schedules.contraction import amx_host
from mlirtune.schedules.contraction.blocking import packed_blocks_in_caches
from mlirtune.schedules.contraction.dot_host import dot_constraints
from mlirtune.schedules.contraction.host import contraction_sizes
from mlirtune.schedules.contraction.knob_values import (
    PACK_AB,
    PACK_NONE,
    UNIT_AMX,
    UNIT_DOT,
    UNIT_FMA,
)
from mlirtune.schedules.contraction.packed_host import (
    packing_pays,
    prefetch_ahead_fits,
    prefetch_needs_a_in_place,
)
from mlirtune.schedules.contraction.rows import UNIT_ROWS
from mlirtune.schedules.contraction.rows_host import rows_constraints
from mlirtune.schedules.cpu_model import (
    OUTPUT_BLOCK_BYTES,
    narrow_tails,
    outer_product,
    vectors,
    whole_vectors,
)
from mlirtune.targets.host_cpu import HostCPU

# FMAs an unrolled K-step loop body may hold: past that, unrolling only adds code.
UNROLLED_FMAS = 32


def constraints(
    op: OpInfo, cpu: HostCPU, knobs: KnobVariables, domains: Domains
) -> list[Constraint]:
    """The register tile in the register file, whole register tiles in a cache tile, A's
    panel in L1, the B block in L2, a bounded output block and a useful unroll; then each
    path's own (packing, dot products, AMX tiles, row dot products)."""
    unit, pack = knobs["UNIT"], knobs["PACK"]
    # Packed B panels (PACK > 0) or B packed in pairs (the dot and AMX paths): blocked by
    # the model.
    paired = z3.Or(unit == UNIT_DOT, unit == UNIT_AMX)
    n_outer = z3.And(pack == PACK_AB, unit == UNIT_FMA, knobs["ORDER"] == 2)
    shared = [
        *_tile_constraints(op, cpu, knobs, domains),
        *_block_constraints(op, cpu, knobs, paired, n_outer),
        *_unroll_constraints(op, cpu, knobs),
        *_packing_constraints(op, cpu, knobs),
        *dot_constraints(op, cpu, knobs),
        *amx_host.amx_constraints(op, cpu, knobs),
        *rows_constraints(op, cpu, knobs, domains),
    ]
    return [_unless_unit(c, unit, UNIT_AMX) if c.name in amx_host.AMX_WAIVES else c for c in shared]


def _tile_constraints(
    op: OpInfo, cpu: HostCPU, knobs: KnobVariables, domains: Domains
) -> list[Constraint]:
    """Register tiles of whole vectors in the register file, whole in their cache tiles,
    and tails LLVM keeps whole. The row-dot path (UNIT=3) has no outer-product tile: its
    own constraints (rows_host.py) replace those."""
    _, m, n, _, _, _ = contraction_sizes(op)
    lanes = cpu.lanes(op.element_type)
    mc, nc, mr, nr = (knobs[name] for name in ("MC", "NC", "MR", "NR"))
    tails = f"NC % NR and ({n} % NC) % NR"
    # The accumulators the candidates reach are counted over the NR some NC tiles with
    # narrow tails: 1 x 1000 x 512 on AVX-512 reached 4 only at NR=64, whose tails are all
    # 40 wide, and its search space was empty.
    tiled = {**domains, "NR": _columns_with_narrow_tails(n, domains, lanes) or domains["NR"]}
    outer = [
        _unless_unit(c, knobs["UNIT"], UNIT_ROWS)
        for c in outer_product("MR", "NR", knobs, tiled, lanes, cpu)
    ]
    return [
        whole_vectors("NR", n, knobs, lanes),
        *outer,
        Constraint("mr_within_mc", "MR <= MC: a register tile lies in its cache tile", mr <= mc),
        Constraint("nr_within_nc", "NR <= NC: a register tile lies in its cache tile", nr <= nc),
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
        _split_tails(op, knobs, narrow_tails("nr_tails", tails, [nc % nr, n % nc % nr], lanes)),
    ]


def _columns_with_narrow_tails(n: int, domains: Domains, lanes: int) -> tuple[int, ...]:
    """The NR candidates that some NC candidate tiles whole, its peeled tails narrow
    (nc_multiple_of_nr and nr_tails, evaluated on the candidates)."""

    def tiles(nc: int, nr: int) -> bool:
        tails = [z3.IntVal(nc % nr), z3.IntVal(n % nc % nr)]
        narrow = narrow_tails("nr_tails", "", tails, lanes).expr
        return (nc % nr == 0 or nc == n) and z3.is_true(z3.simplify(narrow))

    return tuple(nr for nr in domains["NR"] if any(tiles(nc, nr) for nc in domains["NC"]))


def _block_constraints(
    op: OpInfo,
    cpu: HostCPU,
    knobs: KnobVariables,
    paired: z3.BoolRef,
    n_outer: z3.BoolRef,
) -> list[Constraint]:
    """Each block in the cache that re-reads it: A's micro-panel in L1, the unpacked B block
    in L2, the packed and paired paths' blocks (packed_blocks_in_caches), and the output
    block of the unpacked path."""
    f = cpu.features
    _, m, n, _, size_in, size_out = contraction_sizes(op)
    mc, nc, kc, mr, pack, unit = (knobs[name] for name in ("MC", "NC", "KC", "MR", "PACK", "UNIT"))
    # L1's ways but two: one for the B lines streaming past, one for C's. The selector's
    # model keeps to half of them (blocking.py); past that, a longer K block halves the
    # reloads of C, which paid on an Intel Xeon (48 KiB, 12 ways) at 4096^3: KC=2048 with
    # MR=4, 0.97x OpenBLAS, against 0.90x at 1024.
    a_panel_bytes = max(1, f.l1d_ways - 2) * (f.l1d_bytes // max(1, f.l1d_ways))
    blocked = z3.Or(pack != PACK_NONE, paired)
    return [
        Constraint(
            "a_panel_in_l1",
            f"MR*KC*{size_in} <= {a_panel_bytes}: A's micro-panel, re-read by every "
            "register tile of a row, keeps to L1's ways but two (for the B panels streaming "
            "past it and for C)",
            mr * kc * size_in <= a_panel_bytes,
        ),
        Constraint(
            "b_block_in_l2",
            f"PACK > 0, UNIT in ({UNIT_DOT}, {UNIT_AMX}) or KC*NC*{size_in} <= {f.l2_bytes}: "
            "the unpacked "
            "B block, re-read by every row of register tiles, stays in L2",
            z3.Or(blocked, kc * nc * size_in <= f.l2_bytes),
        ),
        # The packed FMA nest walking N outer (ORDER=2) keeps B's block in L3 and A's in
        # L2, as the pair paths do (packed.py).
        *packed_blocks_in_caches(
            cpu,
            size_in,
            knobs,
            z3.And(pack != PACK_NONE, unit == UNIT_FMA, z3.Not(n_outer)),
            z3.Or(paired, n_outer),
        ),
        Constraint(
            "output_block",
            f"PACK > 0, UNIT > {UNIT_FMA}, or MC*NC*{size_out} <= {OUTPUT_BLOCK_BYTES}, or "
            f"MC == {m} and "
            f"NC == {n} with the output and an M x KC and KC x N panel in L2 "
            f"({f.l2_bytes} bytes): the unpacked path fuses the fill into output blocks, and "
            "LLVM's compile time grows with the block (0.1 s for 64x64 f32, 0.5 s for "
            "128x128), for no gain once the block is past L1",
            z3.Or(
                blocked,
                unit == UNIT_ROWS,
                mc * nc * size_out <= OUTPUT_BLOCK_BYTES,
                z3.And(
                    mc == m,
                    nc == n,
                    m * n * size_out + (m + n) * kc * size_in <= f.l2_bytes,
                ),
            ),
        ),
    ]


def _unroll_constraints(op: OpInfo, cpu: HostCPU, knobs: KnobVariables) -> list[Constraint]:
    """A K-step unroll with no epilogue, only where it changes the kernel, and of a body of
    at most UNROLLED_FMAS FMAs."""
    _, _, _, k, _, _ = contraction_sizes(op)
    kc, mr, nr, ku = (knobs[name] for name in ("KC", "MR", "NR", "KU"))
    lanes = cpu.lanes(op.element_type)
    return [
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
            ku * mr * vectors(nr, lanes) <= UNROLLED_FMAS,
        ),
    ]


def _packing_constraints(op: OpInfo, cpu: HostCPU, knobs: KnobVariables) -> list[Constraint]:
    """The packed nest's: whole panels, data big enough for packing to pay, prefetches
    where A is read in place, and a rolled K step."""
    f = cpu.features
    _, m, n, k, _, _ = contraction_sizes(op)
    mc, nc, mr, nr, ku, pack = (knobs[name] for name in ("MC", "NC", "MR", "NR", "KU", "PACK"))
    return [
        Constraint(
            "pack_needs_whole_panels",
            f"PACK == 0, or MR and NR divide MC and NC (or MC >= {m}, NC >= {n}): a block's "
            "packed panels are whole register tiles; partial blocks and tiles are padded",
            z3.Or(
                pack == PACK_NONE,
                z3.And(z3.Or(mc % mr == 0, mc >= m), z3.Or(nc % nr == 0, nc >= n)),
            ),
        ),
        Constraint(
            "pack_needs_data_past_l2",
            f"PACK == 0, B ({k} x {n}) passes half of L2 ({f.l2_bytes // 2} bytes), the "
            "output does (with K blocks of A and B), or B is stored [N, K], or A [K, M] past "
            "L1: packing pays only once the unpacked nest blocks its operands in place",
            z3.Or(pack == PACK_NONE, z3.BoolVal(packing_pays(op, cpu))),
        ),
        prefetch_needs_a_in_place(op, knobs),
        prefetch_ahead_fits(knobs, cpu.lanes(op.element_type), f.vector_registers),
        Constraint(
            "pack_unrolls_nothing",
            f"PACK == 0 or (KU == 1 and (ORDER == 1 or PACK == {PACK_AB})): the packed nest "
            "has a rolled K step, and its register tiles walk N outer (ORDER=2) only with A "
            "packed per block; other values would repeat its kernel",
            z3.Or(
                pack == PACK_NONE,
                z3.And(ku == 1, z3.Or(knobs["ORDER"] == 1, pack == PACK_AB)),
            ),
        ),
    ]


def _unless_unit(constraint: Constraint, unit: z3.ArithRef, path: int) -> Constraint:
    """`constraint`, waived for the UNIT `path` that has its own (the row-dot path, UNIT=3:
    rows_host.py; AMX tiles, UNIT=2: amx_host.py)."""
    return Constraint(
        constraint.name,
        f"UNIT == {path}, or {constraint.description}",
        z3.Or(unit == path, constraint.expr),
    )


def _split_tails(op: OpInfo, knobs: KnobVariables, tails: Constraint) -> Constraint:
    """`tails`, unless the packed nest splits N's tail off in power-of-two pieces
    (packed.column_tail: MR divides M)."""
    m, mr = op.dims["M"], knobs["MR"]
    split = z3.And(knobs["PACK"] != PACK_NONE, m % mr == 0, m > mr)
    why = f"; or PACK > 0 with MR dividing {m}: the packed nest splits the tail off"
    return Constraint(tails.name, tails.description + why, z3.Or(tails.expr, split))
