"""Transposed 2-D convolution in PyTorch's layout, as nn.ConvTranspose2d(C, F, kernel, stride,
padding, output_padding, dilation=..., groups=1, bias=False): input NCHW, weight [C, F, KH, KW]
as PyTorch stores it, output NCHW; H = KH = 1 is a ConvTranspose1d.

The payload computes it with stride-1 linalg.conv_2d_nchw_fchw ops (`conv2d` roots, which
the `convolution` family schedules) of the filter flipped and transposed to [F, C, KH, KW]:
- along W, the input gets stride-1 zeros between its elements and dilation*(KW-1)-padding
  zeros at each side (output_padding more at the end);
- along H, each stride phase (output rows r, r+sh, ...) is one conv of only the filter rows
  that reach it, over the input rows without inserted zeros; a phase no filter row reaches
  is written with zeros. With sh = 1 there is a single conv.
All convs share F and OW, so the family's tiles and peels fit every one of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property
from math import gcd
from typing import Any

import numpy as np
from mlir import ir
from mlir.dialects import arith, linalg, tensor

from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.workload import ArgSpec, Complexity, Param
from mlirtune.workloads.base import FLOAT_DTYPE_PARAM, SEED_PARAM, PayloadWorkload
from mlirtune.workloads.payload import build_payload, padded_spatially, zero_filled
from mlirtune.workloads.windows import parse_sizes

Sizes = list[int]


@dataclass(frozen=True)
class Phase:
    """Output rows `row`, `row` + stride, ... (`rows` of them): a stride-1 conv of `taps`
    rows of the flipped filter, the first `first_tap`, every `tap_step`-th, `dilation` apart
    in the input, whose first input row is `offset` (negative: above the input)."""

    row: int
    rows: int
    taps: int
    first_tap: int
    tap_step: int
    dilation: int
    offset: int

    @property
    def input_rows(self) -> int:
        return self.rows + (self.taps - 1) * self.dilation


@dataclass(frozen=True)
class Axis:
    """One spatial dim: input `size`, `kernel` taps `dilation` apart, `stride`, `padding`
    cropped from both ends of the output and `extra` (output_padding) added at its end."""

    size: int
    kernel: int
    stride: int
    padding: int
    extra: int
    dilation: int

    @property
    def output(self) -> int:
        span = self.dilation * (self.kernel - 1)
        return (self.size - 1) * self.stride - 2 * self.padding + span + self.extra + 1

    @property
    def low(self) -> int:
        """Zeros before the first input element in the zero-inserted input (negative: that
        many leading positions are cropped)."""
        return self.dilation * (self.kernel - 1) - self.padding

    @property
    def zero_inserted(self) -> int:
        """Length of the zero-inserted input a stride-1 conv reads along this dim."""
        return self.output + self.dilation * (self.kernel - 1)

    def kept(self) -> tuple[int, int, int]:
        """(first input index, count, position in the zero-inserted input) of the input
        elements that land inside it; count 0 when none does."""
        first = max(0, -(self.low // self.stride))  # ceil(-low / stride), at least 0
        last = min(self.size - 1, (self.zero_inserted - 1 - self.low) // self.stride)
        return first, max(0, last - first + 1), self.low + first * self.stride

    def tap(self, k: int) -> tuple[slice, slice]:
        """(input slice, output slice) that filter tap `k` connects: input i reaches output
        i*stride + k*dilation - padding; empty slices when none lands inside the output."""
        offset = k * self.dilation - self.padding
        first = max(0, -(offset // self.stride))
        count = max(0, min(self.size - 1, (self.output - 1 - offset) // self.stride) - first + 1)
        start = first * self.stride + offset
        return slice(first, first + count), slice(start, start + self.stride * count, self.stride)

    def phases(self) -> list[Phase]:
        """The stride phases of the output: output o = i*stride + k*dilation - padding, so
        phase r takes the taps k with (r + padding - k*dilation) % stride == 0, which are
        stride/g apart and reach input rows dilation/g apart (g = gcd(stride, dilation))."""
        s, d = self.stride, self.dilation
        step, dilation = s // gcd(s, d), d // gcd(s, d)
        phases = []
        for r in range(min(s, self.output)):
            rows = -(-(self.output - r) // s)
            taps = [k for k in range(self.kernel) if (r + self.padding - k * d) % s == 0]
            if not taps:
                phases.append(Phase(r, rows, 0, 0, step, dilation, 0))
                continue
            offset = (r + self.padding - taps[-1] * d) // s
            first = self.kernel - 1 - taps[-1]
            phases.append(Phase(r, rows, len(taps), first, step, dilation, offset))
        return phases


def sliced(value: ir.Value, offsets: Sizes, sizes: Sizes, strides: Sizes) -> ir.Value:
    """tensor.extract_slice of `value`; `value` itself when the slice is all of it."""
    shape = ir.RankedTensorType(value.type)
    if sizes == list(shape.shape) and not any(offsets) and set(strides) == {1}:
        return value
    result = ir.RankedTensorType.get(sizes, shape.element_type)
    return tensor.extract_slice(result, value, [], [], [], offsets, sizes, strides)


def inserted(value: ir.Value, into: ir.Value, offsets: Sizes, strides: Sizes) -> ir.Value:
    """tensor.insert_slice of all of `value` into `into` at `offsets`, `strides` apart."""
    sizes = list(ir.RankedTensorType(value.type).shape)
    return tensor.insert_slice(value, into, [], [], [], offsets, sizes, strides)


def zeros(shape: Sizes, element: ir.Type) -> ir.Value:
    """A zero tensor as a tensor.generate: not a linalg.fill, which the conv schedule would
    vectorize whole (it vectorizes every linalg op it did not tile), and not a splat, which
    folds into a constant as large as the tensor, copied on every call."""
    zero = tensor.GenerateOp(ir.RankedTensorType.get(shape, element), [])
    with ir.InsertionPoint(zero.regions[0].blocks.append(*[ir.IndexType.get()] * len(shape))):
        tensor.YieldOp(arith.constant(element, 0.0))
    return zero.result


class ConvTranspose(PayloadWorkload):
    """out[n, f, oh, ow] = sum over c, ih, iw, kh, kw with oh = ih*sh - ph + kh*dh and
    ow = iw*sw - pw + kw*dw of I[n, c, ih, iw] * K[c, f, kh, kw]."""

    name = "conv_transpose"
    description = "transposed 2-D convolution, NCHW input, PyTorch's [C, F, KH, KW] weight"
    parameters = (
        Param("N", int, 1, "batch size"),
        Param("C", int, 32, "input channels"),
        Param("F", int, 32, "output channels"),
        Param("H", int, 32, "input height (1 with KH=1: a ConvTranspose1d)"),
        Param("W", int, 32, "input width"),
        Param("KH", int, 3, "filter height"),
        Param("KW", int, 3, "filter width"),
        Param("stride", str, "1", "stride: one for both dims, or 'h,w'"),
        Param("padding", str, "0", "output cropped at both ends: one, or 'h,w'"),
        Param("output_padding", str, "0", "output added at the end: one, or 'h,w'"),
        Param("dilation", str, "1", "filter dilation: one, or 'h,w'"),
        FLOAT_DTYPE_PARAM,
        SEED_PARAM,
    )

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        o = self.options  # sizes are positive (Param.check)
        minimums = {"stride": 1, "padding": 0, "output_padding": 0, "dilation": 1}
        sizes = {
            key: parse_sizes(self.name, key, o[key], 2, minimum=m) for key, m in minimums.items()
        }
        self.axes = tuple(
            Axis(o[dim], o[f"K{dim}"], *(sizes[key][i] for key in sizes))
            for i, dim in enumerate(("H", "W"))
        )
        if any(a.extra >= max(a.stride, a.dilation) for a in self.axes):
            raise self._error(
                f"output_padding={o['output_padding']!r} must be smaller than the stride or "
                "the dilation along each dim (as PyTorch requires)"
            )
        if min(self.output) < 1:
            raise self._error(
                f"padding={o['padding']!r} leaves an empty output {self.output[0]}x"
                f"{self.output[1]}: need 2*padding <= (size-1)*stride + dilation*(K-1) + "
                "output_padding along each dim"
            )
        # A canonical identity: stride=2 and stride="2,2" describe the same run.
        for key, (h, w) in sizes.items():
            o[key] = f"{h},{w}"

    def _error(self, message: str) -> UsageError:
        return UsageError(f"{self.name}: {message}", stage="workload")

    @property
    def output(self) -> tuple[int, int]:
        return self.axes[0].output, self.axes[1].output

    def arguments(self) -> list[ArgSpec]:
        o = self.options
        n, c, f = o["N"], o["C"], o["F"]
        return [
            ArgSpec("X", (n, c, o["H"], o["W"]), self.dtype),
            ArgSpec("K", (c, f, o["KH"], o["KW"]), self.dtype),
            ArgSpec("out", (n, f, *self.output), self.dtype, is_output=True),
        ]

    # --- payload --------------------------------------------------------------------------

    @cached_property
    def phases(self) -> list[Phase]:
        """The stride phases along H, those with filter rows first (the first conv is the
        root whose sizes the schedule is chosen for)."""
        phases = self.axes[0].phases()
        if not self.axes[1].kept()[1]:  # no input column reaches the output
            phases = [replace(p, taps=0) for p in phases]
        return sorted(phases, key=lambda p: not p.taps)

    @cached_property
    def row_padding(self) -> tuple[int, int]:
        """Zero rows above and below the input that the phases' convs read."""
        used = [p for p in self.phases if p.taps]
        top = max([0, *(-p.offset for p in used)])
        bottom = max([0, *(p.offset + p.input_rows - self.options["H"] for p in used)])
        return top, bottom

    @property
    def _plain_padding(self) -> bool:
        """Whether a single conv reads all of the input padded alike at both ends of each
        dim: a tensor.pad, which the schedule writes once, row by row."""
        cols, (top, bottom) = self.axes[1], self.row_padding
        reads = [(p.offset + top, p.input_rows) for p in self.phases if p.taps]
        plain_cols = cols.stride == 1 and cols.extra == 0 <= cols.low
        whole = [(0, self.options["H"] + top + bottom)]
        return len(self.phases) == 1 and reads == whole and top == bottom and plain_cols

    def payload_module(self) -> ir.Module:
        element = self.dtype.mlir()
        n, f = self.options["N"], self.options["F"]
        (oh, ow), sh = self.output, self.axes[0].stride

        def body(inputs, inits):
            image, weight = self._conv_input(inputs[0], element), self._flipped(inputs[1])
            out = inits[0]
            for phase in self.phases:
                where = ([0, 0, phase.row, 0], [n, f, phase.rows, ow], [1, 1, sh, 1])
                outs = zero_filled(sliced(out, *where), element)
                result = self._phase_conv(phase, image, weight, outs)
                out = result if phase.rows == oh else inserted(result, out, *where[::2])
            return [out]

        return build_payload(self.arguments(), body)

    def _phase_conv(
        self, phase: Phase, image: ir.Value, weight: ir.Value, outs: ir.Value
    ) -> ir.Value:
        """One phase's output rows: its filter rows over the input rows they reach. A phase
        that no filter row reaches is a 1-channel conv of a zero filter into its zero-filled
        rows, so that the schedule's vectorized tiles write those zeros (a zero tensor
        inserted into the strided rows would be copied element by element)."""
        n, f = self.options["N"], self.options["F"]
        element = ir.RankedTensorType(outs.type).element_type
        if not phase.taps:
            zero_rows = zeros([n, 1, phase.rows, self.output[1]], element)
            return linalg.conv_2d_nchw_fchw(zero_rows, zeros([f, 1, 1, 1], element), outs=[outs])
        rows = [phase.offset + self.row_padding[0], phase.input_rows, 1]
        taps = [phase.first_tap, phase.taps, phase.tap_step]
        return linalg.conv_2d_nchw_fchw(
            sliced(image, *self._window(image, rows)),
            sliced(weight, *self._window(weight, taps)),
            outs=[outs],
            strides=[1, 1],
            dilations=[phase.dilation, self.axes[1].dilation],
        )

    @staticmethod
    def _window(value: ir.Value, rows: Sizes) -> tuple[Sizes, Sizes, Sizes]:
        """(offsets, sizes, strides) of a slice of `value` along its third dim only."""
        shape = list(ir.RankedTensorType(value.type).shape)
        return [0, 0, rows[0], 0], [*shape[:2], rows[1], shape[3]], [1, 1, rows[2], 1]

    def _conv_input(self, image: ir.Value, element: ir.Type) -> ir.Value:
        """The input with the phases' zero rows above and below, zero-inserted along W: a
        tensor.pad where `_plain_padding` (a conv reading slices of a pad would recompute
        it in every output tile), else the input inserted into a zero tensor."""
        rows, cols = self.axes
        top, bottom = self.row_padding
        if self._plain_padding:
            return padded_spatially(image, [top, cols.low], 0.0)
        n, c = self.options["N"], self.options["C"]
        buffer = zeros([n, c, rows.size + top + bottom, cols.zero_inserted], element)
        first, count, position = cols.kept()
        if not count:  # no input column reaches the output: every phase is a zero one
            return buffer
        kept = sliced(image, [0, 0, 0, first], [n, c, rows.size, count], [1, 1, 1, 1])
        return inserted(kept, buffer, [0, 0, top, position], [1, 1, 1, cols.stride])

    def _flipped(self, weight: ir.Value) -> ir.Value:
        """[C, F, KH, KW] -> [F, C, KH, KW], reversed along KH and KW. A tensor.generate, not
        a linalg op: tile-and-fuse would recompute a linalg producer in every output tile
        (and linalg cannot tile a reversed index); this runs once, after bufferization."""
        c, f, kh, kw = ir.RankedTensorType(weight.type).shape
        element = ir.RankedTensorType(weight.type).element_type
        flipped = tensor.GenerateOp(ir.RankedTensorType.get([f, c, kh, kw], element), [])
        index = ir.IndexType.get()
        block = flipped.regions[0].blocks.append(*[index] * 4)
        with ir.InsertionPoint(block):
            fi, ci, hi, wi = block.arguments
            last_h, last_w = (arith.constant(index, size - 1) for size in (kh, kw))
            where = [ci, fi, arith.subi(last_h, hi), arith.subi(last_w, wi)]
            tensor.YieldOp(tensor.extract(weight, where))
        return flipped.result

    # --- numpy ------------------------------------------------------------------------------

    def _scatter(self, image: np.ndarray, weight: np.ndarray) -> np.ndarray:
        """One tensordot per filter tap (F x C times C x N*H*W), added into the output at the
        tap's stride-spaced positions, in the inputs' dtype: no zero-inserted or uncropped
        copy, so the float64 reference stays memory-safe."""
        rows, cols = self.axes
        out = np.zeros((image.shape[0], weight.shape[1], *self.output), dtype=image.dtype)
        for kh in range(rows.kernel):
            for kw in range(cols.kernel):
                (hin, hout), (win, wout) = rows.tap(kh), cols.tap(kw)
                if hin.start < hin.stop and win.start < win.stop:
                    window = image[:, :, hin, win]
                    tap = np.tensordot(weight[:, :, kh, kw], window, axes=([0], [1]))
                    out[:, :, hout, wout] += tap.transpose(1, 0, 2, 3)
        return out

    def reference(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        return [self._scatter(*(x.astype(np.float64) for x in inputs))]

    def numpy_baseline(self) -> Callable[[], object]:
        image, weight = self.inputs
        return lambda: self._scatter(image, weight)

    def torch_baseline(self) -> Callable[[], object]:
        """F.conv_transpose2d on the same bytes; conv_transpose1d when the H dim is a unit
        one (H = KH = 1, one output row)."""
        import torch.nn.functional as F

        from mlirtune.bench.baseline import torch_tensor

        image, weight = (torch_tensor(x) for x in self.inputs)
        keys = ("stride", "padding", "extra", "dilation")
        settings = {key: tuple(getattr(a, key) for a in self.axes) for key in keys}
        settings["output_padding"] = settings.pop("extra")
        if self.options["H"] == self.options["KH"] == self.output[0] == 1:
            image, weight = image[:, :, 0], weight[:, :, 0]
            along_w = {key: value[1] for key, value in settings.items()}
            return lambda: F.conv_transpose1d(image, weight, **along_w)
        return lambda: F.conv_transpose2d(image, weight, **settings)

    # --- sizes ------------------------------------------------------------------------------

    def _elements(self) -> tuple[int, int, int]:
        """Elements of the input, of one tap's product [F, N, H, W] and of the output."""
        o = self.options
        image = o["N"] * o["C"] * o["H"] * o["W"]
        return image, image // o["C"] * o["F"], o["N"] * o["F"] * self.output[0] * self.output[1]

    @cached_property
    def kernel_scratch_bytes(self) -> int:
        """The zero-inserted input, the flipped filter and the zero phases' inputs (tensor
        ops that the generic payload count does not see)."""
        o = self.options
        rows = o["H"] + sum(self.row_padding)
        size = o["N"] * o["C"] * rows * self.axes[1].zero_inserted
        size += o["C"] * o["F"] * o["KH"] * o["KW"]
        for phase in self.phases:
            size += 0 if phase.taps else o["N"] * phase.rows * self.output[1] + o["F"]
        return self.dtype.itemsize * size

    def reference_scratch_bytes(self) -> int:
        # float64 inputs, one input window and one tap's product besides the output.
        image, tap, _ = self._elements()
        weight = self.options["C"] * self.options["F"] * self.options["KH"] * self.options["KW"]
        return 8 * (2 * image + weight + tap)

    def baseline_bytes(self) -> int:
        image, tap, out = self._elements()
        return self.dtype.itemsize * (image + tap + out)

    def accumulation_length(self) -> int:
        o = self.options
        return o["C"] * o["KH"] * o["KW"]

    def get_complexity(self) -> Complexity:
        """Flops of the transposed conv itself (every input times every tap), not those of
        the zero rows and columns the payload's convs also multiply."""
        o = self.options
        image, _, out = self._elements()
        flops = 2 * image * o["F"] * o["KH"] * o["KW"]
        read = sum(a.nbytes for a in self.arguments() if not a.is_output)
        return Complexity(flops, read, out * self.dtype.itemsize)
