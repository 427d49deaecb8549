"""The `packed_contraction` family: matmul operands repacked into register-tile blocks
before the micro-kernel.

`transform.structured.pack` packs the matmul's M, N and K loops by MR, NR and KB, and
`pack_transpose` reorders the blocks: A becomes [M/MR, K/KB, KB, MR] (an MR column per K
step), B [N/NR, K/KB, KB, NR] (each KB x NR panel contiguous, a column of panels after each
other) and C [M/MR, N/NR, MR, NR]. The pack and unpack ops are lowered to reshapes and
transposes, which are tiled per block and vectorized; the packed
contraction is tiled to one MR x NR block and a K step of one, and vectorized like the plain
contraction's micro-kernel. Only shapes that the pack sizes divide are supported (there is
no padding): other sizes fall back to the largest divisor of the loop below them.
"""

from __future__ import annotations

import math

from mlir import ir
from mlir.dialects import transform
from mlir.dialects.transform import structured

from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.schedule import Config, Constraint, Domains, Knob, KnobVariables
from mlirtune.schedules.builder import ScheduleBuilder
from mlirtune.schedules.contraction.host import contraction_sizes
from mlirtune.schedules.cpu_model import (
    ACCUMULATOR_CYCLES,
    TILE_CYCLES,
    HostFamily,
    Traffic,
    ceil_div,
    outer_product,
    seconds,
    step_cycles,
    whole_vectors,
)
from mlirtune.schedules.knobs import cache_tiles, register_rows, vector_columns
from mlirtune.targets.host_cpu import HostCPU


class PackedContraction(HostFamily):
    """An MR x NR register tile over operands packed in MR-, NR- and KB-sized blocks. No
    selector chooses its knobs: a pipeline runs it with the defaults unless told otherwise."""

    name = "packed_contraction"
    description = "operands packed into register-tile blocks, broadcast/FMA micro-kernel"
    root_kinds = ("matmul",)
    knobs = (
        Knob(
            "MR",
            "rows of the register tile and of A's pack blocks",
            8,
            register_rows("M"),
            selected=False,
        ),
        Knob(
            "NR",
            "columns of the register tile and of B's pack blocks",
            32,
            vector_columns("N", (1, 2, 4)),
            selected=False,
        ),
        Knob(
            "KB",
            "depth of the pack blocks (K loop step)",
            64,
            cache_tiles("K", floor=8),
            selected=False,
        ),
    )

    def build(self, op: OpInfo, parameters: Config) -> ir.Module:
        return packed_contraction_schedule(op, parameters)

    def select_on(self, op: OpInfo, cpu: HostCPU) -> Config:
        return {}

    def constraints_on(
        self, op: OpInfo, cpu: HostCPU, knobs: KnobVariables, domains: Domains
    ) -> list[Constraint]:
        f = cpu.features
        _, m, n, k, size_in, _ = contraction_sizes(op)
        lanes = cpu.lanes(op.element_type)
        mr, nr, kb = knobs["MR"], knobs["NR"], knobs["KB"]
        half_l1 = f.l1d_bytes // 2
        return [
            whole_vectors("NR", n, knobs, lanes),
            *outer_product("MR", "NR", knobs, domains, lanes, f.vector_registers),
            Constraint(
                "mr_divides_m",
                f"{m} % MR == 0: the schedule packs without padding (another MR falls back "
                "to a smaller divisor)",
                m % mr == 0,
            ),
            Constraint("nr_divides_n", f"{n} % NR == 0: packed without padding", n % nr == 0),
            Constraint("kb_divides_k", f"{k} % KB == 0: packed without padding", k % kb == 0),
            Constraint(
                "block_panels_in_l1",
                f"(MR+NR)*KB*{size_in} <= {half_l1}: one KB-deep block of both packed panels "
                "stays in half of L1",
                (mr + nr) * kb * size_in <= half_l1,
            ),
        ]

    def cost_on(self, op: OpInfo, cpu: HostCPU, config: Config) -> float:
        """Packing and unpacking copies, then the micro-kernel over whole MR x NR blocks
        (the shapes divide), its accumulators loaded and stored once per KB block, A's
        panel re-read for every NR block and B's for every MR block, from wherever they
        stay; loop and set-up cycles per block and per pack tile."""
        _, m, n, k, size_in, size_out = contraction_sizes(op)
        lanes = cpu.lanes(op.element_type)
        mr, nr, kb = min(config["MR"], m), min(config["NR"], n), min(config["KB"], k)
        blocks = ceil_div(m, mr) * ceil_div(n, nr)
        k_blocks = ceil_div(k, kb)
        compute = blocks * k * step_cycles(mr, nr, lanes, 1)
        accumulators = mr * ceil_div(nr, lanes)
        pack_tiles = (ceil_div(m, mr) + ceil_div(n, nr)) * k_blocks * ceil_div(kb, 8)
        overhead = (
            blocks * k_blocks * (TILE_CYCLES + 2 * ACCUMULATOR_CYCLES * accumulators)
            + pack_tiles * TILE_CYCLES
        )
        a_bytes, b_bytes, c_bytes = m * k * size_in, k * n * size_in, m * n * size_out
        traffic = Traffic(cpu)
        traffic.add(2 * (a_bytes + b_bytes), a_bytes + b_bytes)
        traffic.add(2 * c_bytes, c_bytes)
        traffic.add(a_bytes * ceil_div(n, nr), mr * k * size_in)
        traffic.add(b_bytes * ceil_div(m, mr), b_bytes)
        cycles = max(compute, traffic.cycles()) + overhead
        return seconds(cycles, cpu)


PACKED_CONTRACTION = PackedContraction()


def _divisor(size: int, target: int) -> int:
    """The largest divisor of `size` that is at most `target`."""
    return next(d for d in range(min(size, target), 0, -1) if size % d == 0)


def packed_contraction_schedule(op: OpInfo, parameters: dict[str, int]) -> ir.Module:
    """Schedule for an annotated matmul root `op` with packed operands."""
    m, n, k = op.dims["M"], op.dims["N"], op.dims["K"]
    p = parameters
    # Pack sizes that do not divide their loop are lowered to the largest divisor (there is
    # no padding): a prime size packs by 1, slow but correct.
    mr, nr, kb = (_divisor(size, p[name]) for size, name in ((m, "MR"), (n, "NR"), (k, "KB")))
    any_op = transform.AnyOpType.get()

    def typed(name: str) -> ir.Type:
        return transform.OperationType.get(name)

    with ScheduleBuilder("packed_contraction") as s:
        contraction = s.match_root(s.root, op.kind, step="match_contraction")
        with s.at("pack"):
            packed = structured.PackOp(
                any_op, contraction, [], static_packed_sizes=[mr, nr, kb]
            ).result
        # A: [M/MR, K/KB, MR, KB] -> [M/MR, K/KB, KB, MR]: an MR column per K step.
        a_pack = s.producer(packed, 0, step="match_pack_a")
        with s.at("pack_transpose_a"):
            packed = structured.PackTransposeOp(
                any_op, any_op, any_op, a_pack, packed, inner_perm=[1, 0]
            ).packed_op
        # B: [K/KB, N/NR, NR, KB] -> [N/NR, K/KB, KB, NR]: a contiguous KB x NR panel per
        # block, rows of NR elements, and a column of blocks after each other.
        b_pack = s.producer(packed, 1, step="match_pack_b")
        with s.at("pack_transpose_b"):
            packed = structured.PackTransposeOp(
                any_op, any_op, any_op, b_pack, packed, outer_perm=[1, 0], inner_perm=[1, 0]
            ).packed_op
        # Folds the fill of C into its pack (a fill of the packed tensor).
        function = s.match(s.root, ["func.func"], step="match_function")
        s.canonicalize(function, step="fold_fill_into_pack")
        # Loops (m block, n block, k block, k step) around one MR x NR outer product.
        s.tile(packed, [1, 1, 1, 0, 0, 1], step="block_tile")
        fills = s.match(s.root, ["linalg.fill"], step="match_fill")
        s.tile(fills, [1, 1, 0, 0], step="tile_fill")
        with s.at("lower_pack"):
            packs = transform.CastOp(typed("linalg.pack"), s.match(s.root, ["linalg.pack"]))
            lowered = structured.LowerPackOp(
                typed("tensor.pad"),
                typed("tensor.expand_shape"),
                typed("linalg.transpose"),
                packs,
                lowerPadLikeWithInsertSlice=True,
            )
        s.tile(lowered.transpose_op, [1, 1, math.gcd(kb, 8), 0], step="tile_pack_transposes")
        with s.at("lower_unpack"):
            unpacks = transform.CastOp(typed("linalg.unpack"), s.match(s.root, ["linalg.unpack"]))
            unlowered = structured.LowerUnPackOp(
                typed("tensor.empty"),
                typed("linalg.transpose"),
                typed("tensor.collapse_shape"),
                typed("tensor.extract_slice"),
                unpacks,
                lowerUnpadLikeWithExtractSlice=True,
            )
        s.tile(unlowered.transpose_op, [1, 0, 1, 0], step="tile_unpack_transpose")
        copies = s.match(s.root, ["linalg.copy"], step="match_unpack_copy")
        s.tile(copies, [mr, nr], step="tile_unpack_copy")
        epilogue = s.match_generic(s.root, ["parallel", "parallel"], step="match_elementwise")
        s.tile(epilogue, [mr, nr], step="tile_elementwise")
        function = s.match(s.root, ["func.func"], step="match_function_again")
        s.apply_patterns(
            function,
            "fold_unit_dims",
            structured.apply_patterns_linalg_fold_unit_extent_dims_via_slices,
        )
        function = s.vectorize_function(function)
        s.drop_leading_unit_dims(function)
        s.hoist_invariant_subsets(function)
        # Packed kernels broadcast and transpose A's column: canonicalizing while lowering
        # broadcasts crashes the pattern driver; the host pipeline canonicalizes later.
        s.lower_vectors(function, canonicalize=False)
    return s.module
