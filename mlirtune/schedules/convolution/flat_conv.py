"""Unit-stride NCHW convolutions computed over each output plane as one row ("flat rows").

With p = oh * IW + ow (IW the input row, padding included), the input a unit-stride conv
reads for output (oh, ow) and tap (kh, kw) sits at (oh + dh*kh) * IW + ow + dw*kw =
p + dh*IW*kh + dw*kw of the flattened input plane: an affine function of p. So the conv is
a linalg.generic over p in [0, (OH - 1) * IW + OW), one long row per plane, whose register
tiles run across row ends: the IW - OW positions past each output row's end are computed
and dropped, and a row of OW pixels no longer ends in a narrow vector (56 = 32 + 16 + 8
pixels a row left a third of the conv's time in its 8-wide piece). A copy then crops the
planes [OH, IW] back to [OH, OW] (an add, where the conv accumulates into a tensor that is
not a fill, such as a broadcast bias).

Registered as the descriptor step `flatten-conv-rows` (mlirtune.pipeline.steps); it runs
before the convolution family's schedule, which then tiles the generic (nchw_flat.py).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, linalg, tensor

from mlirtune.interfaces.errors import UsageError
from mlirtune.ir.context import describe_location
from mlirtune.ir.maps import generic
from mlirtune.ir.pointwise import NCHW, collapsed
from mlirtune.ir.roots import ROOT_ATTRIBUTE

# Mark the generic that computes a conv's planes as rows and the op that crops them (the
# schedule matches them by these).
FLAT_ROWS_ATTRIBUTE = "mlirtune.flat_rows"
FLAT_CROP_ATTRIBUTE = "mlirtune.flat_crop"
PLANES = [[0], [1], [2, 3]]  # [N, C, H, W] -> [N, C, H*W]


def flatten_conv_rows(module: ir.Module, enabled: int = 1) -> None:
    """Rewrite every root NCHW conv of `module` in place when `enabled` (the convolution
    family's FLAT_ROWS knob); a conv this cannot take is a UsageError naming why."""
    if not enabled:
        return
    convs: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == NCHW and ROOT_ATTRIBUTE in op.attributes:
            convs.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    for op in convs:
        _flatten(op)


def flat_length(out_h: int, out_w: int, in_w: int) -> int:
    """Positions of one output plane computed as a row: the last row ends at its OW-th."""
    return (out_h - 1) * in_w + out_w


def _flatten(op: ir.Operation) -> None:
    image, kernel, init = op.operands
    n, _, _, in_w = ir.ShapedType(image.type).shape
    f = ir.ShapedType(kernel.type).shape[0]
    out_type = ir.RankedTensorType(op.results[0].type)
    _, _, out_h, out_w = out_type.shape
    strides = list(ir.DenseIntElementsAttr(op.attributes["strides"]))
    dh, dw = list(ir.DenseIntElementsAttr(op.attributes["dilations"]))
    why = ""
    if strides != [1, 1]:
        why = f"strides {strides}"
    elif not isinstance(out_type.element_type, ir.FloatType):
        why = f"element type {out_type.element_type}"
    if why:
        raise UsageError(
            f"FLAT_ROWS=1 needs a unit-stride float conv; the conv at "
            f"{describe_location(op.location)} has {why}",
            stage="flatten-conv-rows",
        )
    element = out_type.element_type
    fill = init.owner if getattr(init.owner, "name", "") == "linalg.fill" else None
    length = flat_length(out_h, out_w, in_w)
    d = [ir.AffineDimExpr.get(i) for i in range(6)]  # n, f, p, c, kh, kw
    maps = [
        ir.AffineMap.get(6, 0, [d[0], d[3], d[2] + d[4] * (dh * in_w) + d[5] * dw]),
        ir.AffineMap.get(6, 0, [d[1], d[3], d[4], d[5]]),
        ir.AffineMap.get(6, 0, [d[0], d[1], d[2]]),
    ]
    iterators = ["parallel"] * 3 + ["reduction"] * 3

    def multiply_add(x: ir.Value, w: ir.Value, acc: ir.Value) -> ir.Value:
        x, w = (arith.extf(element, v) if v.type != element else v for v in (x, w))
        return arith.addf(acc, arith.mulf(x, w))

    with ir.InsertionPoint(op), op.location:
        planes = tensor.empty([n, f, out_h * in_w], element)
        rows = _slice(planes, [n, f, length])
        start = fill.operands[0] if fill else arith.constant(element, 0.0)
        rows_init = linalg.fill(start, outs=[rows])
        flat = generic([collapsed(image, PLANES), kernel], rows_init, maps, iterators, multiply_add)
        flat.owner.attributes[ROOT_ATTRIBUTE] = op.attributes[ROOT_ATTRIBUTE]
        flat.owner.attributes[FLAT_ROWS_ATTRIBUTE] = ir.UnitAttr.get()
        whole = tensor.insert_slice(flat, planes, [], [], [], [0, 0, 0], [n, f, length], [1] * 3)
        wide_type = ir.RankedTensorType.get([n, f, out_h, in_w], element)
        wide = tensor.expand_shape(wide_type, whole, PLANES, [], list(wide_type.shape))
        result = _crop(_slice(wide, out_type.shape), fill.operands[1] if fill else init, fill)
        result.owner.attributes[FLAT_CROP_ATTRIBUTE] = ir.UnitAttr.get()
    op.results[0].replace_all_uses_with(result)
    op.erase()
    if fill and not list(init.uses):
        fill.operation.erase()


def _crop(planes: ir.Value, init: ir.Value, fill: ir.OpView | None) -> ir.Value:
    """The conv's result from its cropped `planes`: copied into the filled tensor's
    destination, or added to an `init` that is not a fill (e.g. a broadcast bias)."""
    if fill:
        return linalg.copy(planes, outs=[init])
    identity = ir.AffineMap.get_identity(4)
    return generic(
        [planes], init, [identity] * 2, ["parallel"] * 4, lambda x, acc: arith.addf(acc, x)
    )


def _slice(value: ir.Value, sizes: list[int]) -> ir.Value:
    """The leading `sizes` of `value` (zero offsets, unit strides)."""
    element = ir.ShapedType(value.type).element_type
    rank = len(sizes)
    result = ir.RankedTensorType.get(sizes, element)
    return tensor.extract_slice(result, value, [], [], [], [0] * rank, sizes, [1] * rank)
