"""Micro-kernels that only multiply and add: the host's FMA throughput, and its bf16 and
int8 dot products', measured.

`chains` independent accumulators of one vector register each (CHAINS where the register
file holds them beside b and c) are updated by `acc = acc * b + c` for `STEPS` steps:
enough independent chains to cover the FMA latency of every pipe, and no memory traffic
inside the loop. With b = 0.5 and c = 1 every chain converges to exactly 2, so the result
verifies like any workload, and it is stored, so the loop cannot be optimised away.
"""

from __future__ import annotations

import numpy as np
from mlir import ir
from mlir.dialects import arith, bufferization, memref, scf, vector

from mlirtune.interfaces.dtype import dtype_named, element_bytes
from mlirtune.interfaces.workload import ArgSpec, Complexity, Param
from mlirtune.ir.maps import projection_map
from mlirtune.schedules.contraction.steps.pair_products import PAIR_LANES
from mlirtune.workloads.base import PayloadWorkload
from mlirtune.workloads.payload import build_payload, store_rows, zero_vector

# Independent accumulators: two FMA pipes with a 4-cycle latency need 8; 16 leaves room
# for cores with more pipes or a longer latency, and fits any 32-register file. AVX2's 16
# registers take 14 beside b and c: with 16, the chains spilled to the stack and an AMD
# Zen 3 measured 54 GFLOP/s, under the 68-78 its matmuls ran at (127% "of peak").
CHAINS = 16
STEPS = 4096
B_VALUE, C_VALUE, LIMIT = 0.5, 1.0, 2.0  # acc -> acc * 0.5 + 1 converges to 2, exactly
# One vdpbf16ps: 16 f32 lanes, each summing the products of a pair of bf16 values.
DOT_LANES, DOT_PAIRS = 16, 32
# AMX: 16 x 16 tiles of C; six accumulator tiles beside A's and B's fill the 8 registers.
AMX_TILE, AMX_CHAINS = 16, 6


class FmaPeak(PayloadWorkload):
    """chains x lanes FMAs per step for STEPS steps, on one vector width."""

    name = "fma_peak"
    description = "independent vector FMA chains in registers: the core's FMA throughput"
    parameters = (
        Param("lanes", int, 16, "f32 elements per vector register"),
        Param("chains", int, CHAINS, "independent accumulators, one vector register each"),
    )

    def arguments(self) -> list[ArgSpec]:
        f32, lanes = dtype_named("f32"), self.options["lanes"]
        return [
            ArgSpec("b", (lanes,), f32),
            ArgSpec("c", (lanes,), f32),
            ArgSpec("out", (self.options["chains"], lanes), f32, is_output=True),
        ]

    def make_inputs(self) -> list[np.ndarray]:
        lanes = self.options["lanes"]
        return [np.full(lanes, B_VALUE, np.float32), np.full(lanes, C_VALUE, np.float32)]

    def payload_module(self) -> ir.Module:
        lanes = self.options["lanes"]

        def body(inputs: list[ir.Value], inits: list[ir.Value]) -> list[ir.Value]:
            f32, index = ir.F32Type.get(), ir.IndexType.get()
            row = ir.VectorType.get([lanes], f32)
            pad = arith.constant(f32, 0.0)
            zero_index = arith.constant(index, 0)
            identity = ir.AffineMapAttr.get(ir.AffineMap.get_identity(1))
            b, c = (
                vector.transfer_read(row, source, [zero_index], identity, pad, [True])
                for source in inputs
            )
            start = zero_vector(row)
            loop = scf.ForOp(
                zero_index,
                arith.constant(index, STEPS),
                arith.constant(index, 1),
                [start] * self.options["chains"],
            )
            with ir.InsertionPoint(loop.body):
                scf.YieldOp([vector.fma(acc, b, c) for acc in loop.inner_iter_args])
            return [store_rows(loop.results, inits[0])]

        return build_payload(self.arguments(), body)

    def reference(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        return [np.full((self.options["chains"], self.options["lanes"]), LIMIT, np.float32)]

    def get_complexity(self) -> Complexity:
        lanes, chains = self.options["lanes"], self.options["chains"]
        return Complexity(flops=2 * STEPS * chains * lanes, bytes_read=8 * lanes, bytes_written=0)


class Bf16DotPeak(FmaPeak):
    """The AVX512-BF16 form: CHAINS accumulators of 16 f32 lanes, each updated by one
    `vdpbf16ps` per step (`x86vector.avx512.dot`: two bf16 products per lane, 64 FLOP).

    Its rate is not the FMA's: measured on one Intel Xeon, 88 GFLOP/s against 175 for
    the f32 FMA; a Zen 4 core does twice its FMA's FLOPs. With a = b = 1 each step adds 2
    to every lane, so each lane ends at exactly 2 * STEPS."""

    name = "bf16_dot_peak"
    description = "independent AVX512-BF16 dot-product chains in registers (needs avx512_bf16)"
    parameters = ()

    def arguments(self) -> list[ArgSpec]:
        bf16, f32 = dtype_named("bf16"), dtype_named("f32")
        return [
            ArgSpec("a", (DOT_PAIRS,), bf16),
            ArgSpec("b", (DOT_PAIRS,), bf16),
            ArgSpec("out", (CHAINS, DOT_LANES), f32, is_output=True),
        ]

    def make_inputs(self) -> list[np.ndarray]:
        return [np.ones(DOT_PAIRS, dtype_named("bf16").numpy)] * 2

    def payload_module(self) -> ir.Module:
        def body(inputs: list[ir.Value], inits: list[ir.Value]) -> list[ir.Value]:
            index = ir.IndexType.get()
            pairs = ir.VectorType.get([DOT_PAIRS], ir.BF16Type.get())
            lanes = ir.VectorType.get([DOT_LANES], ir.F32Type.get())
            pad = arith.constant(ir.BF16Type.get(), 0.0)
            zero_index = arith.constant(index, 0)
            identity = ir.AffineMapAttr.get(ir.AffineMap.get_identity(1))
            a, b = (
                vector.transfer_read(pairs, source, [zero_index], identity, pad, [True])
                for source in inputs
            )
            loop = scf.ForOp(
                zero_index,
                arith.constant(index, STEPS),
                arith.constant(index, 1),
                [zero_vector(lanes)] * CHAINS,
            )
            with ir.InsertionPoint(loop.body):
                sums = [
                    ir.Operation.create(
                        "x86vector.avx512.dot", results=[lanes], operands=[acc, a, b]
                    ).result
                    for acc in loop.inner_iter_args
                ]
                scf.YieldOp(sums)
            return [store_rows(loop.results, inits[0])]

        return build_payload(self.arguments(), body)

    def reference(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        return [np.full((CHAINS, DOT_LANES), 2.0 * STEPS, np.float32)]

    def get_complexity(self) -> Complexity:
        return Complexity(
            flops=4 * STEPS * CHAINS * DOT_LANES, bytes_read=4 * DOT_PAIRS, bytes_written=0
        )


class Int8DotPeak(FmaPeak):
    """The int8 dot path's instruction pair (contraction/dot.py): `chains` accumulators of
    8 int32 lanes (one 256-bit register, the width int8 kernels use on every host), each
    updated per step by one `vpmaddwd` and one `vpaddd`: 16 multiply-adds, 32 operations.

    Each step is the dot path's int16 pair contraction, which the descriptor step
    `pair-products` (ir/pair_products.py) turns into those two instructions, as in the
    kernels: C[n] = c[n] + a[0] * B[n, 0] + a[1] * B[n, 1], with B the accumulator's lanes
    viewed as 8 pairs of int16 values, so that no step can be hoisted out of the loop.
    With a = (1, 0) the product is each lane's low half, sign-extended, and with c = 1
    each step adds 1: every lane ends at exactly STEPS (within int16's range)."""

    name = "int8_dot_peak"
    description = "independent vpmaddwd + vpaddd chains in registers (needs AVX2)"
    parameters = (
        Param("chains", int, CHAINS, "independent accumulators, one vector register each"),
    )

    def arguments(self) -> list[ArgSpec]:
        i16, i32 = dtype_named("i16"), dtype_named("i32")
        return [
            ArgSpec("a", (2,), i16),
            ArgSpec("c", (PAIR_LANES,), i32),
            ArgSpec("out", (self.options["chains"], PAIR_LANES), i32, is_output=True),
        ]

    def make_inputs(self) -> list[np.ndarray]:
        return [np.array([1, 0], np.int16), np.ones(PAIR_LANES, np.int32)]

    def payload_module(self) -> ir.Module:
        def body(inputs: list[ir.Value], inits: list[ir.Value]) -> list[ir.Value]:
            index = ir.IndexType.get()
            i16, i32 = ir.IntegerType.get_signless(16), ir.IntegerType.get_signless(32)
            pair = ir.VectorType.get([2], i16)
            lanes = ir.VectorType.get([PAIR_LANES], i32)
            zero_index = arith.constant(index, 0)
            identity = ir.AffineMapAttr.get(ir.AffineMap.get_identity(1))
            a_pad, c_pad = arith.constant(i16, 0), arith.constant(i32, 0)
            a = vector.transfer_read(pair, inputs[0], [zero_index], identity, a_pad, [True])
            c = vector.transfer_read(lanes, inputs[1], [zero_index], identity, c_pad, [True])
            # Loops (n, p): a -> (p), B -> (n, p), C -> (n); the form pair-products takes.
            maps = ir.ArrayAttr.get(
                [ir.AffineMapAttr.get(projection_map(2, dims)) for dims in ([1], [0, 1], [0])]
            )
            iterators = ir.ArrayAttr.get(
                [
                    ir.Attribute.parse(f"#vector.iterator_type<{kind}>")
                    for kind in ("parallel", "reduction")
                ]
            )
            loop = scf.ForOp(
                zero_index,
                arith.constant(index, STEPS),
                arith.constant(index, 1),
                [zero_vector(lanes)] * self.options["chains"],
            )
            with ir.InsertionPoint(loop.body):
                sums = []
                for acc in loop.inner_iter_args:
                    halves = vector.bitcast(ir.VectorType.get([2 * PAIR_LANES], i16), acc)
                    b = vector.shape_cast(ir.VectorType.get([PAIR_LANES, 2], i16), halves)
                    sums.append(vector.contract(lanes, a, b, c, maps, iterators))
                scf.YieldOp(sums)
            return [store_rows(loop.results, inits[0])]

        return build_payload(self.arguments(), body)

    def reference(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        return [np.full((self.options["chains"], PAIR_LANES), STEPS, np.int32)]

    def get_complexity(self) -> Complexity:
        operations = 4 * PAIR_LANES  # 2 x 8 products and their sums into the accumulators
        return Complexity(
            flops=operations * STEPS * self.options["chains"],
            bytes_read=2 * 2 + 4 * PAIR_LANES,
            bytes_written=0,
        )


class AmxPeak(FmaPeak):
    """The AMX form: AMX_CHAINS tiles of C, 16 x 16 each, each updated by one tile product
    per step (`tdpbf16ps` of 16 x 32 bf16 tiles, or `tdpbssd` of 16 x 64 int8 ones) from
    the same A and B tiles, loaded once. The 8 tile registers hold the six accumulators
    beside A and B. With A = B = 1 each step adds K (32 or 64) to every element, so each ends
    at exactly K * STEPS."""

    name = "amx_peak"
    description = "independent AMX tile-product chains in tile registers (needs AMX)"
    parameters = (Param("dtype", str, "bf16", "operand type: bf16 (f32 sums) or i8 (int32)"),)

    def _types(self) -> tuple[str, str, int]:
        """Operand type, accumulator type and K elements per tile product."""
        if self.options["dtype"] == "i8":
            return "i8", "i32", 64
        return "bf16", "f32", 32

    def arguments(self) -> list[ArgSpec]:
        operand_name, sums_name, k = self._types()
        operand, sums = dtype_named(operand_name), dtype_named(sums_name)
        return [
            ArgSpec("a", (AMX_TILE, k), operand),
            ArgSpec("b", (AMX_TILE, k), operand),
            ArgSpec("out", (AMX_CHAINS * AMX_TILE, AMX_TILE), sums, is_output=True),
        ]

    def make_inputs(self) -> list[np.ndarray]:
        k, numpy = self._types()[2], dtype_named(self._types()[0]).numpy
        return [np.ones((AMX_TILE, k), numpy)] * 2

    def payload_module(self) -> ir.Module:
        operand_name, sums_name, k = self._types()
        product = "amx.tile_muli" if operand_name == "i8" else "amx.tile_mulf"

        def body(inputs: list[ir.Value], inits: list[ir.Value]) -> list[ir.Value]:
            index = ir.IndexType.get()
            operand, sums = (dtype_named(name).mlir() for name in (operand_name, sums_name))
            operand_tile = ir.Type.parse(f"!amx.tile<{AMX_TILE}x{k}x{operand}>")
            sums_tile = ir.Type.parse(f"!amx.tile<{AMX_TILE}x{AMX_TILE}x{sums}>")
            zero = arith.constant(index, 0)
            a, b = (
                ir.Operation.create(
                    "amx.tile_load",
                    results=[operand_tile],
                    operands=[view.owner.operands[0], zero, zero],  # the argument's memref
                    attributes={"operandSegmentSizes": _segments(1, 2, 0)},  # no stride
                ).result
                for view in inputs
            )
            start = ir.Operation.create("amx.tile_zero", results=[sums_tile]).result
            loop = scf.ForOp(
                zero, arith.constant(index, STEPS), arith.constant(index, 1), [start] * AMX_CHAINS
            )
            with ir.InsertionPoint(loop.body):
                scf.YieldOp(
                    [
                        ir.Operation.create(
                            product, results=[sums_tile], operands=[a, b, acc]
                        ).result
                        for acc in loop.inner_iter_args
                    ]
                )
            out_type = ir.MemRefType.get([AMX_CHAINS * AMX_TILE, AMX_TILE], sums)
            out = memref.alloc(out_type, [], [])
            for chain, tile in enumerate(loop.results):
                row = arith.constant(index, chain * AMX_TILE)
                ir.Operation.create(
                    "amx.tile_store",
                    operands=[out, row, zero, tile],
                    attributes={"operandSegmentSizes": _segments(1, 2, 1, 0)},
                )
            tensor = ir.RankedTensorType.get([AMX_CHAINS * AMX_TILE, AMX_TILE], sums)
            return [bufferization.to_tensor(tensor, out, restrict=True)]

        return build_payload(self.arguments(), body)

    def reference(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        _, sums, k = self._types()
        shape = (AMX_CHAINS * AMX_TILE, AMX_TILE)
        return [np.full(shape, k * STEPS, dtype_named(sums).numpy)]

    def get_complexity(self) -> Complexity:
        operand, _, k = self._types()
        flops = 2 * AMX_TILE * AMX_TILE * k * STEPS * AMX_CHAINS
        tiles_read = 2 * AMX_TILE * k * element_bytes(operand)  # A and B, loaded once
        return Complexity(flops=flops, bytes_read=tiles_read, bytes_written=0)


def _segments(*sizes: int) -> ir.DenseI32ArrayAttr:
    """An op's operandSegmentSizes: how many operands each of its operand groups has."""
    return ir.DenseI32ArrayAttr.get(list(sizes))
