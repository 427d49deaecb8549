"""The `contraction` family: cache and register tiling of matmul and batch_matmul roots, with
their fill and element-wise consumers (bias, ReLU) fused into the cache tiles.

transform.py builds the transform module; host.py holds the host CPU selector and cost model,
constraints.py the constraints, root.py the recognition of its roots, steps/ its own IR
rewrites. packed.py (PACK > 0) packs the operands' panels; dot.py (UNIT 1 and 2) takes
bf16 pairs; rows.py (UNIT 3) runs products of one column (N == 1) as row dot products along
K; each path's *_host.py module holds its host selector. The knobs and their defaults are
declared here, once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from mlir import ir

from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.schedule import Config, Constraint, Domains, Knob, KnobVariables, Step
from mlirtune.schedules.contraction import host
from mlirtune.schedules.contraction.amx_host import amx_columns, amx_rows
from mlirtune.schedules.contraction.constraints import constraints
from mlirtune.schedules.contraction.dot import dot_schedule
from mlirtune.schedules.contraction.knob_values import (
    PACK_AB,
    PACK_B,
    PACK_NONE,
    UNIT_AMX,
    UNIT_DOT,
    UNIT_FMA,
    ContractionKnobs,
)
from mlirtune.schedules.contraction.packed import packed_schedule
from mlirtune.schedules.contraction.packed_host import K_CACHE_TILES
from mlirtune.schedules.contraction.root import contraction_flops, recognise_contraction
from mlirtune.schedules.contraction.rows import UNIT_ROWS, rows_schedule
from mlirtune.schedules.contraction.rows_host import rows_k_steps
from mlirtune.schedules.contraction.steps.amx_accumulators import hoist_amx_accumulators
from mlirtune.schedules.contraction.steps.bf16_shuffles import shuffle_bf16_as_i16
from mlirtune.schedules.contraction.steps.flatten_transfers import flatten_narrow_transfers
from mlirtune.schedules.contraction.steps.pair_products import pair_products
from mlirtune.schedules.contraction.steps.prefetch_ahead import prefetch_panel_ahead
from mlirtune.schedules.contraction.steps.prefetch_panel import prefetch_next_panel
from mlirtune.schedules.contraction.steps.widen import widen_narrow_operands
from mlirtune.schedules.contraction.steps.widen_in_packs import widen_in_packs
from mlirtune.schedules.contraction.steps.word_transposes import transpose_groups_as_words
from mlirtune.schedules.contraction.transform import contraction_schedule
from mlirtune.schedules.cpu_model import HostFamily, ceil_div
from mlirtune.schedules.knobs import (
    cache_tiles,
    choices,
    register_rows,
    threads_knob,
    vector_bits_knob,
    vector_columns,
)
from mlirtune.targets.host_cpu import HostCPU

# NR candidates, in vectors: LLVM splits three-vector (or 2.5-vector) rows into odd-sized
# pieces, measured 10-25x slower.
NR_VECTORS = (1, 2, 4)
# Most even K blocks a K of no whole 8-row blocks is offered in.
EVEN_K_BLOCKS = 8


def _k_blocks(op: OpInfo, lanes: int) -> list[int]:
    """KC candidates: cache-sized K blocks, even ones where K has no whole 8-row blocks (the
    packed nest's first K block takes the remainder), for skinny products a few rows of B,
    and for products of one column the row-dot path's K steps (rows_host.py)."""
    k = op.dims["K"]
    blocks = [*K_CACHE_TILES(op, lanes), *rows_k_steps(op, lanes)]
    if k % 8:
        blocks += [b for b in (ceil_div(k, t) for t in range(2, EVEN_K_BLOCKS + 1)) if b >= 64]
    if op.dims["M"] <= host.SKINNY_ROWS:
        blocks += [size for size in (8, 16, 32) if k % size == 0]
    return blocks


def _n_blocks(op: OpInfo, lanes: int) -> list[int]:
    """NC candidates: cache-sized N blocks, and for each NR the columns of N's whole register
    tiles (the packed nest's; it splits the others off, see packed.column_tail)."""
    n = op.dims["N"]
    widths = [v * lanes for v in NR_VECTORS if n > v * lanes]
    return [
        *cache_tiles("N", floor=1, granule=1, in_lanes=True)(op, lanes),
        *(n - n % width for width in widths if n % width),
    ]


def _m_rows(op: OpInfo, lanes: int) -> list[int]:
    """MR candidates: the broadcast rows of the FMA and dot paths, and the rows of AMX
    register tiles (two 16-row tiles of C, on bf16 matmuls)."""
    return sorted({*register_rows("M")(op, lanes), *amx_rows(op)})


def _n_columns(op: OpInfo, lanes: int) -> list[int]:
    """NR candidates: rows of whole vector registers, and the columns of AMX register
    tiles (three 16-column tiles of C, on bf16 matmuls)."""
    return sorted({*vector_columns("N", NR_VECTORS)(op, lanes), *amx_columns(op)})


def _units(op: OpInfo, lanes: int) -> tuple[int, ...]:
    """UNIT candidates: the pair paths on bf16 and int8 matmuls (dot products, AMX tiles),
    the row-dot path on one column."""
    pairs = {"bf16": (UNIT_DOT, UNIT_AMX), "i8": (UNIT_DOT, UNIT_AMX)}.get(op.element_type, ())
    pairs = pairs if op.kind == "matmul" else ()
    return (UNIT_FMA, *pairs, *((UNIT_ROWS,) if op.dims["N"] == 1 else ()))


class Contraction(HostFamily[ContractionKnobs]):
    """MC x NC x KC cache tiles around an MR x NR register tile, K steps unrolled KU times,
    output blocks walked in ORDER."""

    name = "contraction"
    description = "cache + register tiling, fused epilogue, broadcast/FMA micro-kernel"
    root_kinds = ("matmul", "batch_matmul")
    owns = ("matmul", "batch_matmul")
    steps: ClassVar[Mapping[str, Step]] = {
        "widen-narrow-operands": widen_narrow_operands,
        "widen-in-packs": widen_in_packs,
        "prefetch-next-panel": prefetch_next_panel,
        "prefetch-panel-ahead": prefetch_panel_ahead,
        "pair-products": pair_products,
        "hoist-amx-accumulators": hoist_amx_accumulators,
        "shuffle-bf16-as-i16": shuffle_bf16_as_i16,
        "transpose-groups-as-words": transpose_groups_as_words,
        "flatten-narrow-transfers": flatten_narrow_transfers,
    }
    knobs = (
        Knob(
            "MC",
            "rows of the cache tile (output block)",
            64,
            cache_tiles("M", floor=8, granule=4),
        ),
        Knob(
            "NC",
            "columns of the cache tile",
            128,
            _n_blocks,
        ),
        # From 64: every K tile loads and stores the accumulators, which would dominate
        # shorter ones; skinny products (host.SKINNY_ROWS) also take short K blocks.
        Knob("KC", "depth of the cache tile (K loop step)", 256, _k_blocks),
        Knob("MR", "rows of the register tile (A broadcasts per K step)", 8, _m_rows),
        Knob(
            "NR",
            "columns of the register tile (B vectors per K step)",
            32,
            _n_columns,
        ),
        # Not selected: 1 leaves the micro-kernel's K-step loop rolled.
        Knob(
            "KU",
            "unroll factor of the micro-kernel's K-step loop",
            1,
            choices(1, 2, 4, 8),
            selected=False,
        ),
        # 1 walks the output blocks (the register tiles of the packed nest, with PACK=2)
        # M outer, 2 N outer (packed_order.py says where the selector takes it).
        Knob(
            "ORDER",
            "loop order of the output blocks (packed: register tiles): 1 = M outer, 2 = N outer",
            1,
            choices(1, 2),
            alternatives=(1, 2),
        ),
        # Matmul roots only (packed.py): 0 reads A and B in place, 1 packs B's panels per
        # KC x NC block, 2 packs A's per MC x KC block too.
        Knob(
            "PACK",
            "operand packing: 0 = none, 1 = B panels, 2 = A and B panels (Goto/BLIS nest)",
            PACK_NONE,
            lambda op, lanes: (PACK_NONE, PACK_B, PACK_AB) if op.kind == "matmul" else (0,),
            minimum=PACK_NONE,
            alternatives=(PACK_NONE, PACK_B, PACK_AB),
        ),
        # The packed nest with A read in place only (PACK=1, packed.py): 1 has each row of
        # register tiles prefetch the next row's A panel (ir/prefetch_panel.py), 2 also
        # each K loop B's panel rows ahead (ir/prefetch_ahead.py).
        Knob(
            "PREFETCH",
            "packed nest reading A in place: prefetch nothing (0), the next row of register "
            "tiles' A panel (1), or that and B's panel rows a few K steps ahead (2)",
            0,
            lambda op, lanes: (0, 1, 2) if op.kind == "matmul" else (0,),
            minimum=0,
            alternatives=(0, 1, 2),
        ),
        # bf16 and int8 matmul roots only (dot.py): 0 widens the operands for FMA (or int32
        # multiply-add) micro-kernels, 1 multiplies pairs with dot products (AVX512-BF16
        # for bf16, AVX2 vpmaddwd for int8), 2 with AMX tiles (bf16; the target's features
        # decide). Products of one column only (rows.py): 3 runs FMAs along K and sums each
        # row's lanes at the end.
        Knob(
            "UNIT",
            "micro-kernel instructions: 0 = FMA, 1 = dot products of K pairs (bf16: "
            "AVX512-BF16, i8: vpmaddwd), 2 = AMX tiles (bf16), 3 = FMA along K, lanes summed "
            "per row (N == 1)",
            UNIT_FMA,
            _units,
            minimum=UNIT_FMA,
            alternatives=(UNIT_FMA, UNIT_DOT, UNIT_AMX, UNIT_ROWS),
        ),
        threads_knob(),
        vector_bits_knob(),
    )
    values_type = ContractionKnobs

    def recognise(
        self, op: ir.Operation, loops: list[int], dtypes: tuple[str, ...]
    ) -> OpInfo | None:
        return recognise_contraction(op, loops, dtypes)

    def root_flops(self, op: OpInfo) -> int:
        return contraction_flops(op)

    def summed_terms(self, op: OpInfo) -> int:
        return op.dims["K"]

    def build(self, op: OpInfo, parameters: Config) -> ir.Module:
        knobs = self.knob_values(op, parameters)
        if knobs.unit == UNIT_ROWS:
            return rows_schedule(op, knobs)
        if knobs.unit != UNIT_FMA:
            return dot_schedule(op, knobs)
        if knobs.pack != PACK_NONE:
            return packed_schedule(op, knobs)
        return contraction_schedule(op, knobs)

    def select_on(self, op: OpInfo, cpu: HostCPU) -> Config:
        return host.select(op, cpu)

    def select_around(self, op: OpInfo, cpu: HostCPU, fixed: Config) -> Config:
        """The blocks of the micro-kernel path a fixed UNIT names (e.g. --param UNIT=0 on an
        AMX host: the FMA path's blocks, not the AMX tiles' with UNIT=0), in whole register
        tiles of a fixed MR and NR (--param MR=8 on an AVX2 host, whose selector takes 6-row
        tiles, gets a multiple of 8 rows for MC)."""
        # A fixed packing or prefetch names the M-outer nest's (packed_order.py).
        n_outer = not {"PACK", "PREFETCH"} & set(fixed) or fixed.get("ORDER") == 2
        chosen = host.select(op, cpu, fixed.get("UNIT"), n_outer=n_outer)
        domains = self.knob_domains(op, cpu)
        for block, tile in (("MC", "MR"), ("NC", "NR")):
            if fixed.get(tile, 0) <= 0 or block in fixed:
                continue  # a tile of no rows is refused by the parameters' own check
            if chosen[block] % fixed[tile]:
                whole = [v for v in domains[block] if v % fixed[tile] == 0] or [fixed[tile]]
                chosen[block] = min(whole, key=lambda v: abs(v - chosen[block]))
        return chosen

    def constraints_on(
        self, op: OpInfo, cpu: HostCPU, knobs: KnobVariables, domains: Domains
    ) -> list[Constraint]:
        return constraints(op, cpu, knobs, domains)

    def cost_on(self, op: OpInfo, cpu: HostCPU, knobs: ContractionKnobs) -> float:
        return host.cost(op, cpu, knobs)


CONTRACTION = Contraction()

__all__ = ["CONTRACTION", "Contraction", "contraction_schedule"]
