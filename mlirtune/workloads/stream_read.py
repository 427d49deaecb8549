"""A micro-kernel that only reads memory: the host's streaming read bandwidth, measured.

An f32 array of `kib` KiB, viewed as rows of `CHAINS` vectors, is summed into `CHAINS`
independent vector accumulators, one row per step: every load is independent of the last
add, so the loop is bound by how fast memory delivers the array, not by the add latency.
The partial sums are stored, so the loop cannot be optimised away. The inputs are drawn
from {0, 0.5, 1}, so every partial sum is a multiple of 0.5 below 2^23 and exact in f32:
the result verifies like any workload. Sized past the last-level cache (see
`mlirtune.peak.stream_read_kib`), it measures DRAM bandwidth.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from mlir import ir
from mlir.dialects import arith, scf, vector

from mlirtune.interfaces.dtype import dtype_named
from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.workload import ArgSpec, Complexity, Param
from mlirtune.workloads.base import SEED_PARAM, PayloadWorkload
from mlirtune.workloads.payload import build_payload, store_rows, zero_vector

# Independent accumulators: enough loads in flight to cover the add latency of two pipes
# several times over; with the loads folded into the adds they fit any 16-register file.
CHAINS = 16
VALUES = (0.0, 0.5, 1.0)  # multiples of 0.5 no larger than 1: sums stay exact in f32
EXACT_ROWS = 1 << 23  # rows per accumulator below which every partial sum is exact


class StreamRead(PayloadWorkload):
    """The sum of a `kib` KiB f32 array into CHAINS x lanes partial sums."""

    name = "stream_read"
    description = "a large f32 array summed into independent vector accumulators: read bandwidth"
    parameters = (
        Param("kib", int, 256 << 10, "array size in KiB (default 256 MiB, past any L3)"),
        Param("lanes", int, 16, "f32 elements per vector register"),
        SEED_PARAM,
    )

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        row_bytes = 4 * CHAINS * self.options["lanes"]
        if self.options["kib"] * 1024 % row_bytes:
            raise UsageError(
                f"{self.name}: kib={self.options['kib']} is not a whole number of "
                f"{row_bytes}-byte rows ({CHAINS} vectors of {self.options['lanes']} f32)"
            )
        if self.rows > EXACT_ROWS:
            raise UsageError(
                f"{self.name}: at most {EXACT_ROWS * row_bytes >> 10} KiB keeps the sums exact"
            )

    @property
    def rows(self) -> int:
        """Steps of the loop: one row of CHAINS vectors each."""
        return self.options["kib"] * 1024 // (4 * CHAINS * self.options["lanes"])

    def arguments(self) -> list[ArgSpec]:
        f32, lanes = dtype_named("f32"), self.options["lanes"]
        return [
            ArgSpec("data", (self.rows, CHAINS * lanes), f32),
            ArgSpec("out", (CHAINS, lanes), f32, is_output=True),
        ]

    def make_inputs(self) -> list[np.ndarray]:
        """Seeded values from VALUES, drawn as bytes so a large array needs no float64
        temporary."""
        rng = np.random.default_rng(self.seed)
        shape = self.arguments()[0].shape
        data = rng.integers(0, len(VALUES), size=shape, dtype=np.uint8).astype(np.float32)
        data *= VALUES[1]
        return [data]

    def payload_module(self) -> ir.Module:
        lanes = self.options["lanes"]

        def body(inputs: list[ir.Value], inits: list[ir.Value]) -> list[ir.Value]:
            f32, index = ir.F32Type.get(), ir.IndexType.get()
            row = ir.VectorType.get([lanes], f32)
            pad = arith.constant(f32, 0.0)
            zero_index = arith.constant(index, 0)
            start = zero_vector(row)
            minor = ir.AffineMapAttr.get(ir.AffineMap.get_minor_identity(2, 1))
            columns = [arith.constant(index, chain * lanes) for chain in range(CHAINS)]
            loop = scf.ForOp(
                zero_index,
                arith.constant(index, self.rows),
                arith.constant(index, 1),
                [start] * CHAINS,
            )
            with ir.InsertionPoint(loop.body):
                step, sums = loop.induction_variable, []
                for acc, column in zip(loop.inner_iter_args, columns, strict=True):
                    loaded = vector.transfer_read(
                        row, inputs[0], [step, column], minor, pad, [True]
                    )
                    sums.append(arith.addf(acc, loaded))
                scf.YieldOp(sums)
            return [store_rows(loop.results, inits[0])]

        return build_payload(self.arguments(), body)

    def reference(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """Column sums of the rows, in float64 (buffered: no copy of the array)."""
        lanes = self.options["lanes"]
        sums = inputs[0].reshape(self.rows, CHAINS, lanes).sum(axis=0, dtype=np.float64)
        return [sums.astype(np.float32)]

    def accumulation_length(self) -> int:
        return self.rows

    def get_complexity(self) -> Complexity:
        """One add per element read; the array's bytes read, the partial sums' written."""
        data, out = self.arguments()
        return Complexity(flops=data.elements, bytes_read=data.nbytes, bytes_written=out.nbytes)
