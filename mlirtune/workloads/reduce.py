"""A reduction of an N-D tensor over one axis: sum, mean, max, min, prod, argmax, argmin.

As `torch.<op>(x, dim=axis)`. The payload views the row-major input as [OUTER, R, INNER]
(OUTER = product of the dims before the axis, R = the axis, INNER = product of those after;
the bytes are the same) and the output as [OUTER, INNER]. With INNER == 1 the view drops it
([OUTER, R] -> [OUTER]), a row reduction that `rowwise` schedules; otherwise the reduced loop
is not the innermost one, the root kind is `axis_reduction` and `axis_reduction` schedules
it. argmax/argmin keep the 3-D view always (their select-based combiner is no combiner the
row family's partial reductions know) and write int64 indices, as PyTorch does.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from mlir import ir
from mlir.dialects import arith, linalg, tensor

from mlirtune.interfaces.dtype import DTYPES
from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.workload import ArgSpec, Complexity, Param
from mlirtune.ir.maps import generic, projection_map
from mlirtune.workloads.base import FLOAT_DTYPE_PARAM, SEED_PARAM, PayloadWorkload
from mlirtune.workloads.payload import build_payload, filled

OPS = ("sum", "mean", "max", "min", "prod", "argmax", "argmin")
ARG_OPS = ("argmax", "argmin")
MAX_RANK = 5


INT64 = DTYPES["i64"]  # argmax/argmin outputs, as PyTorch's


def parse_shape(text: str, owner: str = "reduce") -> tuple[int, ...]:
    """ "16,256,256" -> (16, 256, 256): 1 to MAX_RANK positive ints."""
    try:
        shape = tuple(int(part) for part in str(text).split(","))
    except ValueError:
        raise UsageError(
            f"{owner}: shape={text!r} must be comma-separated positive integers, e.g. 16,256"
        ) from None
    if not 1 <= len(shape) <= MAX_RANK or any(d <= 0 for d in shape):
        raise UsageError(
            f"{owner}: shape={text!r} must have 1 to {MAX_RANK} positive dims, e.g. 16,256"
        )
    return shape


def _combiner(op: str) -> Callable[[ir.Value, ir.Value], ir.Value]:
    return {
        "sum": arith.addf,
        "mean": arith.addf,
        "prod": arith.mulf,
        "max": arith.maximumf,
        "min": arith.minimumf,
    }[op]


IDENTITY = {"sum": 0.0, "mean": 0.0, "prod": 1.0, "max": -math.inf, "min": math.inf}


class Reduce(PayloadWorkload):
    """out = op(X, dim=axis) over one axis of an N-D X (see the module docstring)."""

    name = "reduce"
    description = "sum/mean/max/min/prod/argmax/argmin of an N-D tensor over one axis"
    parameters = (
        Param("shape", str, "16,256,256", "comma-separated dims, rank 1 to 5"),
        Param("axis", int, 1, "the reduced dim (negative counts from the end)"),
        Param("op", str, "sum", "the reduction (as torch.<op>)", OPS),
        FLOAT_DTYPE_PARAM,
        SEED_PARAM,
    )

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        dims = parse_shape(self.options["shape"], self.name)
        axis = self.options["axis"]
        if not -len(dims) <= axis < len(dims):
            raise UsageError(
                f"{self.name}: axis={axis} is out of range for shape {self.options['shape']} "
                f"(rank {len(dims)}: -{len(dims)} to {len(dims) - 1})"
            )
        self.dims, self.axis = dims, axis % len(dims)

    @property
    def op(self) -> str:
        return str(self.options["op"])

    @property
    def view(self) -> tuple[int, int, int]:
        """(OUTER, R, INNER) of the collapsed view."""
        return (
            math.prod(self.dims[: self.axis]),
            self.dims[self.axis],
            math.prod(self.dims[self.axis + 1 :]),
        )

    @property
    def rank3(self) -> bool:
        """Whether the payload keeps the 3-D view (INNER > 1, or an arg reduction)."""
        return self.view[2] > 1 or self.op in ARG_OPS

    def _shapes(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        outer, r, inner = self.view
        return ((outer, r, inner), (outer, inner)) if self.rank3 else ((outer, r), (outer,))

    def arguments(self) -> list[ArgSpec]:
        x_shape, out_shape = self._shapes()
        out_dtype = INT64 if self.op in ARG_OPS else self.dtype
        return [
            ArgSpec("X", x_shape, self.dtype),
            ArgSpec("out", out_shape, out_dtype, is_output=True),
        ]

    def payload_module(self) -> ir.Module:
        element_type = self.dtype.mlir()
        x_shape = self._shapes()[0]
        rank = len(x_shape)
        kept = [d for d in range(rank) if d != 1]
        maps = [projection_map(rank, list(range(rank))), projection_map(rank, kept)]
        iterators = ["parallel", "reduction", "parallel"][:rank]

        def body(inputs: list[ir.Value], inits: list[ir.Value]) -> list[ir.Value]:
            (x,) = inputs
            if self.op in ARG_OPS:
                return [_arg_reduction(x, inits[0], self.op, element_type, maps, iterators)]
            combine = _combiner(self.op)
            scale = arith.constant(element_type, 1.0 / x_shape[1]) if self.op == "mean" else None

            def step(value: ir.Value, acc: ir.Value) -> ir.Value:
                # mean sums x * (1/R): the scale stays inside the one reduction op.
                return combine(arith.mulf(value, scale) if scale else value, acc)

            init = filled(inits[0], element_type, IDENTITY[self.op])
            return [generic([x], init, maps, iterators, step)]

        return build_payload(self.arguments(), body)

    def reference(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        x = inputs[0].astype(np.float64)
        function = {
            "sum": np.sum,
            "mean": np.mean,
            "max": np.max,
            "min": np.min,
            "prod": np.prod,
            "argmax": np.argmax,
            "argmin": np.argmin,
        }[self.op]
        return [function(x, axis=1)]  # numpy's argmax/argmin keep the first index on ties

    def make_inputs(self) -> list[np.ndarray]:
        """Uniform in [-1, 1); for prod, magnitudes in [0.9, 1.1) with random signs, so that
        products of hundreds of terms neither underflow nor overflow."""
        rng = np.random.default_rng(self.seed)
        shape = self._shapes()[0]
        if self.op == "prod":
            x = rng.uniform(0.9, 1.1, size=shape) * rng.choice([-1.0, 1.0], size=shape)
        else:
            x = rng.uniform(-1.0, 1.0, size=shape)
        return [x.astype(self.dtype.numpy)]

    def accumulation_length(self) -> int:
        return self.view[1]

    def numpy_baseline(self) -> Callable[[], object]:
        x = self.inputs[0].reshape(self.dims)
        function = getattr(np, self.op)
        return lambda: function(x, axis=self.axis)

    def torch_baseline(self) -> Callable[[], object]:
        import torch

        from mlirtune.bench.baseline import torch_tensor

        x = torch_tensor(self.inputs[0].reshape(self.dims))
        function = {"max": torch.amax, "min": torch.amin}.get(self.op, getattr(torch, self.op))
        axis = self.axis
        return lambda: function(x, dim=axis)

    def baseline_bytes(self) -> int:
        outer, _, inner = self.view
        return 2 * outer * inner * 8

    def get_complexity(self) -> Complexity:
        """One flop per element read; the output is read-modify-written as the accumulator
        only in registers, so it is counted once, written."""
        outer, r, inner = self.view
        out_bytes = outer * inner * (8 if self.op in ARG_OPS else self.dtype.itemsize)
        return Complexity(outer * r * inner, outer * r * inner * self.dtype.itemsize, out_bytes)


def _arg_reduction(
    x: ir.Value,
    init: ir.Value,
    op: str,
    element_type: ir.Type,
    maps: list[ir.AffineMap],
    iterators: list[str],
) -> ir.Value:
    """argmax/argmin as one linalg.generic with two outputs: the best value so far (a
    temporary starting at -inf/+inf) and its index. A strictly better value, or the first
    NaN (PyTorch counts NaN as the extreme), takes over, so ties keep the first index."""
    out_shape = ir.RankedTensorType(init.type).shape
    values = filled(
        tensor.empty(out_shape, element_type),
        element_type,
        -math.inf if op == "argmax" else math.inf,
    )
    indices = linalg.fill(arith.constant(INT64.mlir(), 0), outs=[init])
    better = arith.CmpFPredicate.OGT if op == "argmax" else arith.CmpFPredicate.OLT
    iterator_attrs = [ir.Attribute.parse(f"#linalg.iterator_type<{it}>") for it in iterators]
    generic_op = linalg.GenericOp_(
        [x],
        [values, indices],
        ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in [*maps, maps[1]]]),
        ir.ArrayAttr.get(iterator_attrs),
    )
    block = generic_op.regions[0].blocks[0]
    with ir.InsertionPoint(block):
        value, best, best_index = block.arguments
        uno, ord_ = arith.CmpFPredicate.UNO, arith.CmpFPredicate.ORD
        first_nan = arith.andi(arith.cmpf(uno, value, value), arith.cmpf(ord_, best, best))
        take = arith.ori(arith.cmpf(better, value, best), first_nan)
        index = arith.index_cast(INT64.mlir(), linalg.IndexOp(1).result)
        linalg.YieldOp([arith.select(take, value, best), arith.select(take, index, best_index)])
    return generic_op.results[1]
