"""Element-wise activations: each one's scalar body in MLIR, its float64 reference and its
PyTorch form, with PyTorch's default constants (leaky ReLU slope 0.01, ELU alpha 1, SELU's
fixed alpha and scale, softplus threshold 20, hardtanh on [-1, 1]).

The MLIR bodies use arith and math ops only; the host pipeline turns tanh, erf, exp and log
into vector arithmetic (steps `expand-math` and `expand-exp`), so every activation stays in
vector registers.
"""

from __future__ import annotations

import math as pymath
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from types import ModuleType

import numpy as np
from mlir import ir
from mlir.dialects import arith, math

from mlirtune.ir.constants import splat

LEAKY_SLOPE = 0.01
ELU_ALPHA = 1.0
SELU_ALPHA, SELU_SCALE = 1.6732632423543772, 1.0507009873554805
SOFTPLUS_THRESHOLD = 20.0
GELU_TANH_SCALE, GELU_TANH_CUBIC = pymath.sqrt(2.0 / pymath.pi), 0.044715


@dataclass(frozen=True)
class Activation:
    """One activation: `build(x)` emits its MLIR body for a scalar or vector x,
    `reference(x)` computes it on float64 arrays, `torch(torch_module)` picks PyTorch's
    function; `flops` counts its arithmetic per element (a transcendental counts as one)."""

    name: str
    description: str
    build: Callable[[ir.Value], ir.Value]
    reference: Callable[[np.ndarray], np.ndarray]
    torch: Callable[[ModuleType], Callable]  # torch module -> its eager function
    flops: int


def _c(value: float, like: ir.Value) -> ir.Value:
    return splat(value, like.type)


def _positive(x: ir.Value) -> ir.Value:
    return arith.cmpf(arith.CmpFPredicate.OGT, x, _c(0.0, x))


def _sigmoid(x: ir.Value) -> ir.Value:
    return arith.divf(_c(1.0, x), arith.addf(_c(1.0, x), math.exp(arith.negf(x))))


def _clamp(x: ir.Value, low: float, high: float) -> ir.Value:
    return arith.minimumf(arith.maximumf(x, _c(low, x)), _c(high, x))


def _exp_minus_one(x: ir.Value, alpha: float) -> ir.Value:
    """alpha * (exp(x) - 1), the negative side of ELU and SELU."""
    return arith.mulf(_c(alpha, x), arith.subf(math.exp(x), _c(1.0, x)))


def _gelu_erf(x: ir.Value) -> ir.Value:
    inner = math.erf(arith.mulf(x, _c(pymath.sqrt(0.5), x)))
    return arith.mulf(arith.mulf(x, _c(0.5, x)), arith.addf(_c(1.0, x), inner))


def _gelu_tanh(x: ir.Value) -> ir.Value:
    cubic = arith.mulf(arith.mulf(x, x), arith.mulf(x, _c(GELU_TANH_CUBIC, x)))
    inner = math.tanh(arith.mulf(_c(GELU_TANH_SCALE, x), arith.addf(x, cubic)))
    return arith.mulf(arith.mulf(x, _c(0.5, x)), arith.addf(_c(1.0, x), inner))


def _softplus(x: ir.Value) -> ir.Value:
    # max(x, 0) + log1p(exp(-|x|)): no overflow, and x itself above the threshold.
    smooth = arith.addf(
        arith.maximumf(x, _c(0.0, x)), math.log1p(math.exp(arith.negf(math.absf(x))))
    )
    above = arith.cmpf(arith.CmpFPredicate.OGT, x, _c(SOFTPLUS_THRESHOLD, x))
    return arith.select(above, x, smooth)


def _np_erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(pymath.erf, otypes=[np.float64])(x)


def _np_sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


ACTIVATIONS: dict[str, Activation] = {
    a.name: a
    for a in (
        Activation(
            "relu", "max(x, 0)", lambda x: arith.maximumf(x, _c(0.0, x)),
            lambda x: np.maximum(x, 0.0), lambda t: t.relu, 1,
        ),
        Activation(
            "leaky_relu", f"x if x > 0 else {LEAKY_SLOPE} x",
            lambda x: arith.select(_positive(x), x, arith.mulf(x, _c(LEAKY_SLOPE, x))),
            lambda x: np.where(x > 0, x, LEAKY_SLOPE * x),
            lambda t: t.nn.functional.leaky_relu, 2,
        ),
        Activation(
            "sigmoid", "1 / (1 + exp(-x))", _sigmoid, _np_sigmoid, lambda t: t.sigmoid, 4
        ),
        Activation("tanh", "tanh(x)", math.tanh, np.tanh, lambda t: t.tanh, 1),
        Activation(
            "silu", "x * sigmoid(x) (swish)", lambda x: arith.mulf(x, _sigmoid(x)),
            lambda x: x * _np_sigmoid(x), lambda t: t.nn.functional.silu, 5,
        ),
        Activation(
            "gelu", "x/2 (1 + erf(x / sqrt 2))", _gelu_erf,
            lambda x: 0.5 * x * (1.0 + _np_erf(x / np.sqrt(2.0))),
            lambda t: t.nn.functional.gelu, 5,
        ),
        Activation(
            "gelu_tanh", "x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))", _gelu_tanh,
            lambda x: 0.5 * x * (1.0 + np.tanh(GELU_TANH_SCALE * (x + GELU_TANH_CUBIC * x**3))),
            lambda t: partial(t.nn.functional.gelu, approximate="tanh"), 9,
        ),
        Activation(
            "selu", "scale (x if x > 0 else alpha (exp(x) - 1))",
            lambda x: arith.mulf(
                _c(SELU_SCALE, x),
                arith.select(_positive(x), x, _exp_minus_one(x, SELU_ALPHA)),
            ),
            lambda x: SELU_SCALE * np.where(x > 0, x, SELU_ALPHA * np.expm1(x)),
            lambda t: t.selu, 5,
        ),
        Activation(
            "hardsigmoid", "clamp(x / 6 + 1/2, 0, 1)",
            lambda x: _clamp(arith.addf(arith.divf(x, _c(6.0, x)), _c(0.5, x)), 0.0, 1.0),
            lambda x: np.clip(x / 6.0 + 0.5, 0.0, 1.0),
            lambda t: t.nn.functional.hardsigmoid, 4,
        ),
        Activation(
            "softplus", "log(1 + exp(x)), x itself above 20", _softplus,
            lambda x: np.where(x > SOFTPLUS_THRESHOLD, x, np.logaddexp(0.0, x)),
            lambda t: t.nn.functional.softplus, 5,
        ),
        Activation(
            "softsign", "x / (1 + |x|)",
            lambda x: arith.divf(x, arith.addf(_c(1.0, x), math.absf(x))),
            lambda x: x / (1.0 + np.abs(x)), lambda t: t.nn.functional.softsign, 3,
        ),
        Activation(
            "elu", "x if x > 0 else exp(x) - 1",
            lambda x: arith.select(_positive(x), x, _exp_minus_one(x, ELU_ALPHA)),
            lambda x: np.where(x > 0, x, ELU_ALPHA * np.expm1(x)),
            lambda t: t.nn.functional.elu, 4,
        ),
        Activation(
            "hardtanh", "clamp(x, -1, 1)", lambda x: _clamp(x, -1.0, 1.0),
            lambda x: np.clip(x, -1.0, 1.0), lambda t: t.nn.functional.hardtanh, 2,
        ),
    )
}  # fmt: skip


def torch_function(activation: Activation) -> Callable:
    """The PyTorch eager function computing `activation` (imports torch)."""
    import torch

    return activation.torch(torch)
