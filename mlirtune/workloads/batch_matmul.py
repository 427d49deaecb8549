"""Batched matrix multiplication: B independent matmuls in one linalg.batch_matmul."""

from __future__ import annotations

import numpy as np
from mlir import ir
from mlir.dialects import linalg

from mlirtune.interfaces.workload import ArgSpec, Complexity, Param
from mlirtune.workloads.base import FLOAT_DTYPE_PARAM, SEED_PARAM, PayloadWorkload
from mlirtune.workloads.payload import build_payload, zero_filled

# bf16 would need an f32 accumulator and a matching tolerance; only full-precision types here.


class BatchMatmul(PayloadWorkload):
    """C[B,M,N] = A[B,M,K] @ B[B,K,N]; scheduled as a contraction with one batch dimension."""

    name = "batch_matmul"
    description = "C[b] = A[b] @ B[b] for each batch b"
    parameters = (
        Param("B", int, 8, "batch size"),
        Param("M", int, 128, "rows of each A and C"),
        Param("N", int, 128, "columns of each B and C"),
        Param("K", int, 128, "reduction size"),
        FLOAT_DTYPE_PARAM,
        SEED_PARAM,
    )

    @property
    def dims(self) -> list[int]:
        """Loop sizes in contraction order: batch, M, N, K."""
        return [self.options[d] for d in "BMNK"]

    def arguments(self) -> list[ArgSpec]:
        b, m, n, k = self.dims
        return [
            ArgSpec("A", (b, m, k), self.dtype),
            ArgSpec("B", (b, k, n), self.dtype),
            ArgSpec("C", (b, m, n), self.dtype, is_output=True),
        ]

    def payload_module(self) -> ir.Module:
        element = self.dtype.mlir()

        def body(inputs, inits):
            a, b = inputs
            return [linalg.batch_matmul(a, b, outs=[zero_filled(inits[0], element)])]

        return build_payload(self.arguments(), body)

    def reference(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        a, b = (x.astype(np.float64) for x in inputs)
        return [a @ b]

    def numpy_baseline(self):
        a, b = self.inputs
        out = np.empty((self.dims[0], self.dims[1], self.dims[2]), dtype=a.dtype)
        return lambda: np.matmul(a, b, out=out)

    def torch_baseline(self):
        import torch

        from mlirtune.bench.baseline import torch_tensor

        a, b = (torch_tensor(x) for x in self.inputs)
        return lambda: torch.bmm(a, b)

    def reference_scratch_bytes(self) -> int:
        return 8 * sum(a.elements for a in self.arguments() if not a.is_output)

    def baseline_bytes(self) -> int:
        return self.arguments()[-1].nbytes

    def accumulation_length(self) -> int:
        return self.options["K"]

    def get_complexity(self) -> Complexity:
        b, m, n, k = self.dims
        read = sum(a.nbytes for a in self.arguments() if not a.is_output)
        return Complexity(2 * b * m * n * k, read, b * m * n * self.dtype.itemsize)
