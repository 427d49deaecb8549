"""Max and average pooling in PyTorch's channels-first layout (NCW, NCHW, NCDHW), as
torch.nn.MaxPool1d/2d/3d and AvgPool1d/2d/3d (ceil_mode=False; avg counts the padding).

The payload pads the input with tensor.pad (-inf for max, 0 for avg) and pools it with
linalg's named pooling ops: `pooling_ncw_*` in 1-D, `pooling_nchw_*` in 2-D. Linalg has no
channels-first 3-D pooling, so 3-D pooling is split by separability: a 2-D pool over (H, W)
of every depth plane padded along H and W (the input viewed as [N, C*D, H, W]), then a 1-D
pool over D of the result viewed as [N*C, D, OH*OW] and padded along D (`pooling_nwc_*`,
vectorized along the contiguous OH*OW). Average pooling sums and then divides by the window
size.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from mlir import ir
from mlir.dialects import arith, linalg, tensor
from numpy.lib.stride_tricks import sliding_window_view

from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.workload import ArgSpec, Complexity, Param
from mlirtune.ir.maps import generic, identity_map
from mlirtune.workloads.base import FLOAT_DTYPE_PARAM, SEED_PARAM, PayloadWorkload
from mlirtune.workloads.payload import build_payload, filled, padded_spatially
from mlirtune.workloads.windows import output_size, parse_sizes

Sizes = tuple[int, ...]
KINDS = ("max", "avg")
# (kind, spatial rank) -> linalg's named pooling op builder.
POOL_OPS = {
    ("max", 1): linalg.pooling_ncw_max,
    ("avg", 1): linalg.pooling_ncw_sum,
    ("max", 2): linalg.pooling_nchw_max,
    ("avg", 2): linalg.pooling_nchw_sum,
}
DEPTH_OPS = {"max": linalg.pooling_nwc_max, "avg": linalg.pooling_nwc_sum}


class Pool(PayloadWorkload):
    """out[n, c, o...] = max / mean over the window of the padded input at o*stride + k*dilation."""

    name = "pool"
    description = "max / average pooling, NCW / NCHW / NCDHW (torch.nn.MaxPoolNd, AvgPoolNd)"
    parameters = (
        Param("kind", str, "max", "max or avg", KINDS),
        Param("spatial", str, "64,64", "spatial sizes, 1 to 3 (W; H,W; D,H,W)"),
        Param("N", int, 2, "batch size"),
        Param("C", int, 16, "channels"),
        Param("kernel", str, "2", "window size: one per spatial dim, or one for all"),
        Param("stride", str, "", "window stride per dim (empty: the kernel, as PyTorch)"),
        Param("padding", str, "0", "implicit padding per dim, at most kernel/2"),
        Param("dilation", str, "1", "window dilation per dim (max only)"),
        FLOAT_DTYPE_PARAM,
        SEED_PARAM,
    )

    @property
    def descriptor_name(self) -> str:
        """The pooling family's descriptor, which also schedules a 3-D pool's two stages
        (an (H, W) pool, then a D pool) as one payload."""
        return "pooling"

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        o = self.options
        self.spatial = self._parse("spatial", o["spatial"], None, minimum=1)
        rank = len(self.spatial)
        if not 1 <= rank <= 3:
            raise self._error(f"spatial={o['spatial']!r} must give 1 to 3 sizes, got {rank}")
        self.kernel = self._parse("kernel", o["kernel"], rank, minimum=1)
        stride = o["stride"]
        self.stride = (
            self._parse("stride", stride, rank, minimum=1) if stride != "" else self.kernel
        )
        self.padding = self._parse("padding", o["padding"], rank, minimum=0)
        self.dilation = self._parse("dilation", o["dilation"], rank, minimum=1)
        if o["kind"] == "avg" and any(d != 1 for d in self.dilation):
            raise self._error(f"dilation={o['dilation']!r}: average pooling has no dilation")
        for p, k in zip(self.padding, self.kernel, strict=True):
            if 2 * p > k:
                raise self._error(
                    f"padding={o['padding']!r} must be at most half the kernel ({o['kernel']!r})"
                )
        self.output = tuple(
            output_size(*dims)
            for dims in zip(
                self.spatial, self.kernel, self.stride, self.dilation, self.padding, strict=True
            )
        )
        if min(self.output) < 1:
            raise self._error(
                f"kernel={o['kernel']!r} (dilation={o['dilation']!r}) is larger than the padded "
                f"input {self.padded}; output would be {self.output}"
            )
        # A canonical identity: Pool(kernel=2) and Pool(kernel="2,2") describe the same run.
        for key, sizes in (
            ("spatial", self.spatial),
            ("kernel", self.kernel),
            ("stride", self.stride),
            ("padding", self.padding),
            ("dilation", self.dilation),
        ):
            o[key] = ",".join(str(s) for s in sizes)

    def _parse(self, key: str, value: object, rank: int | None, *, minimum: int) -> Sizes:
        return parse_sizes(self.name, key, value, rank, minimum=minimum)

    def _error(self, message: str) -> UsageError:
        return UsageError(f"{self.name}: {message}", stage="workload")

    @property
    def padded(self) -> Sizes:
        return tuple(s + 2 * p for s, p in zip(self.spatial, self.padding, strict=True))

    @property
    def window(self) -> int:
        return math.prod(self.kernel)

    def arguments(self) -> list[ArgSpec]:
        n, c = self.options["N"], self.options["C"]
        return [
            ArgSpec("X", (n, c, *self.spatial), self.dtype),
            ArgSpec("out", (n, c, *self.output), self.dtype, is_output=True),
        ]

    # --- payload --------------------------------------------------------------------------

    def payload_module(self) -> ir.Module:
        element = self.dtype.mlir()
        kind = self.options["kind"]
        identity = float("-inf") if kind == "max" else 0.0

        def body(inputs, inits):
            if len(self.spatial) == 3:
                return [self._pool_3d(inputs[0], inits[0], element, identity)]
            x = padded_spatially(inputs[0], self.padding, identity)
            # Average pooling sums into a temporary (fused per tile by the schedule) that the
            # divide then writes to the output.
            out = inits[0] if kind == "max" else tensor.empty(list(init_shape), element)
            pooled = POOL_OPS[kind, len(self.spatial)](
                x,
                tensor.empty(list(self.kernel), element),
                outs=[filled(out, element, identity)],
                strides=list(self.stride),
                dilations=list(self.dilation),
            )
            return [self._average(pooled, inits[0], element)]

        init_shape = self.arguments()[1].shape

        return build_payload(self.arguments(), body)

    def _average(self, pooled: ir.Value, init: ir.Value, element: ir.Type) -> ir.Value:
        """`pooled` divided by the window size into `init` (max pooling: `pooled` itself)."""
        if self.options["kind"] == "max":
            return pooled
        size = arith.constant(element, float(self.window))
        rank = ir.RankedTensorType(init.type).rank
        return generic(
            [pooled],
            init,
            [identity_map(rank)] * 2,
            ["parallel"] * rank,
            lambda v, _: arith.divf(v, size),
        )

    def _pool_3d(self, x: ir.Value, init: ir.Value, element: ir.Type, identity: float):
        """Separable 3-D pooling: (H, W) of every depth plane, each padded along H and W,
        then D over the pooled planes, padded along D: the depth padding copies planes
        already pooled down along H and W, not the input (kb046: 0.8 -> 1.0 GFLOP/s)."""
        kind = self.options["kind"]
        n, c = self.options["N"], self.options["C"]
        d, h, w = self.spatial
        od, oh, ow = self.output
        planes = tensor.collapse_shape(
            ir.RankedTensorType.get([n, c * d, h, w], element), x, [[0], [1, 2], [3], [4]]
        )
        plane_init = tensor.empty([n, c * d, oh, ow], element)
        pooled = POOL_OPS[kind, 2](
            padded_spatially(planes, self.padding[1:], identity),
            tensor.empty(list(self.kernel[1:]), element),
            outs=[filled(plane_init, element, identity)],
            strides=list(self.stride[1:]),
            dilations=list(self.dilation[1:]),
        )
        planes_5d = tensor.expand_shape(
            ir.RankedTensorType.get([n, c, d, oh, ow], element),
            pooled,
            [[0], [1, 2], [3], [4]],
            [],
            [n, c, d, oh, ow],
        )
        rows = tensor.collapse_shape(
            ir.RankedTensorType.get([n * c, d, oh * ow], element), planes_5d, [[0, 1], [2], [3, 4]]
        )
        out_rows = tensor.collapse_shape(
            ir.RankedTensorType.get([n * c, od, oh * ow], element), init, [[0, 1], [2], [3, 4]]
        )
        sums = out_rows if kind == "max" else tensor.empty([n * c, od, oh * ow], element)
        depth = DEPTH_OPS[kind](
            padded_spatially(rows, self.padding[:1], identity, channels_last=True),
            tensor.empty([self.kernel[0]], element),
            outs=[filled(sums, element, identity)],
            strides=[self.stride[0]],
            dilations=[self.dilation[0]],
        )
        return tensor.expand_shape(
            ir.RankedTensorType.get([n, c, od, oh, ow], element),
            self._average(depth, out_rows, element),
            [[0, 1], [2], [3, 4]],
            [],
            [n, c, od, oh, ow],
        )

    # --- numpy ------------------------------------------------------------------------------

    def _pool_numpy(self, x: np.ndarray) -> np.ndarray:
        """Pool `x` (any float dtype) with sliding windows: pad, view the windows, reduce."""
        kind = self.options["kind"]
        rank = len(self.spatial)
        fill = -np.inf if kind == "max" else 0.0
        if any(self.padding):
            widths = [(0, 0), (0, 0), *((p, p) for p in self.padding)]
            x = np.pad(x, widths, constant_values=fill)
        extents = [d * (k - 1) + 1 for k, d in zip(self.kernel, self.dilation, strict=True)]
        axes = tuple(range(2, 2 + rank))
        windows = sliding_window_view(x, extents, axis=axes)
        index = (
            slice(None),
            slice(None),
            *(
                slice(None, s * (o - 1) + 1, s)
                for s, o in zip(self.stride, self.output, strict=True)
            ),
            *(slice(None, None, d) for d in self.dilation),
        )
        windows = windows[index]
        window_axes = tuple(range(2 + rank, 2 + 2 * rank))
        if kind == "max":
            return windows.max(axis=window_axes)
        return windows.sum(axis=window_axes) / x.dtype.type(self.window)

    def reference(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        return [self._pool_numpy(inputs[0].astype(np.float64))]

    def numpy_baseline(self) -> Callable[[], object]:
        x = self.inputs[0]
        return lambda: self._pool_numpy(x)

    def torch_baseline(self) -> Callable[[], object]:
        import torch.nn.functional as F

        from mlirtune.bench.baseline import torch_tensor

        x = torch_tensor(self.inputs[0])
        rank = len(self.spatial)
        common = {"kernel_size": self.kernel, "stride": self.stride, "padding": self.padding}
        if self.options["kind"] == "max":
            pool = getattr(F, f"max_pool{rank}d")
            return lambda: pool(x, dilation=self.dilation, **common)
        pool = getattr(F, f"avg_pool{rank}d")
        return lambda: pool(x, count_include_pad=True, **common)

    # --- sizes ------------------------------------------------------------------------------

    def _elements(self) -> tuple[int, int, int]:
        """Elements of the padded input, of the output, and window elements per output."""
        n, c = self.options["N"], self.options["C"]
        return n * c * math.prod(self.padded), n * c * math.prod(self.output), self.window

    def reference_scratch_bytes(self) -> int:
        # A float64 copy of the input and its padded copy; numpy reduces the strided window
        # view in place (buffered), into one output-sized temporary besides the result.
        padded, out, _ = self._elements()
        return 8 * ((1 + any(self.padding)) * padded + out)

    def baseline_bytes(self) -> int:
        padded, out, _ = self._elements()
        return self.dtype.itemsize * (padded + 2 * out)

    def accumulation_length(self) -> int:
        return self.window

    def get_complexity(self) -> Complexity:
        _, out, window = self._elements()
        n, c = self.options["N"], self.options["C"]
        read = n * c * math.prod(self.spatial) * self.dtype.itemsize
        return Complexity(out * window, read, out * self.dtype.itemsize)
