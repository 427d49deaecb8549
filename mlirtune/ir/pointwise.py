"""Pointwise (1x1, unit-stride, unpadded) convolutions rewritten as matmuls on reshaped views,
so that the contraction family's packed GEMM schedules them:

- NHWC / HWCF: O[N*H*W, F] = I[N*H*W, C] @ K[C, F], for any batch;
- NCHW / FCHW with one image: O[F, H*W] = K[F, C] @ I[C, H*W] (with several images the
  pixels of one channel are not one row, so those stay convolutions).

The reshapes are views (collapse_shape / expand_shape of contiguous dims); a zero fill of
the output is rebuilt on the collapsed output, so the matmul's schedule fuses it.
"""

from __future__ import annotations

import math

from mlir import ir
from mlir.dialects import linalg, tensor

NHWC, NCHW = "linalg.conv_2d_nhwc_hwcf", "linalg.conv_2d_nchw_fchw"
# (input, filter, output) reassociations and whether the filter is the matmul's A.
REASSOCIATIONS = {
    NHWC: ([[0, 1, 2], [3]], [[0, 1, 2], [3]], [[0, 1, 2], [3]], False),
    NCHW: ([[0, 1], [2, 3]], [[0], [1, 2, 3]], [[0, 1], [2, 3]], True),
}


def pointwise_convs_as_matmuls(root: ir.Operation) -> int:
    """Rewrite every pointwise convolution nested in `root` (a module or function) in
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
    """A static 1x1 conv with unit strides whose output pixels are the input's (an NCHW one
    with a single image), reading its input unpadded."""
    if op.name not in REASSOCIATIONS:
        return False
    image, kernel, out = (ir.ShapedType(v.type) for v in op.operands)
    if not all(t.has_static_shape for t in (image, kernel, out)):
        return False
    filter_hw = kernel.shape[:2] if op.name == NHWC else kernel.shape[2:]
    strides = list(ir.DenseIntElementsAttr(op.attributes["strides"]))
    single_image = op.name == NHWC or image.shape[0] == 1
    padded = getattr(op.operands[0].owner, "name", "") == "tensor.pad"
    return filter_hw == [1, 1] and strides == [1, 1] and single_image and not padded


def _collapsed(value: ir.Value, groups: list[list[int]]) -> ir.Value:
    shape = ir.ShapedType(value.type).shape
    sizes = [math.prod(shape[d] for d in group) for group in groups]
    element = ir.ShapedType(value.type).element_type
    return tensor.collapse_shape(ir.RankedTensorType.get(sizes, element), value, groups)


def _collapsed_init(init: ir.Value, groups: list[list[int]]) -> ir.Value:
    """The output collapsed; a linalg.fill of it becomes a fill of the collapsed tensor."""
    owner = init.owner
    if isinstance(owner, ir.OpView) and owner.name == "linalg.fill":
        value, target = owner.operands
        return linalg.fill(value, outs=[_collapsed(target, groups)])
    return _collapsed(init, groups)


def _rewrite(op: ir.Operation) -> None:
    image_groups, kernel_groups, out_groups, filter_first = REASSOCIATIONS[op.name]
    image, kernel, init = op.operands
    out_type = ir.RankedTensorType(op.results[0].type)
    with ir.InsertionPoint(op), op.location:
        pixels = _collapsed(image, image_groups)
        weights = _collapsed(kernel, kernel_groups)
        a, b = (weights, pixels) if filter_first else (pixels, weights)
        product = linalg.matmul(a, b, outs=[_collapsed_init(init, out_groups)])
        result = tensor.expand_shape(out_type, product, out_groups, [], list(out_type.shape))
    op.results[0].replace_all_uses_with(result)
    fill = init.owner
    op.erase()
    if isinstance(fill, ir.OpView) and fill.name == "linalg.fill" and not list(init.uses):
        fill.operation.erase()
