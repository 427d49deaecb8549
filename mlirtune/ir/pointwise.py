"""Pointwise (1x1, unit-stride, unpadded) NCHW convolutions of one image rewritten as
matmuls on reshaped views, O[F, H*W] = K[F, C] @ I[C, H*W], so that the contraction
family's packed GEMM schedules them: the NCHW conv path keeps one vector of a row's pixels,
which a 7x7 image leaves half empty (ResNet-50's last stage ran at 0.53-0.65x PyTorch).
With several images one channel's pixels are not one row, so those stay convolutions; so
do NHWC ones, whose conv path measured faster than the matmul on ResNet-50's 1x1 shapes
(e.g. 101 against 85 GFLOP/s at 7x7, 512 -> 2048 channels).

The reshapes are views (collapse_shape / expand_shape of contiguous dims); a zero fill of
the output is rebuilt on the collapsed output, so the matmul's schedule fuses it.
"""

from __future__ import annotations

import math

from mlir import ir
from mlir.dialects import linalg, tensor

from mlirtune.ir.roots import is_padded

NCHW = "linalg.conv_2d_nchw_fchw"
# Reassociations of the input [1, C, H, W] -> [C, H*W], the filter [F, C, 1, 1] -> [F, C]
# and the output [1, F, H, W] -> [F, H*W].
IMAGE, FILTER, OUTPUT = [[0, 1], [2, 3]], [[0], [1, 2, 3]], [[0, 1], [2, 3]]


def pointwise_convs_as_matmuls(root: ir.Operation) -> int:
    """Rewrite every pointwise NCHW convolution nested in `root` (a module or function) in
    place; returns how many were rewritten."""
    convs: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if is_pointwise(op):
            convs.append(op)
        return ir.WalkResult.ADVANCE

    root.walk(visit)
    for op in convs:
        _rewrite(op)
    return len(convs)


def is_pointwise(op: ir.Operation) -> bool:
    """A static NCHW 1x1 conv of one image with unit strides, reading its input unpadded."""
    if op.name != NCHW:
        return False
    image, kernel, out = (ir.ShapedType(v.type) for v in op.operands)
    if not all(t.has_static_shape for t in (image, kernel, out)):
        return False
    strides = list(ir.DenseIntElementsAttr(op.attributes["strides"]))
    unpadded = not is_padded(op.operands[0])
    return kernel.shape[2:] == [1, 1] and strides == [1, 1] and image.shape[0] == 1 and unpadded


def collapsed(value: ir.Value, groups: list[list[int]]) -> ir.Value:
    """`value` with each group of its dims collapsed into one (a view)."""
    shape = ir.ShapedType(value.type).shape
    sizes = [math.prod(shape[d] for d in group) for group in groups]
    element = ir.ShapedType(value.type).element_type
    return tensor.collapse_shape(ir.RankedTensorType.get(sizes, element), value, groups)


def _collapsed_init(init: ir.Value, groups: list[list[int]]) -> ir.Value:
    """The output collapsed; a linalg.fill of it becomes a fill of the collapsed tensor."""
    owner = init.owner
    if isinstance(owner, ir.OpView) and owner.name == "linalg.fill":
        value, target = owner.operands
        return linalg.fill(value, outs=[collapsed(target, groups)])
    return collapsed(init, groups)


def _rewrite(op: ir.Operation) -> None:
    image, kernel, init = op.operands
    out_type = ir.RankedTensorType(op.results[0].type)
    with ir.InsertionPoint(op), op.location:
        weights, pixels = collapsed(kernel, FILTER), collapsed(image, IMAGE)
        product = linalg.matmul(weights, pixels, outs=[_collapsed_init(init, OUTPUT)])
        result = tensor.expand_shape(out_type, product, OUTPUT, [], list(out_type.shape))
    op.results[0].replace_all_uses_with(result)
    fill = init.owner
    op.erase()
    if isinstance(fill, ir.OpView) and fill.name == "linalg.fill" and not list(init.uses):
        fill.operation.erase()
