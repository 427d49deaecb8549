"""2-D convolution in NHWC / HWCF / NHWF layout, with stride and dilation, no padding."""

from __future__ import annotations

from typing import Any

import numpy as np
from mlir import ir
from mlir.dialects import linalg

from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.workload import ArgSpec, Complexity, Param
from mlirtune.workloads.base import FLOAT_DTYPE_PARAM, SEED_PARAM, PayloadWorkload
from mlirtune.workloads.payload import build_payload, zero_filled

# bf16 would need an f32 accumulator and a matching tolerance; only full-precision types here.


def output_size(size: int, kernel: int, stride: int, dilation: int) -> int:
    """Output extent of a valid (unpadded) convolution along one spatial dim."""
    return (size - dilation * (kernel - 1) - 1) // stride + 1


class Conv2d(PayloadWorkload):
    """O[n,oh,ow,f] = sum over kh,kw,c of I[n, oh*s + kh*d, ow*s + kw*d, c] * K[kh,kw,c,f]."""

    name = "conv2d"
    description = "2-D convolution, NHWC input, HWCF filter, NHWF output"
    parameters = (
        Param("N", int, 1, "batch size"),
        Param("H", int, 58, "input height"),
        Param("W", int, 58, "input width"),
        Param("C", int, 64, "input channels"),
        Param("F", int, 64, "output channels (filters)"),
        Param("KH", int, 3, "filter height"),
        Param("KW", int, 3, "filter width"),
        Param("stride", int, 1, "stride along H and W"),
        Param("dilation", int, 1, "dilation along H and W"),
        FLOAT_DTYPE_PARAM,
        SEED_PARAM,
    )

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        oh, ow = self.output_hw
        if oh < 1 or ow < 1:
            o = self.options
            raise UsageError(
                f"{self.name}: empty output {oh}x{ow} for H={o['H']} W={o['W']} "
                f"KH={o['KH']} KW={o['KW']} stride={o['stride']} dilation={o['dilation']}; "
                "need H >= dilation*(KH-1)+1 and W >= dilation*(KW-1)+1",
                stage="workload",
            )

    @property
    def output_hw(self) -> tuple[int, int]:
        o = self.options
        return (
            output_size(o["H"], o["KH"], o["stride"], o["dilation"]),
            output_size(o["W"], o["KW"], o["stride"], o["dilation"]),
        )

    @property
    def loop_sizes(self) -> list[int]:
        """Sizes of the conv's loops in linalg order: N, OH, OW, F, KH, KW, C."""
        o = self.options
        return [o["N"], *self.output_hw, o["F"], o["KH"], o["KW"], o["C"]]

    def arguments(self) -> list[ArgSpec]:
        o = self.options
        oh, ow = self.output_hw
        return [
            ArgSpec("I", (o["N"], o["H"], o["W"], o["C"]), self.dtype),
            ArgSpec("K", (o["KH"], o["KW"], o["C"], o["F"]), self.dtype),
            ArgSpec("O", (o["N"], oh, ow, o["F"]), self.dtype, is_output=True),
        ]

    def payload_module(self) -> ir.Module:
        element = self.dtype.mlir()
        stride, dilation = self.options["stride"], self.options["dilation"]

        def body(inputs, inits):
            image, kernel = inputs
            conv = linalg.conv_2d_nhwc_hwcf(
                image,
                kernel,
                outs=[zero_filled(inits[0], element)],
                strides=[stride, stride],
                dilations=[dilation, dilation],
            )
            return [conv]

        return build_payload(self.arguments(), body)

    def reference(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        return [self._taps(*(x.astype(np.float64) for x in inputs))]

    def numpy_baseline(self):
        image, kernel = self.inputs
        return lambda: self._taps(image, kernel)

    def torch_baseline(self):
        """PyTorch's conv2d on the same bytes: NHWC and HWCF viewed as channels-last NCHW
        and FCHW tensors, which oneDNN takes without a copy."""
        import torch

        image = torch.from_numpy(self.inputs[0]).permute(0, 3, 1, 2)
        kernel = torch.from_numpy(self.inputs[1]).permute(3, 2, 0, 1)
        stride, dilation = self.options["stride"], self.options["dilation"]
        return lambda: torch.nn.functional.conv2d(image, kernel, stride=stride, dilation=dilation)

    def _taps(self, image: np.ndarray, kernel: np.ndarray) -> np.ndarray:
        """The convolution as one BLAS-backed tensordot per filter tap, in the inputs' dtype."""
        n, oh, ow, f, kh_size, kw_size, _ = self.loop_sizes
        stride, dilation = self.options["stride"], self.options["dilation"]
        out = np.zeros((n, oh, ow, f), dtype=image.dtype)
        for kh in range(kh_size):
            for kw in range(kw_size):
                h0, w0 = kh * dilation, kw * dilation
                window = image[
                    :,
                    h0 : h0 + stride * (oh - 1) + 1 : stride,
                    w0 : w0 + stride * (ow - 1) + 1 : stride,
                    :,
                ]
                out += np.tensordot(window, kernel[kh, kw], axes=([3], [0]))
        return out

    def _tap_elements(self) -> tuple[int, int]:
        """Elements of one tap's strided window (tensordot copies it) and of the output."""
        n, oh, ow, f, _, _, c = self.loop_sizes
        return n * oh * ow * c, n * oh * ow * f

    def reference_scratch_bytes(self) -> int:
        # float64 inputs, one window copy and one tensordot result (`_taps`).
        window, out = self._tap_elements()
        inputs = sum(a.elements for a in self.arguments() if not a.is_output)
        return 8 * (inputs + window + out)

    def baseline_bytes(self) -> int:
        # `_taps` in the inputs' dtype: the output, a window copy and a tensordot result.
        window, out = self._tap_elements()
        return self.dtype.itemsize * (window + 2 * out)

    def accumulation_length(self) -> int:
        o = self.options
        return o["KH"] * o["KW"] * o["C"]

    def get_complexity(self) -> Complexity:
        n, oh, ow, f, kh, kw, c = self.loop_sizes
        read = sum(a.nbytes for a in self.arguments() if not a.is_output)
        written = n * oh * ow * f * self.dtype.itemsize
        return Complexity(2 * n * oh * ow * f * kh * kw * c, read, written)
