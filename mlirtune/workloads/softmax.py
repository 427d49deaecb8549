"""Row-wise softmax (or log-softmax) over the last dim of an [M, N] input, as linalg.generic ops.

The payload is the numerically stable form: row max, exp(x - max), row sum, divide; with
`log`, the row max, the row sum of exp(x - max), then x - max - log(sum). Its root is the
row-max reduction, so the library schedules it with `rowwise` (schedules/rowwise.py): the
reductions and the exp are producers of the final op, and a row tile fuses them all.
"""

from __future__ import annotations

import numpy as np
from mlir import ir
from mlir.dialects import arith, math, tensor

from mlirtune.interfaces.workload import ArgSpec, Complexity, Param
from mlirtune.ir.maps import generic, identity_map, projection_map
from mlirtune.workloads.base import FLOAT_DTYPE_PARAM, SEED_PARAM, PayloadWorkload
from mlirtune.workloads.payload import build_payload, filled, zero_filled

# Per element: max, subtract, exp, add, divide (exp counted as one flop, as is customary).
FLOPS_PER_ELEMENT = 5

PARALLEL = ["parallel", "parallel"]
ROW_REDUCTION = ["parallel", "reduction"]


class Softmax(PayloadWorkload):
    """out[i, :] = exp(X[i, :] - max X[i, :]) / sum exp(X[i, :] - max X[i, :])."""

    name = "softmax"
    description = "row-wise softmax (or log-softmax) over the last dim of [M, N]"
    parameters = (
        Param("M", int, 512, "rows"),
        Param("N", int, 1024, "columns (the softmax dim)"),
        Param("log", bool, False, "log-softmax: x - max - log(sum exp(x - max))"),
        FLOAT_DTYPE_PARAM,
        SEED_PARAM,
    )

    @property
    def shape(self) -> tuple[int, int]:
        return self.options["M"], self.options["N"]

    def arguments(self) -> list[ArgSpec]:
        return [
            ArgSpec("X", self.shape, self.dtype),
            ArgSpec("out", self.shape, self.dtype, is_output=True),
        ]

    def payload_module(self) -> ir.Module:
        element_type = self.dtype.mlir()
        m, n = self.shape
        full, row = identity_map(2), projection_map(2, [0])

        def body(inputs, inits):
            (x,) = inputs
            row_init = tensor.empty([m], element_type)
            # maxnumf skips a NaN, where maximumf (one more compare and blend per vector)
            # returns it: the output is the same, as exp(NaN - max) makes the row sum NaN.
            row_max = generic(
                [x],
                filled(row_init, element_type, float("-inf")),
                [full, row],
                ROW_REDUCTION,
                arith.maxnumf,
            )
            exps = generic(
                [x, row_max],
                tensor.empty([m, n], element_type),
                [full, row, full],
                PARALLEL,
                lambda v, top, _: math.exp(arith.subf(v, top)),
            )
            row_sum = generic(
                [exps],
                zero_filled(row_init, element_type),
                [full, row],
                ROW_REDUCTION,
                arith.addf,
            )
            if self.options["log"]:
                return [
                    generic(
                        [x, row_max, row_sum],
                        inits[0],
                        [full, row, row, full],
                        PARALLEL,
                        lambda v, top, total, _: arith.subf(arith.subf(v, top), math.log(total)),
                    )
                ]
            return [
                generic(
                    [exps, row_sum],
                    inits[0],
                    [full, row, full],
                    PARALLEL,
                    # arcp: LLVM may take the row's reciprocal once and multiply.
                    lambda e, total, _: arith.divf(
                        e, total, fastmath=ir.Attribute.parse("#arith.fastmath<arcp>")
                    ),
                )
            ]

        return build_payload(self.arguments(), body)

    def reference(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        shifted = inputs[0].astype(np.float64)
        shifted -= shifted.max(axis=1, keepdims=True)
        e = np.exp(shifted)
        if self.options["log"]:
            return [shifted - np.log(e.sum(axis=1, keepdims=True))]
        return [e / e.sum(axis=1, keepdims=True)]

    def numpy_baseline(self):
        x = self.inputs[0]
        out = np.empty_like(x)
        row = np.empty((x.shape[0], 1), dtype=x.dtype)
        exps = np.empty_like(x) if self.options["log"] else out

        def run():
            np.max(x, axis=1, keepdims=True, out=row)
            np.subtract(x, row, out=out)
            np.exp(out, out=exps)
            np.sum(exps, axis=1, keepdims=True, out=row)
            if self.options["log"]:
                return np.subtract(out, np.log(row, out=row), out=out)
            return np.divide(out, row, out=out)

        return run

    def torch_baseline(self):
        import torch

        from mlirtune.bench.baseline import torch_tensor

        x = torch_tensor(self.inputs[0])
        if self.options["log"]:
            return lambda: torch.log_softmax(x, dim=1)
        return lambda: torch.softmax(x, dim=1)

    def reference_scratch_bytes(self) -> int:
        # x as float64, x - max and its exp are alive together; two float64 row vectors.
        m, n = self.shape
        return 8 * (2 * m * n + 2 * m)

    def baseline_bytes(self) -> int:
        m, n = self.shape
        return self.dtype.itemsize * ((2 if self.options["log"] else 1) * m * n + m)

    def get_complexity(self) -> Complexity:
        m, n = self.shape
        nbytes = m * n * self.dtype.itemsize
        return Complexity(FLOPS_PER_ELEMENT * m * n, nbytes, nbytes)
