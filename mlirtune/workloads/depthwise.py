"""Depthwise 2-D convolution in PyTorch's layout, as nn.Conv2d(C, C, kernel, stride, padding,
dilation, groups=C, bias=False): input NCHW, one KH x KW filter per channel (PyTorch's
[C, 1, KH, KW] weight, declared [C, KH, KW]), output NCHW.

The payload pads the input with tensor.pad (zeros) and convolves it with linalg's
`depthwise_conv_2d_nchw_chw` into a zero-filled output; the `depthwise` schedule family
(mlirtune/schedules/depthwise.py) tiles it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from mlir import ir
from mlir.dialects import linalg

from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.workload import ArgSpec, Complexity, Param
from mlirtune.workloads.base import FLOAT_DTYPE_PARAM, SEED_PARAM, PayloadWorkload
from mlirtune.workloads.payload import build_payload, padded_spatially, zero_filled
from mlirtune.workloads.windows import output_size, parse_sizes

Pair = tuple[int, int]


class Depthwise(PayloadWorkload):
    """out[n, c, oh, ow] = sum over kh, kw of
    padded[n, c, oh*sh + kh*dh, ow*sw + kw*dw] * K[c, kh, kw]."""

    name = "depthwise"
    description = "depthwise 2-D convolution, NCHW input, [C, KH, KW] filter (groups=C)"
    parameters = (
        Param("N", int, 2, "batch size"),
        Param("C", int, 16, "channels (each convolved with its own filter)"),
        Param("H", int, 64, "input height"),
        Param("W", int, 64, "input width"),
        Param("KH", int, 3, "filter height"),
        Param("KW", int, 3, "filter width"),
        Param("stride", str, "1", "stride: one for both dims, or 'h,w'"),
        Param("padding", str, "0", "zero padding on both sides: one, or 'h,w'"),
        Param("dilation", str, "1", "filter dilation: one, or 'h,w'"),
        FLOAT_DTYPE_PARAM,
        SEED_PARAM,
    )

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        o = self.options
        self.stride = self._pair("stride", minimum=1)
        self.padding = self._pair("padding", minimum=0)
        self.dilation = self._pair("dilation", minimum=1)
        self.kernel = (o["KH"], o["KW"])
        self.output = tuple(
            output_size(*dims)
            for dims in zip(
                (o["H"], o["W"]), self.kernel, self.stride, self.dilation, self.padding, strict=True
            )
        )
        if min(self.output) < 1:
            raise self._error(
                f"KH={o['KH']} KW={o['KW']} (dilation={o['dilation']!r}) is larger than the "
                f"padded input {self.padded[0]}x{self.padded[1]}; output would be "
                f"{self.output[0]}x{self.output[1]}"
            )
        # A canonical identity: stride=2 and stride="2,2" describe the same run.
        for key, pair in (
            ("stride", self.stride),
            ("padding", self.padding),
            ("dilation", self.dilation),
        ):
            o[key] = f"{pair[0]},{pair[1]}"

    def _pair(self, key: str, *, minimum: int) -> Pair:
        h, w = parse_sizes(self.name, key, self.options[key], 2, minimum=minimum)
        return h, w

    def _error(self, message: str) -> UsageError:
        return UsageError(f"{self.name}: {message}", stage="workload")

    @property
    def padded(self) -> Pair:
        o = self.options
        return o["H"] + 2 * self.padding[0], o["W"] + 2 * self.padding[1]

    def arguments(self) -> list[ArgSpec]:
        o = self.options
        n, c = o["N"], o["C"]
        return [
            ArgSpec("X", (n, c, o["H"], o["W"]), self.dtype),
            ArgSpec("K", (c, o["KH"], o["KW"]), self.dtype),
            ArgSpec("out", (n, c, *self.output), self.dtype, is_output=True),
        ]

    # --- payload --------------------------------------------------------------------------

    def payload_module(self) -> ir.Module:
        element = self.dtype.mlir()

        def body(inputs, inits):
            image, kernel = inputs
            conv = linalg.depthwise_conv_2d_nchw_chw(
                padded_spatially(image, self.padding, 0.0),
                kernel,
                outs=[zero_filled(inits[0], element)],
                strides=list(self.stride),
                dilations=list(self.dilation),
            )
            return [conv]

        return build_payload(self.arguments(), body)

    # --- numpy ------------------------------------------------------------------------------

    def _taps(self, x: np.ndarray, kernel: np.ndarray) -> np.ndarray:
        """The convolution as one multiply-add per filter tap on strided views of the
        padded input, in the inputs' dtype."""
        (ph, pw), (sh, sw), (dh, dw) = self.padding, self.stride, self.dilation
        oh, ow = self.output
        if ph or pw:
            x = np.pad(x, [(0, 0), (0, 0), (ph, ph), (pw, pw)])
        out = np.zeros((*x.shape[:2], oh, ow), dtype=x.dtype)
        for kh in range(self.kernel[0]):
            for kw in range(self.kernel[1]):
                h0, w0 = kh * dh, kw * dw
                window = x[:, :, h0 : h0 + sh * (oh - 1) + 1 : sh, w0 : w0 + sw * (ow - 1) + 1 : sw]
                out += window * kernel[:, kh, kw][None, :, None, None]
        return out

    def reference(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        return [self._taps(*(x.astype(np.float64) for x in inputs))]

    def numpy_baseline(self) -> Callable[[], object]:
        image, kernel = self.inputs
        return lambda: self._taps(image, kernel)

    def torch_baseline(self) -> Callable[[], object]:
        """F.conv2d with groups=C on the same bytes ([C, KH, KW] viewed as [C, 1, KH, KW])."""
        import torch.nn.functional as F

        from mlirtune.bench.baseline import torch_tensor

        image = torch_tensor(self.inputs[0])
        c, kh, kw = self.inputs[1].shape
        weight = torch_tensor(self.inputs[1]).view(c, 1, kh, kw)
        common = {"stride": self.stride, "padding": self.padding, "dilation": self.dilation}
        return lambda: F.conv2d(image, weight, groups=c, **common)

    # --- sizes ------------------------------------------------------------------------------

    def _elements(self) -> tuple[int, int, int]:
        """Elements of the input, of its padded copy (0 without padding) and of the output."""
        o = self.options
        nc = o["N"] * o["C"]
        padded = nc * self.padded[0] * self.padded[1] if any(self.padding) else 0
        return nc * o["H"] * o["W"], padded, nc * self.output[0] * self.output[1]

    def reference_scratch_bytes(self) -> int:
        # float64 inputs, the padded copy, and one tap's product besides the result.
        image, padded, out = self._elements()
        return 8 * (image + self.options["C"] * self.kernel[0] * self.kernel[1] + padded + out)

    def baseline_bytes(self) -> int:
        _, padded, out = self._elements()
        return self.dtype.itemsize * (padded + 2 * out)

    def accumulation_length(self) -> int:
        return self.kernel[0] * self.kernel[1]

    def get_complexity(self) -> Complexity:
        _, _, out = self._elements()
        read = sum(a.nbytes for a in self.arguments() if not a.is_output)
        return Complexity(2 * out * self.accumulation_length(), read, out * self.dtype.itemsize)
