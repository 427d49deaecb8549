"""The constraint-generator interface, and the host CPU model the host generators share.

A generator turns a root op's description (kind, dims, dtypes) and a target into the
constraints on a schedule's knobs and an analytic cost model; it never looks at IR.

The host model is the one behind HostCPU's parameter selectors: an outer-product register
tile of `rows` x `columns` (one broadcast per row and one load per column vector per step,
`rows * vectors` FMAs into accumulators held in registers), fed from L1 and L2.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import z3

from mlirtune.ir.roots import OpInfo
from mlirtune.targets.host_cpu import FMA_UNITS, ITEMSIZE
from mlirtune.tune.space import Config, Constraint

Knobs = dict[str, z3.ArithRef]
Domains = dict[str, tuple[int, ...]]

# Cycles of one FMA's result latency: an accumulator takes one FMA per step, so a step
# cannot be shorter, and fewer than FMA_UNITS * FMA_LATENCY accumulators leave pipes idle.
FMA_LATENCY = 4
# Vector loads (or broadcasts) issued per cycle.
LOAD_PORTS = 2
# Loop control (increment, compare, branch) per iteration of a micro-kernel's step loop.
LOOP_CYCLES = 1.0
# Entering a register tile: loop control and address set-up, besides its accumulators.
TILE_CYCLES = 10.0
# Loading or storing one accumulator vector (a register tile's output, once per K tile).
ACCUMULATOR_CYCLES = 1.0
# Bytes per cycle a core moves from L2 to L1, and from L3 or memory to L2.
L2_BYTES_PER_CYCLE = 32.0
MEMORY_BYTES_PER_CYCLE = 8.0
# L1 data cache associativity, typical of current cores (CpuFeatures does not report it).
L1_WAYS = 8
# Cycles per broadcast whose line misses L1 and comes from L2 (measured: 16 conflicting A
# rows slow a 1024^3 f32 matmul about 2.8x).
L2_BROADCAST_CYCLES = 1.5
# Independent accumulators a register tile needs to keep the FMA pipes busy.
MIN_ACCUMULATORS = FMA_UNITS * FMA_LATENCY


class ConstraintGenerator(ABC):
    """The constraints and cost model of one schedule on one kind of target (`Target.name`)."""

    schedule: ClassVar[str]
    target: ClassVar[str]

    @abstractmethod
    def lanes(self, op: OpInfo, target: Any) -> int:
        """Elements of `op`'s element type per vector register of `target`."""

    @abstractmethod
    def constraints(
        self, op: OpInfo, target: Any, knobs: Knobs, domains: Domains
    ) -> list[Constraint]:
        """Named conditions on `knobs` (one z3 Int per knob ranging over `domains`)."""

    @abstractmethod
    def cost(self, op: OpInfo, target: Any, config: Config) -> float:
        """Estimated seconds per call of the kernel scheduled with `config`."""


class HostGenerator(ConstraintGenerator):
    """A generator for the host CPU (HostCPU): its features and vector width."""

    target = "host"

    def lanes(self, op: OpInfo, target: Any) -> int:
        return target.lanes(op.element_type)


def itemsize(dtype: str) -> int:
    return ITEMSIZE.get(dtype, 4)


def vectors(columns: z3.ArithRef, lanes: int) -> z3.ArithRef:
    """Vector registers a row of `columns` elements takes, as a z3 term."""
    return (columns + lanes - 1) / lanes


def whole_vectors(columns: str, column_dim: int, knobs: Knobs, lanes: int) -> Constraint:
    """Rows of whole vectors, or the whole loop `column_dim` (one partial vector at most)."""
    c = knobs[columns]
    return Constraint(
        f"{columns.lower()}_whole_vectors",
        f"{columns} % {lanes} == 0 or {columns} == {column_dim}: rows of whole vectors, or "
        "the whole loop (a partial vector costs masked or scalar code)",
        z3.Or(c % lanes == 0, c == column_dim),
    )


def narrow_tails(name: str, formula: str, tails: list[z3.ArithRef], lanes: int) -> Constraint:
    """Partial (peeled) register tiles `tails` wide, where nonzero, span at most one vector
    or exactly two."""
    return Constraint(
        name,
        f"{formula}, the widths of the peeled partial register tiles, are at most {lanes} or "
        f"exactly {2 * lanes}: LLVM splits other widths into odd-sized pieces (measured "
        "10-25x slower)",
        z3.And([z3.Or(t <= lanes, t == 2 * lanes) for t in tails]),
    )


def outer_product(
    rows: str, columns: str, knobs: Knobs, domains: Domains, lanes: int, registers: int
) -> list[Constraint]:
    """Register-tile constraints of a broadcast/FMA micro-kernel of `rows` x `columns`."""
    r, v = knobs[rows], vectors(knobs[columns], lanes)
    reachable = max(domains[rows], default=0) * ceil_div(max(domains[columns], default=0), lanes)
    floor = min(MIN_ACCUMULATORS, reachable)
    return [
        Constraint(
            "register_budget",
            f"{rows}*v + v + 1 <= {registers} with v = ceil({columns}/{lanes}): the "
            f"accumulators, one loaded row of v vectors and the broadcast fit the "
            f"{registers} vector registers (no spills)",
            r * v + v + 1 <= registers,
        ),
        Constraint(
            "min_accumulators",
            f"{rows}*v >= {floor}: enough independent accumulators to cover the FMA latency "
            f"({FMA_UNITS} pipes x {FMA_LATENCY} cycles), or the most the candidates reach",
            r * v >= floor,
        ),
    ]


def step_cycles(
    rows: int, columns: int, lanes: int, unroll: int, broadcast_cycles: float = 0.0
) -> float:
    """Cycles of one step of a rows x columns outer product: FMA throughput, load ports, FMA
    latency or `broadcast_cycles` per row (broadcasts missing L1), whichever binds, plus loop
    control shared by `unroll` steps."""
    v = ceil_div(columns, lanes)
    bound = max(rows * v / FMA_UNITS, (rows + v) / LOAD_PORTS, FMA_LATENCY, rows * broadcast_cycles)
    return bound + LOOP_CYCLES / unroll


def rows_conflict_in_l1(rows: int, stride: int, target: Any) -> bool:
    """Whether `rows` rows `stride` bytes apart put more lines in one L1 set than it has
    ways (L1_WAYS): then each pass over them evicts the others, e.g. 16 rows of a 4 KiB
    stride on a 32 KiB 8-way L1."""
    span = target.features.l1d_bytes // L1_WAYS
    positions = span // math.gcd(stride, span)
    return ceil_div(rows, min(rows, positions)) > L1_WAYS


def tile_extents(size: int, cache: int, register: int) -> dict[int, int]:
    """{extent: count} of the register tiles over a loop of `size`, tiled by `cache` then
    `register` (both clamped like the schedules do), the peeled partial tiles included."""
    cache = min(cache, size)
    register = min(register, cache)
    extents: dict[int, int] = {}
    for extent, repeats in ((cache, size // cache), (size % cache, 1)):
        if extent and repeats:
            for tile, count in ((register, extent // register), (extent % register, 1)):
                if tile and count:
                    extents[tile] = extents.get(tile, 0) + count * repeats
    return extents


@dataclass
class Traffic:
    """Bytes a kernel moves into L1 from L2, and into L2 from L3 or memory."""

    target: Any
    l2: float = 0.0
    memory: float = 0.0

    def add(self, nbytes: float, working_set: float) -> None:
        """`nbytes` read from wherever a working set of `working_set` bytes stays: nothing
        extra within half of L1, L2 traffic within half of L2, else memory traffic too."""
        features = self.target.features
        if working_set <= features.l1d_bytes // 2:
            return
        self.l2 += nbytes
        if working_set > features.l2_bytes // 2:
            self.memory += nbytes

    def cycles(self) -> float:
        """Cycles the busier of the two links needs."""
        return max(self.l2 / L2_BYTES_PER_CYCLE, self.memory / MEMORY_BYTES_PER_CYCLE)


def seconds(cycles: float, target: Any) -> float:
    """Seconds of `cycles` at the target's clock."""
    return cycles / (target.features.ghz * 1e9)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)
