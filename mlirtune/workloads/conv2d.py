"""2-D convolution with stride, dilation and zero padding, in two layouts: NHWC input, HWCF
filter, NHWF output (linalg.conv_2d_nhwc_hwcf), or PyTorch's NCHW input, FCHW filter, NCHW
output (linalg.conv_2d_nchw_fchw, as torch.nn.Conv2d; H=1, KH=1 is a Conv1d). A pointwise
NCHW conv of one image (1x1, unit stride, unpadded) is built as a matmul on reshaped views
(mlirtune.ir.pointwise), which the contraction family schedules."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from mlir import ir
from mlir.dialects import linalg

from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.workload import ArgSpec, Complexity, Param
from mlirtune.ir.pointwise import pointwise_convs_as_matmuls
from mlirtune.workloads.base import FLOAT_DTYPE_PARAM, SEED_PARAM, PayloadWorkload
from mlirtune.workloads.payload import build_payload, padded_spatially, zero_filled
from mlirtune.workloads.windows import output_size, parse_sizes

# bf16 would need an f32 accumulator and a matching tolerance; only full-precision types here.
LAYOUTS = ("nhwc", "nchw")
Pair = tuple[int, int]


class Conv2d(PayloadWorkload):
    """O[n,oh,ow,f] = sum over kh,kw,c of I[n, oh*sh + kh*dh - ph, ow*sw + kw*dw - pw, c] *
    K[kh,kw,c,f] (zero outside the input); the same with NCHW / FCHW / NCHW for nchw."""

    name = "conv2d"
    description = "2-D convolution, NHWC/HWCF/NHWF or (layout=nchw) NCHW/FCHW/NCHW"
    parameters = (
        Param("N", int, 1, "batch size"),
        Param("H", int, 58, "input height"),
        Param("W", int, 58, "input width"),
        Param("C", int, 64, "input channels"),
        Param("F", int, 64, "output channels (filters)"),
        Param("KH", int, 3, "filter height"),
        Param("KW", int, 3, "filter width"),
        Param("stride", str, 1, "stride along H and W: one int, or SH,SW"),
        Param("dilation", str, 1, "dilation along H and W: one int, or DH,DW"),
        Param("padding", str, 0, "zero padding on both sides: one int, or PH,PW"),
        Param("layout", str, "nhwc", "nhwc (HWCF filter) or nchw (PyTorch's, FCHW)", LAYOUTS),
        FLOAT_DTYPE_PARAM,
        SEED_PARAM,
    )

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        o = self.options
        self.stride = self._pair("stride", minimum=1)
        self.dilation = self._pair("dilation", minimum=1)
        self.padding = self._pair("padding", minimum=0)
        oh, ow = self.output_hw
        if oh < 1 or ow < 1:
            raise self._error(
                f"empty output {oh}x{ow} for H={o['H']} W={o['W']} KH={o['KH']} KW={o['KW']} "
                f"stride={o['stride']} dilation={o['dilation']} padding={o['padding']}; need "
                "H + 2*padding >= dilation*(KH-1)+1 and W + 2*padding >= dilation*(KW-1)+1"
            )

    def _error(self, message: str) -> UsageError:
        return UsageError(f"{self.name}: {message}", stage="workload")

    def _pair(self, key: str, *, minimum: int) -> Pair:
        """Parse option `key` (an int or "H,W") into an (h, w) pair; store it canonically
        (one int when both agree, as before per-dim values existed)."""
        h, w = parse_sizes(self.name, key, self.options[key], 2, minimum=minimum)
        self.options[key] = h if h == w else f"{h},{w}"
        return h, w

    @property
    def nchw(self) -> bool:
        return self.options["layout"] == "nchw"

    @property
    def output_hw(self) -> Pair:
        o = self.options
        h, w = (
            output_size(o[size], o[k], s, d, p)
            for size, k, s, d, p in zip(
                ("H", "W"), ("KH", "KW"), self.stride, self.dilation, self.padding, strict=True
            )
        )
        return h, w

    @property
    def padded_hw(self) -> Pair:
        return self.options["H"] + 2 * self.padding[0], self.options["W"] + 2 * self.padding[1]

    @property
    def loop_sizes(self) -> list[int]:
        """Sizes of the conv's loops, named N, OH, OW, F, KH, KW, C (nhwc's linalg order)."""
        o = self.options
        return [o["N"], *self.output_hw, o["F"], o["KH"], o["KW"], o["C"]]

    def arguments(self) -> list[ArgSpec]:
        o = self.options
        n, h, w, c, f, kh, kw = (o[k] for k in ("N", "H", "W", "C", "F", "KH", "KW"))
        oh, ow = self.output_hw
        if self.nchw:
            shapes = [(n, c, h, w), (f, c, kh, kw), (n, f, oh, ow)]
        else:
            shapes = [(n, h, w, c), (kh, kw, c, f), (n, oh, ow, f)]
        return [
            ArgSpec("I", shapes[0], self.dtype),
            ArgSpec("K", shapes[1], self.dtype),
            ArgSpec("O", shapes[2], self.dtype, is_output=True),
        ]

    def payload_module(self) -> ir.Module:
        element = self.dtype.mlir()
        conv_op = linalg.conv_2d_nchw_fchw if self.nchw else linalg.conv_2d_nhwc_hwcf

        def body(inputs, inits):
            image, kernel = inputs
            conv = conv_op(
                padded_spatially(image, self.padding, 0.0, channels_last=not self.nchw),
                kernel,
                outs=[zero_filled(inits[0], element)],
                strides=list(self.stride),
                dilations=list(self.dilation),
            )
            return [conv]

        module = build_payload(self.arguments(), body)
        pointwise_convs_as_matmuls(module.operation)
        return module

    @property
    def descriptor_name(self) -> str:
        """A pointwise conv's payload is a matmul (see mlirtune.ir.pointwise)."""
        return "matmul" if self.root is not None and self.root.kind == "matmul" else self.name

    def reference(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        return [self._convolve(*(x.astype(np.float64) for x in inputs))]

    def numpy_baseline(self) -> Callable[[], object]:
        image, kernel = self.inputs
        return lambda: self._convolve(image, kernel)

    def torch_baseline(self) -> Callable[[], object]:
        """PyTorch's conv2d: nchw on the same bytes; NHWC as a channels-last view of the
        same bytes, with the filter copied once, outside the timing, into the channels-last
        FCHW layout that a channels-last model holds (a view of HWCF made oneDNN reorder
        it on every call, up to 3x slower on ResNet-50's deep layers)."""
        import torch

        from mlirtune.bench.baseline import torch_tensor

        image, kernel = (torch_tensor(x) for x in self.inputs)
        if not self.nchw:
            image = image.permute(0, 3, 1, 2)
            kernel = kernel.permute(3, 2, 0, 1).contiguous(memory_format=torch.channels_last)
        stride, dilation, padding = self.stride, self.dilation, self.padding
        return lambda: torch.nn.functional.conv2d(
            image, kernel, stride=stride, dilation=dilation, padding=padding
        )

    def _convolve(self, image: np.ndarray, kernel: np.ndarray) -> np.ndarray:
        """The output in the workload's layout, computed as NHWC (see `_taps`)."""
        (ph, pw) = self.padding
        if not self.nchw:
            if ph or pw:
                image = np.pad(image, [(0, 0), (ph, ph), (pw, pw), (0, 0)])
            return self._taps(image, kernel)
        if ph or pw:
            image = np.pad(image, [(0, 0), (0, 0), (ph, ph), (pw, pw)])
        nhwc = self._taps(image.transpose(0, 2, 3, 1), kernel.transpose(2, 3, 1, 0))
        return np.ascontiguousarray(nhwc.transpose(0, 3, 1, 2))

    def _taps(self, image: np.ndarray, kernel: np.ndarray) -> np.ndarray:
        """The convolution of an (already padded) NHWC image with an HWCF filter, as one
        BLAS-backed tensordot per filter tap, in the inputs' dtype."""
        n, oh, ow, f, kh_size, kw_size, _ = self.loop_sizes
        (sh, sw), (dh, dw) = self.stride, self.dilation
        out = np.zeros((n, oh, ow, f), dtype=image.dtype)
        for kh in range(kh_size):
            for kw in range(kw_size):
                h0, w0 = kh * dh, kw * dw
                window = image[
                    :, h0 : h0 + sh * (oh - 1) + 1 : sh, w0 : w0 + sw * (ow - 1) + 1 : sw
                ]
                out += np.tensordot(window, kernel[kh, kw], axes=([3], [0]))
        return out

    def _tap_elements(self) -> tuple[int, int]:
        """Elements of one tap's strided window (tensordot copies it) and of the output."""
        n, oh, ow, f, _, _, c = self.loop_sizes
        return n * oh * ow * c, n * oh * ow * f

    def _layout_elements(self) -> int:
        """Elements the reference adds: the padded input, and nchw's output transpose."""
        n, c, f = self.options["N"], self.options["C"], self.options["F"]
        ph, pw = self.padded_hw
        oh, ow = self.output_hw
        padded = n * c * ph * pw if any(self.padding) or self.nchw else 0
        return padded + (n * f * oh * ow if self.nchw else 0)

    def reference_scratch_bytes(self) -> int:
        # float64 inputs, one window copy and one tensordot result (`_taps`).
        window, out = self._tap_elements()
        inputs = sum(a.elements for a in self.arguments() if not a.is_output)
        return 8 * (inputs + window + out + self._layout_elements())

    def baseline_bytes(self) -> int:
        # `_taps` in the inputs' dtype: the output, a window copy and a tensordot result.
        window, out = self._tap_elements()
        return self.dtype.itemsize * (window + 2 * out + self._layout_elements())

    def accumulation_length(self) -> int:
        o = self.options
        return o["KH"] * o["KW"] * o["C"]

    def get_complexity(self) -> Complexity:
        n, oh, ow, f, kh, kw, c = self.loop_sizes
        read = sum(a.nbytes for a in self.arguments() if not a.is_output)
        written = n * oh * ow * f * self.dtype.itemsize
        return Complexity(2 * n * oh * ow * f * kh * kw * c, read, written)
