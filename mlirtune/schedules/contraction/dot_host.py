"""The contraction family's dot-product paths on the host CPU (AVX512-BF16 for bf16, AVX2
vpmaddwd for int8): when the target takes them, their blocks and the pair paths' shared
constraints. The schedules are dot.py's; the cost is the FMA path's on the pair view
(host.py). AMX tiles, the other pair path, have their own selector (amx_host.py).
"""

from __future__ import annotations

import dataclasses

import z3

from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.schedule import Config, Constraint, KnobVariables
from mlirtune.schedules.contraction.blocking import blis_blocking, whole_block
from mlirtune.schedules.contraction.dot import (
    DOT_LANES,
    DOT_PAIR,
    unpaired_layouts,
)
from mlirtune.schedules.contraction.knob_values import PACK_NONE, UNIT_AMX, UNIT_DOT
from mlirtune.schedules.contraction.register_tiles import packed_register_tile
from mlirtune.schedules.cpu_model import PAGE_BYTES, SKINNY_ROWS, register_tile
from mlirtune.targets.host_cpu import HostCPU


def pair_view(op: OpInfo) -> OpInfo:
    """`op` as the dot path sees it: K/2 steps over pairs (of bf16, or of int8 widened to
    int16), each 4 bytes like an f32, so the FMA path's blocking model and cost model apply
    unchanged."""
    dims = {**op.dims, "K": op.dims["K"] // DOT_PAIR}
    return dataclasses.replace(op, dims=dims, dtypes=("f32",) * len(op.dtypes))


def has_dot_products(op: OpInfo, cpu: HostCPU) -> bool:
    """Whether the target multiplies `op`'s pairs in one instruction: a bf16 matmul with
    AVX512-BF16's vdpbf16ps, an int8 one with AVX2's vpmaddwd (AVX-512 hosts have it too)."""
    if op.kind != "matmul":
        return False
    if op.element_type == "bf16":
        return cpu.has_bf16_dot()
    return op.element_type == "i8" and cpu.has_int8_dot()


def dot_blocks(op: OpInfo, cpu: HostCPU) -> Config | None:
    """Goto/BLIS blocks for the dot path (dot.py) on a bf16 or int8 matmul, from the
    blocking model of the pair view; None where the host has no dot products for its type
    or the shape has no whole blocks (odd K, N not in whole vectors)."""
    m, n, k = op.dims["M"], op.dims["N"], op.dims["K"]
    if not has_dot_products(op, cpu) or k % DOT_PAIR:
        return None
    if op.element_type == "i8" and m <= SKINNY_ROWS:
        # Memory-bound: int16 copies double the bytes a skinny product reads (AVX2 Zen 3,
        # 8x4096x4096: 12.9 GOP/s against 17.2 on the FMA path's skinny tile). From 16 rows
        # the dot path is the faster (32x4096x4096 37 against 20, 128x4096x4096 75 against
        # 39, 256^3 132 against 55).
        return None
    if unpaired_layouts(op):  # layouts the pair packing cannot take (dot_needs_plain_layout)
        return None
    lanes = DOT_LANES[op.element_type]
    # Tiles of the kernel's vectors: 16 f32 lanes for bf16 (AVX-512 only), 8 int32 for int8.
    compute = "f32" if op.element_type == "bf16" else op.element_type
    mr, nr = register_tile(cpu, m, n, compute)
    if m % mr and op.element_type == "i8":  # AVX2's 6 x 16 divides no power of two
        mr, nr = packed_register_tile(op, cpu, mr, nr)
    if nr % lanes:
        return None
    bounds = blis_blocking(cpu.features, mr, nr, 4)
    # B's pairs are packed per column block, in rows of NC pairs: a micro-panel's rows are
    # NC*4 bytes apart. Rows of half a page keep them spread over L1's sets and a few to a
    # page; that bound, far under the model's, sets NC (measured, bf16 on AVX-512: NC=512
    # ran 1.1x faster than NC=2048 at 2048^3, and than NC=256 at 128x4096x4096). The int8
    # pairs' block is one micro-panel, its rows contiguous (AVX2 Zen 3, NC=16 against 512:
    # 512^3 49 -> 56 GOP/s, 2048^3 64 -> 73, 256x4096x4096 33 -> 40).
    nc_bound = nr if op.element_type == "i8" else min(n // cpu.threads, PAGE_BYTES // 2 // 4)
    mc, nc, pairs = (
        whole_block(m, bounds.mc, mr),
        whole_block(n, nc_bound, nr, cpu.threads),
        whole_block(k // DOT_PAIR, bounds.kc, 1),
    )
    if mc is None or nc is None or pairs is None:
        return None
    return {
        "MC": mc,
        "NC": nc,
        "KC": DOT_PAIR * pairs,
        "MR": mr,
        "NR": nr,
        "PACK": PACK_NONE,
        "UNIT": UNIT_DOT,
    }


def dot_constraints(op: OpInfo, cpu: HostCPU, knobs: KnobVariables) -> list[Constraint]:
    """The pair paths' shared conditions (dot.dot_unusable), and the dot products' host
    features (AMX's: amx_host.amx_constraints)."""
    m, n, k = op.dims["M"], op.dims["N"], op.dims["K"]
    mc, nc, kc, mr, nr, unit = (knobs[name] for name in ("MC", "NC", "KC", "MR", "NR", "UNIT"))
    # The pair paths' conditions hold for UNIT 1 and 2 only (0 is the FMA path, 3 the
    # row-dot path of rows.py).
    not_pairs = z3.And(unit != UNIT_DOT, unit != UNIT_AMX)
    off = f"UNIT not in ({UNIT_DOT}, {UNIT_AMX})"
    lanes = DOT_LANES.get(op.element_type, DOT_LANES["bf16"])
    layout = unpaired_layouts(op)
    return [
        Constraint(
            "dot_needs_dot_products",
            f"UNIT != {UNIT_DOT} or a bf16 matmul on a host with avx512_bf16 (vdpbf16ps), "
            "or an i8 matmul on one with AVX2 (vpmaddwd)",
            z3.Or(unit != UNIT_DOT, z3.BoolVal(has_dot_products(op, cpu))),
        ),
        Constraint(
            "dot_needs_plain_layout",
            f"{off} or no operand stored transposed that the pair paths cannot pack (here: "
            f"{', '.join(layout) or 'none'}): they pack K pairs of A [M, K] and B [K, N], "
            "and of B [N, K]",
            z3.Or(not_pairs, z3.BoolVal(not layout)),
        ),
        Constraint(
            "dot_needs_k_pairs",
            f"{off} or K ({k}) and KC even: each dot product takes a pair of K",
            z3.Or(not_pairs, z3.And(z3.BoolVal(k % DOT_PAIR == 0), kc % DOT_PAIR == 0)),
        ),
        Constraint(
            "dot_needs_whole_vectors",
            f"{off} or NR % {lanes} == 0: one dot product fills {lanes} columns",
            z3.Or(not_pairs, nr % lanes == 0),
        ),
        Constraint(
            "dot_needs_whole_blocks",
            f"{off}, or MC, NC and KC divide {m}, {n} and {k} and MR and NR "
            "divide MC and NC: the dot path's loops have no partial tiles",
            z3.Or(
                not_pairs, z3.And(m % mc == 0, n % nc == 0, k % kc == 0, mc % mr == 0, nc % nr == 0)
            ),
        ),
        Constraint(
            "dot_repeats_nothing",
            f"{off} or (PACK == 0, KU == 1 and ORDER == 1): the dot path packs B "
            "its own way and has its own loop order, so other values would repeat its kernel",
            z3.Or(
                not_pairs, z3.And(knobs["PACK"] == PACK_NONE, knobs["KU"] == 1, knobs["ORDER"] == 1)
            ),
        ),
    ]
