"""The `generic` family: any static linalg op that no other family schedules (3-D and
transposed convolutions, 3-D pooling, reductions over several loops, products over several
batch dims), as register tiles of its output whose reductions are stepped one iteration at
a time (see transform.py). Never scalar loops where a loop is read with a unit stride: the
vectors run along the output's innermost such loop, or along a row the op sums (root.py)."""

from __future__ import annotations

import math

import z3
from mlir import ir

from mlirtune.interfaces.dtype import element_bytes
from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.schedule import Config, Constraint, Domains, Knob, KnobVariables
from mlirtune.ir.roots import indexing_maps, is_windowed
from mlirtune.schedules.cpu_model import (
    LOAD_PORTS,
    TILE_CYCLES,
    HostFamily,
    Traffic,
    ceil_div,
    seconds,
    vectors,
)
from mlirtune.schedules.generic.knob_values import GenericKnobs
from mlirtune.schedules.generic.root import KIND, loops_read, parallel_loops, recognise_generic
from mlirtune.schedules.generic.transform import generic_schedule
from mlirtune.schedules.knobs import divisors, threads_knob
from mlirtune.targets.host_cpu import FMA_UNITS, HostCPU

# Register tiles span at most this many vectors of the vector loop.
MAX_ROW_VECTORS = 4
# The largest share of the vector loop a peeled partial tile may hold (`_short_tail`).
TAIL_SHARE = 0.1


def vector_tiles(op: OpInfo, lanes: int) -> list[int]:
    """VECTOR candidates: the divisors of the vector loop up to MAX_ROW_VECTORS vectors
    that are whole vectors or the whole loop, and the largest divisor in that range (a
    loop of 100 has no multiple of 16 among its divisors); where the vector loop is a
    parallel one, whole vectors up to that many too, the tail peeled (transform.py)."""
    size = op.dims["V"]
    most = min(size, MAX_ROW_VECTORS * lanes)
    fitting = [d for d in range(1, most + 1) if size % d == 0]
    tiles = {d for d in fitting if d % lanes == 0 or d == size} | {max(fitting)}
    if _vector_loop_is_parallel(op):
        tiles |= set(range(lanes, most + 1, lanes))
    return sorted(tiles)


def _vector_loop_is_parallel(op: OpInfo) -> bool:
    return op.attributes["vector_loop"] in parallel_loops(op)


class Generic(HostFamily[GenericKnobs]):
    """VECTOR x UNROLL x UNROLL2 register tiles of the output; every reduction loop a
    step."""

    name = KIND
    description = "output register tiles of any linalg op, reductions stepped, vectorized"
    root_kinds = (KIND,)
    owns = (KIND,)

    def recognise(
        self, op: ir.Operation, loops: list[int], dtypes: tuple[str, ...]
    ) -> OpInfo | None:
        """Ops with a windowed operand or a reduction (the families asked before this one
        take the ones they schedule); element-wise ops stay the element-wise chains'."""
        reduces = len(loops_read(indexing_maps(op)[-1])) < len(loops)  # a loop C never reads
        if not (is_windowed(op) or reduces):
            return None
        return recognise_generic(op, loops, dtypes)

    def root_flops(self, op: OpInfo) -> int:
        """2 per loop iteration, each counted as a multiply-add."""
        return 2 * _iterations(op)

    def summed_terms(self, op: OpInfo) -> int:
        """The iterations of the reduction loops: the terms each output sums."""
        return _iterations(op) // _outputs(op)

    knobs = (
        Knob("VECTOR", "outputs along the vector loop per register tile", 1, vector_tiles),
        Knob("UNROLL", "outputs along the reuse loop per register tile", 1, divisors("U", 16)),
        Knob("UNROLL2", "outputs along the second reuse loop per tile", 1, divisors("U2", 16)),
        threads_knob(),
    )
    values_type = GenericKnobs

    def build(self, op: OpInfo, parameters: Config) -> ir.Module:
        return generic_schedule(op, self.knob_values(op, parameters))

    def select_on(self, op: OpInfo, cpu: HostCPU) -> Config:
        """VECTOR: the candidate closest to two vectors, whole ones that divide the loop
        preferred, then whole ones (the tail peeled) where the loop is parallel, of which
        the widest whose tail is short (`_short_tail`); UNROLL x
        UNROLL2: the divisors of the reuse loops whose accumulators fill at most half the
        vector registers (the rest hold loaded rows and broadcasts), as many as can be;
        then, along a parallel vector loop, the fewest loaded rows, the others taken by
        broadcasts (`_loaded_rows`); then as square as can be (fewest loads per FMA)."""
        lanes = cpu.lanes(op.element_type)
        candidates = vector_tiles(op, lanes)
        whole = [c for c in candidates if c % lanes == 0 and c <= 2 * lanes]
        dividing = [c for c in whole if op.dims["V"] % c == 0]
        if dividing:
            vector = max(dividing)
        elif whole:
            vector = _short_tail(op.dims["V"], whole)
        else:
            vector = min(candidates, key=lambda c: abs(c - 2 * lanes))
        budget = max(1, cpu.features.vector_registers // 2 // ceil_div(vector, lanes))
        pairs = [
            (u, u2)
            for u in range(1, min(op.dims["U"], budget) + 1)
            if op.dims["U"] % u == 0
            for u2 in range(1, min(op.dims["U2"], budget // u) + 1)
            if op.dims["U2"] % u2 == 0
        ]
        outer_product = _vector_loop_is_parallel(op)
        unroll, unroll2 = max(
            pairs,
            key=lambda p: (
                p[0] * p[1],
                -_loaded_rows(op, *p) if outer_product else 0,
                -(p[0] + p[1]),
                p[0],
            ),
        )
        return {"VECTOR": vector, "UNROLL": unroll, "UNROLL2": unroll2}

    def constraints_on(
        self, op: OpInfo, cpu: HostCPU, knobs: KnobVariables, domains: Domains
    ) -> list[Constraint]:
        lanes = cpu.lanes(op.element_type)
        budget = cpu.features.vector_registers // 2
        v, u, u2 = knobs["VECTOR"], knobs["UNROLL"], knobs["UNROLL2"]
        parallel = _vector_loop_is_parallel(op)  # a partial tile along it is peeled
        vector_whole = z3.BoolVal(True) if parallel else op.dims["V"] % v == 0
        divides = "" if parallel else f"VECTOR divides {op.dims['V']}, "
        tail = "; VECTOR's tail is peeled" if parallel else ""
        return [
            Constraint(
                "whole_tiles",
                f"{divides}UNROLL and UNROLL2 divide {op.dims['U']} and {op.dims['U2']}: no "
                f"partial register tile (it would not vectorize){tail}",
                z3.And(vector_whole, op.dims["U"] % u == 0, op.dims["U2"] % u2 == 0),
            ),
            Constraint(
                "register_budget",
                f"UNROLL*UNROLL2*ceil(VECTOR/{lanes}) <= {budget}: the accumulators fit half "
                "the vector registers",
                u * u2 * vectors(v, lanes) <= budget,
            ),
        ]

    def cost_on(self, op: OpInfo, cpu: HostCPU, knobs: GenericKnobs) -> float:
        """Per reduction step of a register tile: its FMAs against its loads (a row of
        vectors per UNROLL row, a broadcast per UNROLL2 column); plus the tile's set-up
        and its accumulators' loads and stores, against the bytes the output moves."""
        lanes = cpu.lanes(op.element_type)
        row = ceil_div(knobs.vector, lanes)
        unroll, unroll2 = knobs.unroll, knobs.unroll2
        along_output = op.attributes["vector_loop"] in parallel_loops(op)
        tile = unroll * unroll2 * (knobs.vector if along_output else 1)
        steps = _iterations(op) // _outputs(op) // (1 if along_output else knobs.vector)
        step = max(unroll * unroll2 * row / FMA_UNITS, (unroll * row + unroll2) / LOAD_PORTS)
        nbytes = _outputs(op) * element_bytes(op.element_type) * 3
        traffic = Traffic(cpu)
        traffic.add(nbytes, nbytes)
        compute = _outputs(op) / tile * (steps * step + TILE_CYCLES + 2 * unroll * unroll2 * row)
        return seconds(max(compute, traffic.cycles()), cpu)


def _short_tail(size: int, tiles: list[int]) -> int:
    """Of whole-vector tiles none of which divides a loop of `size`, the widest whose
    peeled tail is at most TAIL_SHARE of the loop, else the one with the shortest tail. The
    partial tile runs partial vectors and joined loads: on an AMD Zen 3 (AVX2, 8 lanes),
    tiles of 8 x 8 filters against 16 x 4, rows of 30 (tails of 6 and 14) 3.4 against 5.3
    ms, of 28 2.8 against 4.0, of 58 0.97 against 1.34; of 1018 (2 and 10), 2.2 against
    1.9."""
    short = [t for t in tiles if size % t <= TAIL_SHARE * size]
    return max(short) if short else min(tiles, key=lambda t: (size % t, -t))


def _loaded_rows(op: OpInfo, unroll: int, unroll2: int) -> int:
    """The rows of vectors a register tile loads per step: its extent along the reuse
    loops that the vector loop's input reads; along the others it broadcasts. Each loaded
    row beyond the first is replicated across the broadcasts as a multi-row vector, which
    LLVM spilled where a few broadcasts instead did not: an AMD Zen 3 (AVX2), VECTOR=16, a
    3x3x3 Conv3d 8 -> 16 over 16^3 took 3.7 ms as 2 rows x 2 filters (spills in its inner
    loop), 1.4 ms as 1 row x 4 filters; a dilated Conv1d 32 -> 64 over 8 x 1018 took 2.3 ms
    as 2 images x 2 filters, 1.35 ms as 1 image x 4 filters."""
    rows = unroll if op.attributes["reuse_loads_rows"] else 1
    return rows * (unroll2 if op.attributes["reuse2_loads_rows"] else 1)


def _iterations(op: OpInfo) -> int:
    return math.prod(op.dims[f"L{i}"] for i in range(op.attributes["loops"]))


def _outputs(op: OpInfo) -> int:
    return math.prod(op.dims[f"L{i}"] for i in parallel_loops(op))


GENERIC = Generic()
