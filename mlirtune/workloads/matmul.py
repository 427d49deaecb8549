"""Matrix multiplication, alone or as an MLP layer with fused bias and ReLU; bf16 and f16
matmuls sum their products in f32, int8 ones exactly in int32.

Options as in KernelBench level 1: operands stored transposed (`transpose`: A as [K, M],
B as [N, K], or both; a linalg.matmul with explicit indexing maps, still a "matmul" root)
and a triangular mask of the result (`mask`, torch.triu / torch.tril with diagonal 0: an
element-wise epilogue on linalg.index, fused like bias and ReLU).
"""

from __future__ import annotations

import numpy as np
from mlir import ir
from mlir.dialects import arith, linalg

from mlirtune.interfaces.dtype import DTYPES, FLOAT_DTYPES, DType
from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.workload import ArgSpec, Complexity, Param
from mlirtune.ir.maps import generic, identity_map, projection_map
from mlirtune.workloads.base import SEED_PARAM, PayloadWorkload
from mlirtune.workloads.payload import build_payload, zero_filled

SHAPE_PARAMS = (
    Param("M", int, 256, "rows of A and C"),
    Param("N", int, 256, "columns of B and C"),
    Param("K", int, 256, "reduction size"),
)
# Narrow operands and the type their products sum in (C's), as GEMMs on them do: bf16 and
# f16 in f32, int8 exactly in int32.
SUM_TYPES = {"bf16": "f32", "f16": "f32", "i8": "i32"}
INT_OPERANDS = ("i8",)


# Stored layouts: which operands are transposed (A as [K, M], B as [N, K]).
TRANSPOSES = ("none", "a", "b", "ab")
# Triangle of C kept (the rest zero), as torch.triu / torch.tril with diagonal 0.
MASKS = ("none", "upper", "lower")
VARIANT_PARAMS = (
    Param(
        "transpose", str, "none", "operands stored transposed: A as [K, M], B as [N, K]", TRANSPOSES
    ),
    Param("mask", str, "none", "triangle of C kept, the rest zero (torch.triu/tril)", MASKS),
)


def _operand_maps(transpose: str) -> list[ir.AffineMap]:
    """A's, B's and C's indexing maps over the loops (m, n, k) for a stored layout."""
    a = [2, 0] if "a" in transpose else [0, 2]
    b = [1, 2] if "b" in transpose else [2, 1]
    return [projection_map(3, dims) for dims in (a, b, [0, 1])]


def _keep(mask: str, i: ir.Value, j: ir.Value) -> ir.Value:
    """Whether element (i, j) lies in the kept triangle: j >= i (upper) or j <= i (lower)."""
    predicate = arith.CmpIPredicate.sge if mask == "upper" else arith.CmpIPredicate.sle
    return arith.cmpi(predicate, j, i)


class Matmul(PayloadWorkload):
    """C[M,N] = A[M,K] @ B[K,N], optionally followed by + bias[N], ReLU and a triangular mask
    in the same payload; A and B may be stored transposed."""

    name = "matmul"
    description = "C = A @ B (+ bias, ReLU, triangle mask; transposed operands)"
    parameters = (
        *SHAPE_PARAMS,
        Param(
            "dtype",
            str,
            "f32",
            "element type of A and B (bf16, f16: C is f32; i8: C is i32, exact)",
            (*FLOAT_DTYPES, *INT_OPERANDS),
        ),
        SEED_PARAM,
        Param("bias", bool, False, "add a bias row vector"),
        Param("relu", bool, False, "apply ReLU"),
        *VARIANT_PARAMS,
    )

    def __init__(self, **options) -> None:
        super().__init__(**options)
        if self.dtype.is_integer and self.has_epilogue:
            raise UsageError(
                f"{self.name}: dtype={self.dtype.name} takes no bias, relu or mask (C is the "
                f"exact {SUM_TYPES[self.dtype.name]} sum of the products; the epilogues "
                "are float)"
            )

    @property
    def out_dtype(self) -> DType:
        return DTYPES[SUM_TYPES.get(self.dtype.name, self.dtype.name)]

    @property
    def has_epilogue(self) -> bool:
        return self.options["bias"] or self.options["relu"] or self.mask != "none"

    @property
    def transpose(self) -> str:
        return self.options.get("transpose", "none")

    @property
    def mask(self) -> str:
        return self.options.get("mask", "none")

    def arguments(self) -> list[ArgSpec]:
        m, n, k = (self.options[d] for d in "MNK")
        a_shape = (k, m) if "a" in self.transpose else (m, k)
        b_shape = (n, k) if "b" in self.transpose else (k, n)
        args = [ArgSpec("A", a_shape, self.dtype), ArgSpec("B", b_shape, self.dtype)]
        if self.options["bias"]:
            args.append(ArgSpec("bias", (n,), self.out_dtype))
        return [*args, ArgSpec("C", (m, n), self.out_dtype, is_output=True)]

    def payload_module(self) -> ir.Module:
        out_type = self.out_dtype.mlir()

        def body(inputs, inits):
            a, b, *bias = inputs
            maps = _operand_maps(self.transpose) if self.transpose != "none" else None
            product = linalg.matmul(
                a, b, outs=[zero_filled(inits[0], out_type)], indexing_maps=maps
            )
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
                if self.mask != "none":
                    keep = _keep(self.mask, linalg.IndexOp(0).result, linalg.IndexOp(1).result)
                    x = arith.select(keep, x, arith.constant(out_type, 0.0))
                return x

            return [generic(bias, product, maps, ["parallel"] * 2, epilogue)]

        return build_payload(self.arguments(), body)

    def reference(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        a, b, *bias = (x.astype(np.float64) for x in inputs)
        c = self._operand_view(a, "a") @ self._operand_view(b, "b")
        if bias:
            c = c + bias[0]
        if self.options["relu"]:
            c = np.maximum(c, 0.0)
        return [self._masked(c)]

    def _operand_view(self, x, which: str):
        """An operand as [M, K] or [K, N]: the transposed view of one stored transposed
        (`.T` works on numpy arrays and PyTorch tensors alike)."""
        return x.T if which in self.transpose else x

    def _masked(self, c: np.ndarray) -> np.ndarray:
        if self.mask == "upper":
            return np.triu(c)
        return np.tril(c) if self.mask == "lower" else c

    def numpy_baseline(self):
        a, b, *bias = (
            x.astype(np.float32) if x.dtype != self.out_dtype.numpy else x for x in self.inputs
        )
        a, b = self._operand_view(a, "a"), self._operand_view(b, "b")
        m, n = self.options["M"], self.options["N"]
        # f32 for operands converted to f32 (bf16, f16, i8: OpenBLAS's sgemm on the same shape).
        out = np.empty((m, n), dtype=np.result_type(a, b))
        # Where the triangle mask zeroes C (np.triu/tril would allocate a new array).
        dropped = None
        if self.mask != "none":
            rows, cols = np.indices((m, n), sparse=True)
            dropped = cols < rows if self.mask == "upper" else cols > rows

        def run():
            np.matmul(a, b, out=out)
            if bias:
                np.add(out, bias[0], out=out)
            if self.options["relu"]:
                np.maximum(out, 0, out=out)
            if dropped is not None:
                np.copyto(out, 0, where=dropped)
            return out

        return run

    def torch_baseline(self):
        """torch.matmul on the stored operands, transposed ones as views (`.T`), then bias,
        ReLU and torch.triu / torch.tril. bf16 and f16 products stay in their own type in
        PyTorch."""
        import torch

        from mlirtune.bench.baseline import torch_tensor

        a, b, *bias = (torch_tensor(x) for x in self.inputs)
        a, b = self._operand_view(a, "a"), self._operand_view(b, "b")
        relu, mask = self.options["relu"], self.mask

        if self.dtype.is_integer:  # torch.matmul keeps int8 sums in int8; this sums in int32
            return lambda: torch._int_mm(a, b)

        def run():
            c = torch.matmul(a, b)
            if bias:
                c = c + bias[0]
            if relu:
                c = torch.relu(c)
            if mask == "upper":
                c = torch.triu(c)
            elif mask == "lower":
                c = torch.tril(c)
            return c

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
        mask = out.elements if self.mask != "none" else 0  # the bool array of dropped elements
        return out.nbytes + converted + mask

    def accumulation_length(self) -> int:
        return self.options["K"]

    def get_complexity(self) -> Complexity:
        m, n, k = (self.options[d] for d in "MNK")
        steps = int(self.options["bias"]) + int(self.options["relu"]) + int(self.mask != "none")
        epilogue = steps * m * n
        read = sum(a.nbytes for a in self.arguments() if not a.is_output)
        return Complexity(2 * m * n * k + epilogue, read, m * n * self.out_dtype.itemsize)


class Mlp(Matmul):
    """One MLP layer: ReLU(A @ B + bias), fused in one payload."""

    name = "mlp"
    description = "ReLU(A @ B + bias), fused"
    parameters = (
        *SHAPE_PARAMS,
        Param("dtype", str, "f32", "element type of A and B", FLOAT_DTYPES),
        SEED_PARAM,
        Param("bias", bool, True, "add a bias row vector"),
        Param("relu", bool, True, "apply ReLU"),
    )
