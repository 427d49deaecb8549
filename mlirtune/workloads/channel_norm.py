"""Normalisations of an NCHW tensor over axes other than the trailing one.

- batch:       BatchNorm2d in inference mode, (x - running_mean[c]) / sqrt(running_var[c] + eps)
               * weight[c] + bias[c];
- batch_train: BatchNorm2d in training mode, the same with the mean and biased variance of
               channel c over N, H and W;
- group:       GroupNorm, statistics of each (n, group of C/G channels) over those channels'
               H and W, then weight[c] and bias[c];
- rms:         x / sqrt(mean over C of x^2 + eps), as KernelBench's RMSNorm (no weight).

Every payload works on a 3-D loop nest (a, b, s) over the tensor viewed as [*, *, H*W] (the
bytes are the same): the statistics are per `a` (batch_train: a = c, b = n; group: the
input viewed as [N*G, C/G, H*W], a = (n, group), b = channel in the group) or per (a, s)
(rms: a = n, b = c). Statistics are plain sums (1/count is folded into their consumers),
centred for the variance; small ops turn them into a per-`a` scale and shift, and the last
op is one multiply-add per element. So every op of one `a` fuses into one tile of the last
op, which the `channel_norm` family schedules (rms tiles s as well: its statistics are per
column).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from mlir import ir
from mlir.dialects import arith, linalg, tensor
from mlir.dialects import math as mmath

from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.workload import ArgSpec, Complexity, Param
from mlirtune.ir.constants import splat
from mlirtune.ir.maps import generic, projection_map
from mlirtune.workloads.base import FLOAT_DTYPE_PARAM, SEED_PARAM, PayloadWorkload
from mlirtune.workloads.payload import build_payload, zero_filled
from mlirtune.workloads.reduce import parse_shape

KINDS = ("batch", "batch_train", "group", "rms")
EPS = 1e-5  # PyTorch's BatchNorm2d, GroupNorm and KernelBench's RMSNorm
# Per-channel parameters each kind takes, in argument order after X.
PARAMETERS = {
    "batch": ("running_mean", "running_var", "weight", "bias"),
    "batch_train": ("weight", "bias"),
    "group": ("weight", "bias"),
    "rms": (),
}
P, R = "parallel", "reduction"


def _map(*dims: int) -> ir.AffineMap:
    """(a, b, s) -> the listed loop dims."""
    return projection_map(3, list(dims))


class ChannelNorm(PayloadWorkload):
    """out = x normalised over non-trailing axes of NCHW (see the module docstring)."""

    name = "channel_norm"
    description = "batch, group or RMS normalisation of an NCHW tensor (per-channel statistics)"
    parameters = (
        Param("shape", str, "16,64,64,64", "N,C,H,W"),
        Param("kind", str, "batch", "batch, batch_train, group or rms", KINDS),
        Param("groups", int, 8, "channel groups of kind=group (must divide C)"),
        Param("eps", float, EPS, "added to the variance (rms: to the mean square), > 0"),
        FLOAT_DTYPE_PARAM,
        SEED_PARAM,
    )

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        dims = parse_shape(self.options["shape"], self.name)
        if len(dims) != 4:
            raise UsageError(
                f"{self.name}: shape={self.options['shape']!r} must be N,C,H,W (4 dims), "
                f"not {len(dims)}"
            )
        self.dims = dims
        try:
            eps = float(self.options["eps"])
        except (TypeError, ValueError):
            raise UsageError(f"{self.name}: eps={self.options['eps']!r} is not a number") from None
        if not eps > 0 or math.isinf(eps):
            raise UsageError(f"{self.name}: eps={eps!r} must be a positive finite number")
        self.options["eps"] = eps
        channels, groups = dims[1], self.options["groups"]
        if self.kind == "group" and channels % groups:
            raise UsageError(
                f"{self.name}: groups={groups} does not divide the {channels} channels of "
                f"shape={self.options['shape']!r}"
            )

    @property
    def kind(self) -> str:
        return str(self.options["kind"])

    @property
    def eps(self) -> float:
        return float(self.options["eps"])

    @property
    def view(self) -> tuple[int, int, int]:
        """The stored shape of X and out: [N, C, H*W], group: [N*G, C/G, H*W]."""
        n, c, h, w = self.dims
        if self.kind == "group":
            g = self.options["groups"]
            return n * g, c // g, h * w
        return n, c, h * w

    @property
    def loops(self) -> tuple[int, int, int]:
        """(a, b, s) loop sizes; batch_train iterates channels outermost."""
        first, second, s = self.view
        return (second, first, s) if self.kind == "batch_train" else (first, second, s)

    @property
    def statistics_count(self) -> int:
        """Elements each statistic is taken over (1 for batch: no statistics)."""
        n, c, h, w = self.dims
        return {
            "batch": 1,
            "batch_train": n * h * w,
            "group": c // self.options["groups"] * h * w,
            "rms": c,
        }[self.kind]

    def arguments(self) -> list[ArgSpec]:
        channels = self.dims[1]
        return [
            ArgSpec("X", self.view, self.dtype),
            *(ArgSpec(name, (channels,), self.dtype) for name in PARAMETERS[self.kind]),
            ArgSpec("out", self.view, self.dtype, is_output=True),
        ]

    # --- payload ------------------------------------------------------------------------------

    def payload_module(self) -> ir.Module:
        # X's and out's map: batch_train's loops are (c, n, s) over [N, C, S].
        x_map = _map(1, 0, 2) if self.kind == "batch_train" else _map(0, 1, 2)
        ops = _Generics(self.dtype.mlir())

        def body(inputs: list[ir.Value], inits: list[ir.Value]) -> list[ir.Value]:
            x, *params = inputs
            if self.kind == "rms":
                return [self._rms(x, inits[0], x_map, ops)]
            if self.kind == "batch":
                scale, shift, per_element = self._batch_inference(params, ops)
            else:
                scale, shift, per_element = self._statistics(x, params, x_map, ops)
            return [
                generic(
                    [x, scale, shift],
                    inits[0],
                    [x_map, per_element, per_element, x_map],
                    [P, P, P],
                    lambda v, k, z, _: arith.addf(arith.mulf(v, k), z),
                )
            ]

        return build_payload(self.arguments(), body)

    def _rms(self, x: ir.Value, out: ir.Value, x_map: ir.AffineMap, ops: _Generics) -> ir.Value:
        """X scaled by the reciprocal root mean square of each (a, s) column over b."""
        a, _, s = self.loops
        inverse = 1.0 / self.statistics_count
        total = ops.sums([x], [x_map], [a, s], [P, R, P], lambda v: arith.mulf(v, v))
        scale = ops.pointwise(
            [total],
            [projection_map(2, [0, 1])],
            [a, s],
            lambda t: self._rsqrt_of(arith.mulf(t, splat(inverse, t.type))),
        )
        return generic(
            [x, scale], out, [x_map, _map(0, 2), x_map], [P, P, P], lambda v, k, _: arith.mulf(v, k)
        )

    def _batch_inference(
        self, params: list[ir.Value], ops: _Generics
    ) -> tuple[ir.Value, ir.Value, ir.AffineMap]:
        """batch: scale and shift per channel from the running mean and variance."""
        _, b, _ = self.loops
        mean, var, weight, bias = params
        row = projection_map(1, [0])
        scale = ops.pointwise(
            [var, weight], [row, row], [b], lambda v, w: arith.mulf(w, self._rsqrt_of(v))
        )
        shift = ops.pointwise(
            [mean, scale, bias],
            [row, row, row],
            [b],
            lambda m, k, z: arith.subf(z, arith.mulf(m, k)),
        )
        return scale, shift, _map(1)

    def _rsqrt_of(self, mean: ir.Value) -> ir.Value:
        return mmath.rsqrt(arith.addf(mean, splat(self.eps, mean.type)))

    def _statistics(
        self, x: ir.Value, params: list[ir.Value], x_map: ir.AffineMap, ops: _Generics
    ) -> tuple[ir.Value, ir.Value, ir.AffineMap]:
        """batch_train and group: scale and shift per a (batch_train) or per (a, b) (group:
        per channel), from centred two-pass statistics per a; and their map from (a, b, s)."""
        element = self.dtype.mlir()
        a, b, _ = self.loops
        inverse = 1.0 / self.statistics_count
        per_row = projection_map(2, [0, 1])
        row_sums = ops.sums([x], [x_map], [a, b], [P, P, R], lambda v: v)
        total = ops.sums([row_sums], [per_row], [a], [P, R], lambda v: v)

        def centred_square(v: ir.Value, t: ir.Value) -> ir.Value:
            d = arith.subf(v, arith.mulf(t, splat(inverse, t.type)))
            return arith.mulf(d, d)

        squares = ops.sums([x, total], [x_map, _map(0)], [a, b], [P, P, R], centred_square)
        variance = ops.sums([squares], [per_row], [a], [P, R], lambda v: v)

        def scale_of(w: ir.Value, var: ir.Value) -> ir.Value:
            mean_square = arith.mulf(var, splat(inverse, var.type))
            return arith.mulf(w, mmath.rsqrt(arith.addf(mean_square, splat(self.eps, w.type))))

        def shift_of(z: ir.Value, t: ir.Value, k: ir.Value) -> ir.Value:
            return arith.subf(z, arith.mulf(arith.mulf(t, splat(inverse, t.type)), k))

        weight, bias = params
        if self.kind == "batch_train":
            row = projection_map(1, [0])
            scale = ops.pointwise([weight, variance], [row, row], [a], scale_of)
            shift = ops.pointwise([bias, total, scale], [row, row, row], [a], shift_of)
            return scale, shift, _map(0)
        # group: weight[c] and bias[c] as [N*G, C/G] (c = g*C/G + b), broadcast over n.
        weight, bias = (self._per_group_row(p, element) for p in (weight, bias))
        group = projection_map(2, [0])
        scale = ops.pointwise([weight, variance], [per_row, group], [a, b], scale_of)
        shift = ops.pointwise([bias, total, scale], [per_row, group, per_row], [a, b], shift_of)
        return scale, shift, _map(0, 1)

    def _per_group_row(self, param: ir.Value, element: ir.Type) -> ir.Value:
        """A per-channel [C] parameter as [N*G, C/G]: row n*G + g holds group g's channels."""
        n = self.dims[0]
        g = self.options["groups"]
        d = self.dims[1] // g
        grouped = tensor.expand_shape(
            ir.RankedTensorType.get([g, d], element), param, [[0, 1]], [], [g, d]
        )
        broadcast = linalg.broadcast(
            grouped, outs=[tensor.empty([n, g, d], element)], dimensions=[0]
        )
        return tensor.collapse_shape(
            ir.RankedTensorType.get([n * g, d], element), broadcast, [[0, 1], [2]]
        )

    # --- numpy ---------------------------------------------------------------------------------

    def make_inputs(self) -> list[np.ndarray]:
        """X in [-1, 1) plus a per-channel offset in [-0.5, 0.5) (so centring matters);
        running_var in [0.5, 1.5) (positive, as a variance is); weight around 1, bias and
        running_mean around 0."""
        rng = np.random.default_rng(self.seed)
        channels = self.dims[1]
        numpy_type = self.dtype.numpy
        x = rng.uniform(-1.0, 1.0, size=self.dims)
        x += rng.uniform(-0.5, 0.5, size=(1, channels, 1, 1))
        centre = {"running_mean": 0.0, "running_var": 1.0, "weight": 1.0, "bias": 0.0}
        params = [
            (centre[name] + rng.uniform(-0.5, 0.5, size=channels)).astype(numpy_type)
            for name in PARAMETERS[self.kind]
        ]
        return [x.reshape(self.view).astype(numpy_type), *params]

    def reference(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        x, *params = (a.astype(np.float64) for a in inputs)
        return [self._normalised(x, params).reshape(self.view)]

    def numpy_baseline(self) -> Callable[[], object]:
        x, *params = self.inputs
        return lambda: self._normalised(x, params)

    def _normalised(self, x: np.ndarray, params: list[np.ndarray]) -> np.ndarray:
        """The normalisation in numpy, in x's dtype, as [N, C, H, W]."""
        x = x.reshape(self.dims)
        shaped = [p.reshape(1, -1, 1, 1) for p in params]
        if self.kind == "rms":
            return x / np.sqrt((x * x).mean(axis=1, keepdims=True) + self.eps)
        if self.kind == "batch":
            mean, var, weight, bias = shaped
            return (x - mean) / np.sqrt(var + self.eps) * weight + bias
        weight, bias = shaped
        if self.kind == "batch_train":
            axes, grouped = (0, 2, 3), x
        else:
            axes, grouped = (2,), x.reshape(self.dims[0], self.options["groups"], -1)
        centred = grouped - grouped.mean(axis=axes, keepdims=True)
        variance = (centred * centred).mean(axis=axes, keepdims=True)
        normalised = (centred / np.sqrt(variance + self.eps)).reshape(self.dims)
        return normalised * weight + bias

    def torch_baseline(self) -> Callable[[], object]:
        import torch

        from mlirtune.bench.baseline import torch_tensor

        x, *params = (torch_tensor(a) for a in self.inputs)
        x = x.reshape(self.dims)
        functional, eps = torch.nn.functional, self.eps
        if self.kind == "batch":
            mean, var, weight, bias = params
            return lambda: functional.batch_norm(x, mean, var, weight, bias, False, 0.1, eps)
        if self.kind == "batch_train":
            weight, bias = params
            return lambda: functional.batch_norm(x, None, None, weight, bias, True, 0.1, eps)
        if self.kind == "group":
            weight, bias = params
            groups = self.options["groups"]
            return lambda: functional.group_norm(x, groups, weight, bias, eps)
        # KernelBench 36's forward, as written.
        return lambda: x / torch.sqrt(torch.mean(x**2, dim=1, keepdim=True) + eps)

    # --- sizes --------------------------------------------------------------------------------

    @property
    def elements(self) -> int:
        return math.prod(self.dims)

    def baseline_bytes(self) -> int:
        # Up to four arrays of x's size alive at once (centred, squares, quotient, result).
        return 4 * self.elements * self.dtype.itemsize

    def reference_scratch_bytes(self) -> int:
        # x as float64 and up to four temporaries of its size (centred, squares, quotient,
        # scaled) besides the result.
        return 8 * 5 * self.elements

    def accumulation_length(self) -> int:
        return self.statistics_count

    def get_complexity(self) -> Complexity:
        """Per element: batch a multiply-add; batch_train and group a sum, a centred square
        added and a multiply-add; rms a square added and a multiply."""
        flops = {"batch": 2, "batch_train": 6, "group": 6, "rms": 3}[self.kind] * self.elements
        read = sum(a.nbytes for a in self.arguments() if not a.is_output)
        return Complexity(flops, read, self.elements * self.dtype.itemsize)


class _Generics:
    """The two shapes of linalg.generic a normalisation's payload is made of, in `element`."""

    def __init__(self, element: ir.Type) -> None:
        self.element = element

    def sums(
        self,
        inputs: list[ir.Value],
        maps: list[ir.AffineMap],
        shape: list[int],
        iterators: list[str],
        term: Callable[..., ir.Value],
    ) -> ir.Value:
        """A zero-filled [shape] accumulating term(elements of `inputs`)."""
        init = zero_filled(tensor.empty(shape, self.element), self.element)
        kept = [d for d, it in enumerate(iterators) if it == P]
        out_map = projection_map(len(iterators), kept)
        return generic(
            inputs,
            init,
            [*maps, out_map],
            iterators,
            lambda *v: arith.addf(v[-1], term(*v[:-1])),
        )

    def pointwise(
        self,
        inputs: list[ir.Value],
        maps: list[ir.AffineMap],
        shape: list[int],
        body: Callable[..., ir.Value],
    ) -> ir.Value:
        """A [shape] of body(elements of `inputs`)."""
        rank = len(shape)
        return generic(
            inputs,
            tensor.empty(shape, self.element),
            [*maps, projection_map(rank, list(range(rank)))],
            [P] * rank,
            lambda *v: body(*v[:-1]),
        )
