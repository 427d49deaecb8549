"""Matrix multiplication, alone or as an MLP layer with fused bias and ReLU."""

from __future__ import annotations

import numpy as np
from mlir import ir
from mlir.dialects import arith, linalg

from mlirtune.interfaces.dtype import DTYPES
from mlirtune.interfaces.workload import ArgSpec, Complexity, Param
from mlirtune.workloads.base import SEED_PARAM, PayloadWorkload
from mlirtune.workloads.payload import (
    build_payload,
    generic,
    identity_map,
    projection_map,
    zero_filled,
)

SIZE_PARAMS = (
    Param("M", int, 256, "rows of A and C"),
    Param("N", int, 256, "columns of B and C"),
    Param("K", int, 256, "reduction size"),
    Param("dtype", str, "f32", "element type of A and B", tuple(DTYPES)),
    SEED_PARAM,
)


class Matmul(PayloadWorkload):
    """C[M,N] = A[M,K] @ B[K,N], optionally followed by + bias[N] and ReLU in the same payload."""

    name = "matmul"
    description = "C = A @ B (+ bias, ReLU)"
    parameters = (
        *SIZE_PARAMS,
        Param("bias", bool, False, "add a bias row vector"),
        Param("relu", bool, False, "apply ReLU"),
    )

    @property
    def out_dtype(self):
        # bf16 products accumulate in f32, as every bf16 GEMM does.
        return DTYPES["f32"] if self.dtype.name == "bf16" else self.dtype

    @property
    def has_epilogue(self) -> bool:
        return self.options["bias"] or self.options["relu"]

    def arguments(self) -> list[ArgSpec]:
        m, n, k = (self.options[d] for d in "MNK")
        args = [ArgSpec("A", (m, k), self.dtype), ArgSpec("B", (k, n), self.dtype)]
        if self.options["bias"]:
            args.append(ArgSpec("bias", (n,), self.out_dtype))
        return [*args, ArgSpec("C", (m, n), self.out_dtype, is_output=True)]

    def payload_module(self) -> ir.Module:
        out_type = self.out_dtype.mlir()

        def body(inputs, inits):
            a, b, *bias = inputs
            product = linalg.matmul(a, b, outs=[zero_filled(inits[0], out_type)])
            if not self.has_epilogue:
                return [product]
            # The epilogue updates the product in place (it is the generic's output), so the
            # fused tiles need no buffer besides C.
            maps = [projection_map(2, [1])] * len(bias) + [identity_map(2)]

            def epilogue(*values):
                *bias_value, x = values
                if bias_value:
                    x = arith.addf(x, bias_value[0])
                if self.options["relu"]:
                    x = arith.maximumf(x, arith.constant(out_type, 0.0))
                return x

            return [generic(bias, product, maps, ["parallel"] * 2, epilogue)]

        return build_payload(self.arguments(), body)

    def reference(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        a, b, *bias = (x.astype(np.float64) for x in inputs)
        c = a @ b
        if bias:
            c = c + bias[0]
        if self.options["relu"]:
            c = np.maximum(c, 0.0)
        return [c]

    def numpy_baseline(self):
        a, b, *bias = (
            x.astype(np.float32) if x.dtype != self.out_dtype.numpy else x for x in self.inputs
        )
        out = np.empty((self.options["M"], self.options["N"]), dtype=self.out_dtype.numpy)

        def run():
            np.matmul(a, b, out=out)
            if bias:
                np.add(out, bias[0], out=out)
            if self.options["relu"]:
                np.maximum(out, 0, out=out)

        return run

    def reference_scratch_bytes(self) -> int:
        # float64 copies of the inputs; the epilogue makes one new [M, N] array per step.
        m, n = self.options["M"], self.options["N"]
        copies = 8 * sum(a.elements for a in self.arguments() if not a.is_output)
        return copies + (8 * m * n if self.has_epilogue else 0)

    def baseline_bytes(self) -> int:
        # The output, and float32 copies of the inputs not already in the output dtype.
        out = self.arguments()[-1]
        inputs = [a for a in self.arguments() if not a.is_output]
        converted = sum(4 * a.elements for a in inputs if a.dtype != self.out_dtype)
        return out.nbytes + converted

    def accumulation_length(self) -> int:
        return self.options["K"]

    def get_complexity(self) -> Complexity:
        m, n, k = (self.options[d] for d in "MNK")
        epilogue = (int(self.options["bias"]) + int(self.options["relu"])) * m * n
        read = sum(a.nbytes for a in self.arguments() if not a.is_output)
        return Complexity(2 * m * n * k + epilogue, read, m * n * self.out_dtype.itemsize)


class Mlp(Matmul):
    """One MLP layer: ReLU(A @ B + bias), fused in one payload."""

    name = "mlp"
    description = "ReLU(A @ B + bias), fused"
    parameters = (
        *SIZE_PARAMS,
        Param("bias", bool, True, "add a bias row vector"),
        Param("relu", bool, True, "apply ReLU"),
    )
