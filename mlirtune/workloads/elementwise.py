"""A chain of element-wise ops over 2-D tensors, fused into one linalg.generic.

The chain starts from X; each `add` or `mul` consumes the next extra input (Y0, Y1, ...), and
an activation (relu, gelu, sigmoid, ...: mlirtune.workloads.activations) consumes none, so
`ops="add,mul,relu"` computes relu((X + Y0) * Y1) and `ops=gelu` is GELU alone. `scale`
multiplies by a scalar input (shape []), `scale_rows` multiplies row i by Y[i] (shape [M]),
which is diag(Y) @ X without the matmul. The payload
has no contraction or reduction, so the library schedules its one generic with `elementwise`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from mlir import ir
from mlir.dialects import arith

from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.workload import ArgSpec, Complexity, Param
from mlirtune.ir.maps import generic, identity_map, projection_map
from mlirtune.workloads.activations import ACTIVATIONS, torch_function
from mlirtune.workloads.base import FLOAT_DTYPE_PARAM, SEED_PARAM, PayloadWorkload
from mlirtune.workloads.payload import build_payload

# Ops that multiply or add one extra input, with the dims of [M, N] that input has; and the
# ops that consume none.
BINARY_OPS: dict[str, tuple[int, ...]] = {
    "add": (0, 1),
    "mul": (0, 1),
    "scale": (),
    "scale_rows": (0,),
}
UNARY_OPS = tuple(ACTIVATIONS)
KNOWN_OPS = (*BINARY_OPS, *UNARY_OPS)


def parse_chain(text: str, owner: str = "elementwise") -> tuple[str, ...]:
    """Split `text` ("add,relu") into op names, rejecting an empty chain or an unknown op."""
    ops = tuple(op.strip() for op in text.split(","))
    if not text.strip() or any(not op for op in ops):
        raise UsageError(
            f"{owner}: ops={text!r} needs a comma-separated list of ops, e.g. add,relu"
        )
    for op in ops:
        if op not in KNOWN_OPS:
            raise UsageError(
                f"{owner}: unknown op {op!r} in ops={text!r}; known: {', '.join(KNOWN_OPS)}"
            )
    return ops


class Elementwise(PayloadWorkload):
    """out[M,N] = the `ops` chain applied to X and the extra inputs Y0, Y1, ... in one pass."""

    name = "elementwise"
    description = "fused chain of add, mul and activations (relu, gelu, ...) over [M, N]"
    parameters = (
        Param("M", int, 1024, "rows"),
        Param("N", int, 1024, "columns"),
        Param("ops", str, "add,relu", "comma-separated chain of " + ", ".join(KNOWN_OPS)),
        FLOAT_DTYPE_PARAM,
        SEED_PARAM,
    )

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        if not isinstance(self.options["ops"], str):
            raise UsageError(f"{self.name}: ops must be a string, got {self.options['ops']!r}")
        self.ops = parse_chain(self.options["ops"], self.name)

    @property
    def shape(self) -> tuple[int, int]:
        return self.options["M"], self.options["N"]

    @property
    def operand_dims(self) -> list[tuple[int, ...]]:
        """The dims of [M, N] each extra input has, in chain order."""
        return [BINARY_OPS[op] for op in self.ops if op in BINARY_OPS]

    def arguments(self) -> list[ArgSpec]:
        inputs = [ArgSpec("X", self.shape, self.dtype)]
        inputs += [
            ArgSpec(f"Y{i}", tuple(self.shape[d] for d in dims), self.dtype)
            for i, dims in enumerate(self.operand_dims)
        ]
        return [*inputs, ArgSpec("out", self.shape, self.dtype, is_output=True)]

    def payload_module(self) -> ir.Module:
        def scalar_chain(x: ir.Value, *rest: ir.Value) -> ir.Value:
            *operands, _ = rest  # the last block argument is the (unused) output element
            operands = iter(operands)
            for op in self.ops:
                if op == "add":
                    x = arith.addf(x, next(operands))
                elif op in BINARY_OPS:
                    x = arith.mulf(x, next(operands))
                else:
                    x = ACTIVATIONS[op].build(x)
            return x

        def body(inputs, inits):
            maps = [projection_map(2, dims) for dims in self.operand_dims]
            maps = [identity_map(2), *maps, identity_map(2)]
            return [generic(inputs, inits[0], maps, ["parallel"] * 2, scalar_chain)]

        return build_payload(self.arguments(), body)

    def reference(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        x, *others = self._broadcastable([a.astype(np.float64) for a in inputs])
        operands = iter(others)
        for op in self.ops:
            if op == "add":
                x = x + next(operands)
            elif op in BINARY_OPS:
                x = x * next(operands)
            else:
                x = ACTIVATIONS[op].reference(x)
        return [x]

    def numpy_baseline(self):
        if "gelu" in self.ops:
            return None  # numpy has no erf
        x, *others = self._broadcastable(self.inputs)
        out = np.empty_like(x)

        def run():
            value, operands = x, iter(others)
            for op in self.ops:
                if op == "add":
                    value = np.add(value, next(operands), out=out)
                elif op in BINARY_OPS:
                    value = np.multiply(value, next(operands), out=out)
                elif op == "relu":
                    value = np.maximum(value, 0, out=out)
                else:
                    value = ACTIVATIONS[op].reference(value)  # numpy ops in x's dtype
            return value

        return run

    def torch_baseline(self):
        import torch

        from mlirtune.bench.baseline import torch_tensor

        x, *others = (torch_tensor(a) for a in self._broadcastable(self.inputs))
        out = torch.empty_like(x)
        activations = {op: torch_function(ACTIVATIONS[op]) for op in self.ops if op in UNARY_OPS}

        def run():
            value, operands = x, iter(others)
            for op in self.ops:
                if op == "add":
                    value = torch.add(value, next(operands), out=out)
                elif op in BINARY_OPS:
                    value = torch.mul(value, next(operands), out=out)
                else:
                    value = activations[op](value)
            return value

        return run

    def _broadcastable(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        """X and the extra inputs, each viewed with size-1 dims where it is broadcast (a
        row vector as [M, 1]), as numpy and PyTorch broadcast them against X."""
        x, *others = arrays
        views = [
            y.reshape([self.shape[d] if d in dims else 1 for d in range(2)])
            for y, dims in zip(others, self.operand_dims, strict=True)
        ]
        return [x, *views]

    def baseline_bytes(self) -> int:
        # The output; an activation other than relu evaluates numpy expressions, a few
        # temporaries of the output's size at a time.
        temporaries = 4 if any(op in UNARY_OPS and op != "relu" for op in self.ops) else 0
        return (1 + temporaries) * self.arguments()[-1].nbytes

    def get_complexity(self) -> Complexity:
        m, n = self.shape
        read = sum(a.nbytes for a in self.arguments() if not a.is_output)
        flops = sum(ACTIVATIONS[op].flops if op in ACTIVATIONS else 1 for op in self.ops)
        return Complexity(flops * m * n, read, m * n * self.dtype.itemsize)
