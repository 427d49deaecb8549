"""The convolution family's root ops: a 2-D convolution (one batch, two output image, one
output channel, two filter and one input channel loop), NHWC or channels-first."""

from __future__ import annotations

from mlir import ir
from mlir.dialects import linalg

from mlirtune.interfaces.op import OpInfo
from mlirtune.ir.roots import is_padded, padding, stored_epilogue

CONV_DIMS = ("N", "OH", "OW", "F", "KH", "KW", "C")


def recognise_convolution(
    op: ir.Operation, loops: list[int], dtypes: tuple[str, ...]
) -> OpInfo | None:
    """A conv2d's loops by name, its stride and dilation, and what its schedule needs of
    its layout (`_channels_first`) or of a padded input; None for anything else."""
    conv = linalg.infer_convolution_dimensions(op)
    if conv is None or len(conv.output_image) != 2 or len(conv.filter_loop) != 2:
        return None
    one_each = len(conv.batch) == len(conv.output_channel) == len(conv.input_channel) == 1
    if conv.depth or not one_each:
        return None  # a depthwise or grouped form: another family's, or the generic one
    (n,), (oh, ow), (f,), (kh, kw), (c,) = (
        conv.batch,
        conv.output_image,
        conv.output_channel,
        conv.filter_loop,
        conv.input_channel,
    )
    dims = {name: loops[d] for name, d in zip(CONV_DIMS, (n, oh, ow, f, kh, kw, c), strict=True)}
    attrs = {
        "stride": int(next(iter(conv.strides))),
        "dilation": int(next(iter(conv.dilations))),
    }
    if op.name == "linalg.conv_2d_nchw_fchw":
        attrs.update(_channels_first(op, conv))
    elif is_padded(op.operands[0]):
        attrs["padded"] = 1
    return OpInfo("conv2d", dims, dtypes, op.name, attrs)


def convolution_flops(op: OpInfo) -> int:
    """2 FLOPs per multiply-add."""
    d = op.dims
    return 2 * d["N"] * d["OH"] * d["OW"] * d["F"] * d["KH"] * d["KW"] * d["C"]


def _channels_first(op: ir.Operation, conv) -> dict[str, int]:
    """What a channels-first (NCHW / FCHW) conv's schedule needs besides the NHWC names:
    `nchw` (its loops are N, F, OH, OW, C, KH, KW), the stride and dilation along the
    contiguous W, its input row `IW`, that row's zero padding `pad` on each side,
    `padded` when a tensor.pad (along any dim) produces the input, and `epilogue` when
    element-wise ops read its result and the payload stores theirs (epilogue.py)."""
    attrs = {
        "nchw": 1,
        "stride_w": int(list(conv.strides)[-1]),
        "dilation_w": int(list(conv.dilations)[-1]),
        "IW": ir.ShapedType(op.operands[0].type).shape[-1],
        "pad": padding(op.operands[0]),
        "padded": int(is_padded(op.operands[0])),
    }
    if stored_epilogue(op):
        attrs["epilogue"] = 1
    return attrs
