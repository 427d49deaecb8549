"""The host CPU performance model every host schedule family shares.

A micro-kernel is an outer-product register tile of `rows` x `columns`: per step, one
broadcast per row and one load per column vector feed `rows * vectors` FMAs into
accumulators held in registers, with its operands fed from L1 and L2. The selectors size
such tiles from the register file and the caches (`register_tile`, `fit`); the constraints
keep a config within them (`outer_product`, `whole_vectors`, `narrow_tails`); the cost
models time it (`step_cycles`, `Traffic`). Only HostCPU's facts are read: nothing is measured.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from dataclasses import dataclass

import z3

from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.schedule import Config, Constraint, Domains, KnobVariables
from mlirtune.interfaces.target import Target
from mlirtune.schedules.family import LibraryFamily, ValuesT
from mlirtune.targets.host_cpu import FMA_UNITS, HostCPU

# --- selector ------------------------------------------------------------------------------

# Accumulator registers a register tile aims for: two FMA pipes with a 4-cycle latency need
# 8 independent chains; 16 also hides the loads between them.
ACCUMULATORS = 16
# Largest output block (bytes) for a contraction cache tile smaller than the whole output:
# LLVM's compile time grows with the block (a 64x64 f32 block compiles in ~0.1 s, 128x128
# in ~0.5 s), for no gain once the block no longer fits in L1.
OUTPUT_BLOCK_BYTES = 32 << 10
# The base page: rows a page or more apart each take a TLB entry and alias in L1.
PAGE_BYTES = 4096
# At most this many rows make a skinny product (matrix-vector like): it is memory-bound,
# and its best register tile walks a few rows of B at once along the whole of N.
SKINNY_ROWS = 8
# A divisor of the loop within [LOW, 1.25] x the modelled tile size is preferred to it.
LOW = 0.75

# --- cost model ----------------------------------------------------------------------------

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
# Cycles per broadcast whose line misses L1 and comes from L2 (measured: 16 conflicting A
# rows slow a 1024^3 f32 matmul about 2.8x).
L2_BROADCAST_CYCLES = 1.5


class HostFamily(LibraryFamily[ValuesT]):
    """A family with a selector, constraints and a cost model for the host CPU (HostCPU);
    subclasses implement them on the concrete HostCPU facts."""

    target_kinds = ("host",)

    def cpu(self, target: Target, stage: str) -> HostCPU:
        return self.require(target, HostCPU, stage)

    def lanes(self, op: OpInfo, target: Target) -> int:
        return self.cpu(target, "space").lanes(op.element_type)

    def choose(self, op: OpInfo, target: Target, fixed: Config) -> Config:
        return self.select_around(op, self.cpu(target, "select"), fixed)

    def select_around(self, op: OpInfo, cpu: HostCPU, fixed: Config) -> Config:
        """`select_on`, for families whose selector has one path; others take `fixed`'s."""
        return self.select_on(op, cpu)

    def constraints(
        self, op: OpInfo, target: Target, knobs: KnobVariables, domains: Domains
    ) -> list[Constraint]:
        return self.constraints_on(op, self.cpu(target, "space"), knobs, domains)

    def cost(self, op: OpInfo, target: Target, config: Config) -> float:
        return self.cost_on(op, self.cpu(target, "space"), self.knob_values(op, config))

    @abstractmethod
    def select_on(self, op: OpInfo, cpu: HostCPU) -> Config:
        """The selected knobs' values for `op` on `cpu`, from the register/cache model."""

    @abstractmethod
    def constraints_on(
        self, op: OpInfo, cpu: HostCPU, knobs: KnobVariables, domains: Domains
    ) -> list[Constraint]:
        """The constraints on `knobs` for `op` on `cpu`."""

    @abstractmethod
    def cost_on(self, op: OpInfo, cpu: HostCPU, knobs: ValuesT) -> float:
        """Estimated seconds per call of `op` scheduled with `knobs` on `cpu`."""


# --- selector helpers ----------------------------------------------------------------------


def fit(dim: int, target: int, *, step: int = 1, high: float = 1.25, pow2: bool = False) -> int:
    """A tile size for a loop of `dim` iterations close to `target`, a multiple of `step`.

    A tile that divides the loop leaves no partial tile, which schedules peel into extra
    code (longer compiles, a slower remainder), so the divisor of `dim` closest to `target`
    wins if one lies within [target*LOW, target*high]. Otherwise `target` is rounded down
    to a multiple of `step` (and to a power of two with `pow2`). Never more than `dim`.
    """
    target = max(step, target)
    if dim <= target * high:
        return dim
    divisors = [
        d for d in range(step, int(target * high) + 1, step) if dim % d == 0 and d >= target * LOW
    ]
    if divisors:
        return min(divisors, key=lambda d: abs(math.log(d / target)))
    if pow2:
        return step * (1 << ((target // step).bit_length() - 1))
    return target // step * step


def register_columns(columns: int, lanes: int) -> int:
    """Columns of a register tile: two full vectors, or one where two would leave a
    remainder wider than one vector. Schedules peel the remainder into its own tile; one of
    at most one vector is a single partial register, while a wider odd one (e.g. 20 f32
    lanes) is split by LLVM into slow odd-sized pieces. A row narrower than a vector is
    taken whole."""
    if columns <= lanes:
        return columns
    return 2 * lanes if columns % (2 * lanes) <= lanes else lanes


def register_tile(cpu: HostCPU, rows: int, columns: int, dtype: str) -> tuple[int, int]:
    """An outer-product register tile (rows x columns) for broadcast + FMA: columns span
    one or two vector registers; rows fill the register file with accumulators, leaving
    one register per column vector for the loaded operand and one for the broadcast."""
    lanes = cpu.lanes(dtype)
    cols = register_columns(columns, lanes)
    vectors = -(-cols // lanes)
    budget = max(1, (cpu.features.vector_registers - vectors - 1) // vectors)
    rows_tile = fit(rows, min(budget, ACCUMULATORS // vectors), high=1.0)
    return rows_tile, cols


def accumulator_floor(cpu: HostCPU, reachable: int) -> int:
    """The fewest accumulators a register tile on `cpu` takes: one per FMA the core keeps
    in flight (BLIS's analytical rule), or `reachable`, the most its candidates reach."""
    return min(cpu.features.fma_in_flight, reachable)


# --- constraints -----------------------------------------------------------------------------


def vectors(columns: z3.ArithRef, lanes: int) -> z3.ArithRef:
    """Vector registers a row of `columns` elements takes, as a z3 term."""
    return (columns + lanes - 1) / lanes


def whole_vectors(columns: str, column_dim: int, knobs: KnobVariables, lanes: int) -> Constraint:
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
    rows: str, columns: str, knobs: KnobVariables, domains: Domains, lanes: int, cpu: HostCPU
) -> list[Constraint]:
    """Register-tile constraints of a broadcast/FMA micro-kernel of `rows` x `columns`."""
    r, v = knobs[rows], vectors(knobs[columns], lanes)
    registers = cpu.features.vector_registers
    reachable = max(domains[rows], default=0) * ceil_div(max(domains[columns], default=0), lanes)
    floor = accumulator_floor(cpu, reachable)
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
            f"{rows}*v >= {floor}: enough independent accumulators to cover the FMAs the "
            f"core keeps in flight ({cpu.features.fma_in_flight}), or the most the "
            "candidates reach",
            r * v >= floor,
        ),
    ]


# --- cost model ------------------------------------------------------------------------------


def step_cycles(
    rows: int, columns: int, cpu: HostCPU, dtype: str, unroll: int, broadcast_cycles: float = 0.0
) -> float:
    """Cycles of one step of a rows x columns outer product of `dtype` on `cpu`: FMA
    throughput, load ports, FMA latency (an accumulator takes one FMA per step) or
    `broadcast_cycles` per row (broadcasts missing L1), whichever binds, plus loop control
    shared by `unroll` steps."""
    v = ceil_div(columns, cpu.lanes(dtype))
    latency = fma_latency(cpu)
    bound = max(rows * v / FMA_UNITS, (rows + v) / LOAD_PORTS, latency, rows * broadcast_cycles)
    return bound + LOOP_CYCLES / unroll


def fma_latency(cpu: HostCPU) -> float:
    """Cycles of one FMA's result latency: the FMAs in flight over the pipes."""
    return cpu.features.fma_in_flight / FMA_UNITS


def rows_conflict_in_l1(rows: int, stride: int, cpu: HostCPU) -> bool:
    """Whether `rows` rows `stride` bytes apart put more lines in one L1 set than it has
    ways (CpuFeatures.l1d_ways, read from sysfs): then each pass over them evicts the
    others, e.g. 16 rows of a 4 KiB stride on a 32 KiB 8-way L1."""
    ways = cpu.features.l1d_ways
    span = cpu.features.l1d_bytes // ways
    positions = span // math.gcd(stride, span)
    return ceil_div(rows, min(rows, positions)) > ways


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

    cpu: HostCPU
    l2: float = 0.0
    memory: float = 0.0

    def add(self, nbytes: float, working_set: float) -> None:
        """`nbytes` read from wherever a working set of `working_set` bytes stays: nothing
        extra within half of L1, L2 traffic within half of L2, else memory traffic too."""
        features = self.cpu.features
        if working_set <= features.l1d_bytes // 2:
            return
        self.l2 += nbytes
        if working_set > features.l2_bytes // 2:
            self.memory += nbytes

    def cycles(self) -> float:
        """Cycles the busier of the two links needs."""
        return max(self.l2 / L2_BYTES_PER_CYCLE, self.memory / MEMORY_BYTES_PER_CYCLE)


def seconds(cycles: float, cpu: HostCPU) -> float:
    """Seconds of `cycles` at the CPU's clock."""
    return cycles / (cpu.features.ghz * 1e9)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)
