"""Row normalisations of an [M, N] input: layer norm, RMS norm, L1 and L2 normalisation.

Each row is reduced to its statistics, then every element is normalised by them:
- layer: (x - mean) / sqrt(var + eps), var the biased variance, as torch.nn.LayerNorm;
- rms:   x / sqrt(mean(x^2) + eps), as torch.nn.RMSNorm;
- l1:    x / sum |x|;  l2: x / sqrt(sum x^2) (KernelBench's L1 and L2 norms, no eps).
With `affine`, layer and RMS norms scale by a weight[N] (and layer adds a bias[N]).

Instance norm and group norm without affine are layer norms of other row views: one row per
(n, c), or per (n, group), of an NCHW tensor's contiguous elements; a Frobenius norm is
`l2` of a single row. The suites name them so.

The payload is row reductions (plain sums; the 1/N scale is folded into their consumers)
and one element-wise generic, so the `rowwise` family fuses a row tile of all of them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from mlir import ir
from mlir.dialects import arith, math, tensor

from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.workload import ArgSpec, Complexity, Param
from mlirtune.ir.constants import splat
from mlirtune.ir.maps import generic, identity_map, projection_map
from mlirtune.workloads.base import FLOAT_DTYPE_PARAM, SEED_PARAM, PayloadWorkload
from mlirtune.workloads.payload import build_payload, zero_filled

KINDS = ("layer", "rms", "l1", "l2")
EPS = 1e-5  # torch.nn.LayerNorm's and KernelBench's RMSNorm's
PARALLEL = ["parallel", "parallel"]
ROW_REDUCTION = ["parallel", "reduction"]


class Norm(PayloadWorkload):
    """out[i, :] = x[i, :] normalised by statistics of row i (see the module docstring)."""

    name = "norm"
    description = "row normalisation of [M, N]: layer, rms, l1 or l2"
    parameters = (
        Param("M", int, 512, "rows (one set of statistics each)"),
        Param("N", int, 1024, "columns (the normalised elements of a row)"),
        Param("kind", str, "layer", "layer, rms, l1 or l2", KINDS),
        Param("affine", bool, False, "scale by weight[N] (layer: and add bias[N])"),
        FLOAT_DTYPE_PARAM,
        SEED_PARAM,
    )

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        if self.options["affine"] and self.kind in ("l1", "l2"):
            raise UsageError(f"{self.name}: affine=true needs kind=layer or rms, not {self.kind}")

    @property
    def kind(self) -> str:
        return self.options["kind"]

    @property
    def shape(self) -> tuple[int, int]:
        return self.options["M"], self.options["N"]

    @property
    def affine_inputs(self) -> tuple[str, ...]:
        if not self.options["affine"]:
            return ()
        return ("weight", "bias") if self.kind == "layer" else ("weight",)

    def arguments(self) -> list[ArgSpec]:
        m, n = self.shape
        return [
            ArgSpec("X", (m, n), self.dtype),
            *(ArgSpec(name, (n,), self.dtype) for name in self.affine_inputs),
            ArgSpec("out", (m, n), self.dtype, is_output=True),
        ]

    def payload_module(self) -> ir.Module:
        element = self.dtype.mlir()
        m, n = self.shape
        full, row, column = identity_map(2), projection_map(2, [0]), projection_map(2, [1])
        inverse_n = 1.0 / n

        def row_sum(inputs, maps, term) -> ir.Value:
            """sum over each row of term(elements of `inputs`)."""
            init = zero_filled(tensor.empty([m], element), element)
            return generic(
                inputs,
                init,
                [*maps, row],
                ROW_REDUCTION,
                lambda *values: arith.addf(values[-1], term(*values[:-1])),
            )

        def body(inputs, inits):
            x, *affine = inputs
            if self.kind == "layer":
                total = row_sum([x], [full], lambda v: v)
                squares = row_sum(
                    [x, total],
                    [full, row],
                    lambda v, s: _square(arith.subf(v, arith.mulf(s, splat(inverse_n, v.type)))),
                )
                statistics = [total, squares]
            elif self.kind == "l1":
                statistics = [row_sum([x], [full], math.absf)]
            else:
                statistics = [row_sum([x], [full], _square)]

            def normalise(v: ir.Value, *rest: ir.Value) -> ir.Value:
                stats, params = rest[: len(statistics)], rest[len(statistics) : -1]
                c = lambda value: splat(value, v.type)  # noqa: E731
                if self.kind == "layer":
                    mean = arith.mulf(stats[0], c(inverse_n))
                    scale = math.rsqrt(arith.addf(arith.mulf(stats[1], c(inverse_n)), c(EPS)))
                    result = arith.mulf(arith.subf(v, mean), scale)
                elif self.kind == "rms":
                    scale = math.rsqrt(arith.addf(arith.mulf(stats[0], c(inverse_n)), c(EPS)))
                    result = arith.mulf(v, scale)
                elif self.kind == "l1":
                    result = arith.divf(v, stats[0])
                else:
                    result = arith.divf(v, math.sqrt(stats[0]))
                if params:
                    result = arith.mulf(result, params[0])
                if len(params) > 1:
                    result = arith.addf(result, params[1])
                return result

            maps = [full, *(row for _ in statistics), *(column for _ in affine), full]
            return [generic([x, *statistics, *affine], inits[0], maps, PARALLEL, normalise)]

        return build_payload(self.arguments(), body)

    def make_inputs(self) -> list[np.ndarray]:
        """X in [-1, 1); weight around 1 and bias around 0, as trained ones are."""
        rng = np.random.default_rng(self.seed)
        m, n = self.shape
        numpy_type = self.dtype.numpy
        x = rng.uniform(-1.0, 1.0, size=(m, n)).astype(numpy_type)
        centre = {"weight": 1.0, "bias": 0.0}
        params = [
            (centre[name] + rng.uniform(-0.5, 0.5, size=n)).astype(numpy_type)
            for name in self.affine_inputs
        ]
        return [x, *params]

    def reference(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        x, *params = (a.astype(np.float64) for a in inputs)
        return [_normalised(x, self.kind, params)]

    def numpy_baseline(self):
        x, *params = self.inputs
        return lambda: _normalised(x, self.kind, params)

    def torch_baseline(self):
        import torch

        from mlirtune.bench.baseline import torch_tensor

        x, *params = (torch_tensor(a) for a in self.inputs)
        n = self.shape[1]
        functional = torch.nn.functional
        weight, bias = [*params, None, None][:2]
        if self.kind == "layer":
            return lambda: functional.layer_norm(x, (n,), weight, bias, EPS)
        if self.kind == "rms":
            return lambda: functional.rms_norm(x, (n,), weight, EPS)
        if self.kind == "l1":
            return lambda: x / torch.sum(torch.abs(x), dim=1, keepdim=True)
        return lambda: x / torch.norm(x, p=2, dim=1, keepdim=True)

    def baseline_bytes(self) -> int:
        # The numpy expressions keep up to four arrays of x's size alive (centred values,
        # their squares, the quotient and the result).
        return 4 * self.shape[0] * self.shape[1] * self.dtype.itemsize

    def reference_scratch_bytes(self) -> int:
        # x as float64 and two temporaries of its size (centred values, their squares).
        return 8 * 3 * self.shape[0] * self.shape[1]

    def accumulation_length(self) -> int:
        return self.shape[1]

    def get_complexity(self) -> Complexity:
        m, n = self.shape
        passes = 2 if self.kind == "layer" else 1  # reductions over each row
        flops = (2 * passes + 2 + len(self.affine_inputs)) * m * n
        read = sum(a.nbytes for a in self.arguments() if not a.is_output)
        return Complexity(flops, read, m * n * self.dtype.itemsize)


def _square(v: ir.Value) -> ir.Value:
    return arith.mulf(v, v)


def _normalised(x: np.ndarray, kind: str, params: list[np.ndarray]) -> np.ndarray:
    """The normalisation in numpy, in x's dtype (the reference passes float64)."""
    if kind == "layer":
        centred = x - x.mean(axis=1, keepdims=True)
        result = centred / np.sqrt((centred * centred).mean(axis=1, keepdims=True) + EPS)
    elif kind == "rms":
        result = x / np.sqrt((x * x).mean(axis=1, keepdims=True) + EPS)
    elif kind == "l1":
        result = x / np.abs(x).sum(axis=1, keepdims=True)
    else:
        result = x / np.sqrt((x * x).sum(axis=1, keepdims=True))
    if params:
        result = result * params[0]
    if len(params) > 1:
        result = result + params[1]
    return result
