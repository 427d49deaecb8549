"""Root ops: the contractions, convolutions and reductions a schedule is built around.

They are found once through the bindings (linalg's contraction/convolution inference) and
annotated with `mlirtune.root = "<kind>"`; schedules, the tuner and spec matchers recognise
them by that attribute instead of re-deriving them.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import linalg

from mlirtune.interfaces.op import OpInfo

ROOT_ATTRIBUTE = "mlirtune.root"


def find_roots(module: ir.Module) -> list[tuple[ir.Operation, OpInfo]]:
    """Every root op in the module with its description, in program order."""
    roots: list[tuple[ir.Operation, OpInfo]] = []
    functions = [op for op in module.body.operations if op.operation.name == "func.func"]

    def visit(op: ir.Operation) -> ir.WalkResult:
        info = describe(op)
        if info is not None:
            roots.append((op, info))
        return ir.WalkResult.ADVANCE

    for function in functions:
        function.operation.walk(visit)
    convs = [info for _, info in roots if info.kind == "conv2d"]
    if len(convs) > 1:  # e.g. a strided transposed conv's phases, scheduled as one
        for info in convs:
            info.attributes["convs"] = len(convs)
    if not roots:
        # A purely element-wise payload: its last linalg op stands for the whole chain.
        elementwise: list[ir.Operation] = []
        for function in functions:
            function.operation.walk(
                lambda op: (
                    elementwise.append(op) or ir.WalkResult.ADVANCE
                    if op.name == "linalg.generic" and _static(op)
                    else ir.WalkResult.ADVANCE
                )
            )
        if elementwise:
            op = elementwise[-1]
            loops = loop_sizes(op)
            # The rank tells the schedule how many loops to tile (a 1-D op has no rows).
            info = OpInfo(
                "elementwise", _rows_cols(loops), _dtypes(op), op.name, {"rank": len(loops)}
            )
            roots.append((op, info))
    return roots


def summed_terms(op: OpInfo) -> int:
    """Terms each output element of a root op sums: K of a contraction, C*KH*KW of a
    convolution, a row of a reduction (it scales verification tolerances)."""
    d = op.dims
    if op.kind in ("matmul", "batch_matmul"):
        return d["K"]
    if op.kind == "conv2d":
        return d["C"] * d["KH"] * d["KW"]
    return d.get("COLS", 1)


def root_flops(op: OpInfo) -> int:
    """A root op's FLOPs: 2 per multiply-add of a contraction or convolution, one per
    element read by another (a reduction's rows)."""
    d = op.dims
    if op.kind in ("matmul", "batch_matmul"):
        return 2 * d.get("B", 1) * d["M"] * d["N"] * d["K"]
    if op.kind == "conv2d":
        return 2 * d["N"] * d["OH"] * d["OW"] * d["F"] * d["KH"] * d["KW"] * d["C"]
    return d.get("ROWS", 1) * d.get("COLS", 1)


def annotate_roots(module: ir.Module) -> list[OpInfo]:
    """Mark each root op with `mlirtune.root`; returns their descriptions."""
    infos = []
    for op, info in find_roots(module):
        op.attributes[ROOT_ATTRIBUTE] = ir.StringAttr.get(info.kind)
        infos.append(info)
    return infos


def describe(op: ir.Operation) -> OpInfo | None:
    """OpInfo for a root op, None for anything else (fills, copies, element-wise consumers)."""
    if not op.name.startswith("linalg.") or op.name in {"linalg.fill", "linalg.yield"}:
        return None
    if not _static(op):
        return None
    dtypes = _dtypes(op)
    loops = loop_sizes(op)
    if loops is None:
        return None
    if op.name.startswith("linalg.pooling_"):
        return _pooling(op, loops, dtypes)
    if op.name == "linalg.depthwise_conv_2d_nchw_chw":
        return _depthwise(op, loops, dtypes)
    conv = linalg.infer_convolution_dimensions(op)
    if conv is not None and len(conv.output_image) == 2 and len(conv.filter_loop) == 2:
        (n,), (oh, ow), (f,), (kh, kw), (c,) = (
            conv.batch,
            conv.output_image,
            conv.output_channel,
            conv.filter_loop,
            conv.input_channel,
        )
        dims = {
            name: loops[d]
            for name, d in zip(
                ("N", "OH", "OW", "F", "KH", "KW", "C"), (n, oh, ow, f, kh, kw, c), strict=True
            )
        }
        attrs = {
            "stride": int(next(iter(conv.strides))),
            "dilation": int(next(iter(conv.dilations))),
        }
        if op.name == "linalg.conv_2d_nchw_fchw":
            attrs.update(_channels_first(op, conv))
        elif is_padded(op.operands[0]):
            attrs["padded"] = 1
        return OpInfo("conv2d", dims, dtypes, op.name, attrs)
    contraction = linalg.infer_contraction_dimensions(op)
    if contraction is not None and len(contraction.m) == 1 and len(contraction.n) == 1:
        dims = {"M": loops[contraction.m[0]], "N": loops[contraction.n[0]]}
        dims["K"] = _product(loops[k] for k in contraction.k)
        if len(contraction.batch) == 1:
            return OpInfo(
                "batch_matmul", {"B": loops[contraction.batch[0]], **dims}, dtypes, op.name
            )
        if not contraction.batch:
            attrs = _layout(op, contraction)
            uses = [use.owner.name for result in op.results for use in result.uses]
            if "tensor.expand_shape" in uses:
                attrs["reshaped_output"] = 1  # a pointwise conv's (mlirtune.ir.pointwise)
            if "linalg.generic" in uses:
                attrs["epilogue"] = 1  # element-wise consumers (bias, ReLU) fused after it
            return OpInfo("matmul", dims, dtypes, op.name, attrs)
    if has_reduction(op):
        reduced = _reduction_loops(op)
        if len(reduced) == 1 and reduced[0] != len(loops) - 1:
            # One reduced loop with parallel loops inside it (a sum over a middle axis):
            # the reduction steps over whole rows of the inner loops, not along a row.
            (r,) = reduced
            dims = {"OUTER": _product(loops[:r]), "R": loops[r], "INNER": _product(loops[r + 1 :])}
            # Two outputs: an arg reduction (value and index, see workloads/reduce.py).
            segments = "operandSegmentSizes"  # [inputs, outputs] of a DPS op
            outputs = list(ir.DenseI32ArrayAttr(op.attributes[segments]))[-1]
            return OpInfo("axis_reduction", dims, dtypes, op.name, {"outputs": outputs})
        transcendentals = _transcendentals(op)
        attrs = {"transcendentals": transcendentals} if transcendentals else {}
        if len(loops) > 2:  # rows of rows (attention scores per head): the inner row loop
            attrs["rank"], attrs["inner_rows"] = len(loops), loops[-2]
        return OpInfo("reduction", _rows_cols(loops), dtypes, op.name, attrs)
    return None


# Math ops the host pipeline expands into a polynomial of some twenty vector ops each.
TRANSCENDENTALS = frozenset({"math.exp", "math.log", "math.log1p", "math.erf", "math.tanh"})


def _transcendentals(op: ir.Operation) -> int:
    """How many transcendental math ops the function around `op` holds (a softmax's exp):
    their expansions keep several values live per vector, which bounds the tile."""
    function = op.parent
    while function.name != "func.func":
        function = function.parent
    count = 0

    def visit(inner: ir.Operation) -> ir.WalkResult:
        nonlocal count
        count += inner.name in TRANSCENDENTALS
        return ir.WalkResult.ADVANCE

    function.walk(visit)
    return count


def _pooling(op: ir.Operation, loops: list[int], dtypes: tuple[str, ...]) -> OpInfo | None:
    """A named pooling op (its batch and channel dims are both conv "batch" dims): loops
    named N, C, OH, OW, KH, KW in the op's loop order (1-D: N, C, OW, KW; channels-last:
    N, OW, C, KW). `then_pool` marks one whose result, reshaped, feeds another pooling op
    (the (H, W) stage of a separable 3-D pool; the D stage follows it)."""
    conv = linalg.infer_convolution_dimensions(op)
    if conv is None or len(conv.batch) != 2 or len(conv.output_image) > 2:
        return None
    spatial = len(conv.output_image)
    names = {d: name for d, name in zip(conv.batch, ("N", "C"), strict=True)}
    names.update(zip(conv.output_image, ("OH", "OW")[-spatial:], strict=True))
    names.update(zip(conv.filter_loop, ("KH", "KW")[-spatial:], strict=True))
    dims = {names[d]: loops[d] for d in sorted(names)}
    then = _next_pooling(op)
    attrs = {
        "stride": int(list(conv.strides)[-1]),
        "dilation": int(list(conv.dilations)[-1]),
        "spatial": spatial,
        "then_pool": int(then is not None),
        "pad": _padding(op.operands[0]),
        "padded": int(is_padded(op.operands[0])),
    }
    if then is not None and is_padded(then.operands[0]):
        attrs["then_padded"] = 1  # the next stage (a 3-D pool's depth) reads a tensor.pad
    dims["IW"] = ir.ShapedType(op.operands[0].type).shape[-2 if "nwc" in op.name else -1]
    return OpInfo("pooling", dims, dtypes, op.name, attrs)


def _depthwise(op: ir.Operation, loops: list[int], dtypes: tuple[str, ...]) -> OpInfo:
    """A channels-first depthwise conv: loops N, OH, OW, C, KH, KW in the op's order, IW the
    (padded) input row; stride and dilation per dim, `pad` the input row's padding."""
    dims = dict(zip(("N", "OH", "OW", "C", "KH", "KW"), loops, strict=True))
    dims["IW"] = ir.ShapedType(op.operands[0].type).shape[-1]
    conv = linalg.infer_convolution_dimensions(op)
    (stride_h, stride_w), (dilation_h, dilation_w) = list(conv.strides), list(conv.dilations)
    attrs = {
        "stride_h": int(stride_h),
        "stride": int(stride_w),
        "dilation_h": int(dilation_h),
        "dilation": int(dilation_w),
        "pad": _padding(op.operands[0]),
        "padded": int(is_padded(op.operands[0])),
    }
    return OpInfo("depthwise", dims, dtypes, op.name, attrs)


def _channels_first(op: ir.Operation, conv) -> dict[str, int]:
    """What a channels-first (NCHW / FCHW) conv's schedule needs besides the NHWC names:
    `nchw` (its loops are N, F, OH, OW, C, KH, KW), the stride and dilation along the
    contiguous W, its input row `IW`, that row's zero padding `pad` on each side, and
    `padded` when a tensor.pad (along any dim) produces the input."""
    return {
        "nchw": 1,
        "stride_w": int(list(conv.strides)[-1]),
        "dilation_w": int(list(conv.dilations)[-1]),
        "IW": ir.ShapedType(op.operands[0].type).shape[-1],
        "pad": _padding(op.operands[0]),
        "padded": int(is_padded(op.operands[0])),
    }


def is_padded(value: ir.Value) -> bool:
    """Whether a tensor.pad produces `value` (a schedule then materialises the padding)."""
    return getattr(value.owner, "name", "") == "tensor.pad"


def _padding(value: ir.Value) -> int:
    """The innermost dim's padding of `value` when a tensor.pad (seen through reshapes)
    produces it, else 0: the rows a schedule copies into the padded buffer are that much
    narrower than the pooled input."""
    owner = value.owner
    while isinstance(owner, ir.OpView) and owner.name in {"tensor.collapse_shape"}:
        owner = owner.operands[0].owner
    if isinstance(owner, ir.OpView) and owner.name == "tensor.pad":
        return int(list(owner.attributes["static_low"])[-1])
    return 0


def _next_pooling(op: ir.Operation) -> ir.Operation | None:
    """The pooling op that `op`'s result reaches through reshapes and pads only, if any."""
    values = list(op.results)
    while values:
        for use in values.pop().uses:
            user = use.owner
            if user.name.startswith("linalg.pooling_"):
                return user
            if user.name in {"tensor.expand_shape", "tensor.collapse_shape", "tensor.pad"}:
                values.extend(user.results)
    return None


def _layout(op: ir.Operation, contraction) -> dict[str, int]:
    """Operands of a matmul stored transposed: `transpose_a` for A as [K, M] (its inner dim
    is an M loop), `transpose_b` for B as [N, K] (its inner dim a K loop); empty for the
    plain layout, so a plain matmul's description is unchanged."""
    maps = [ir.AffineMapAttr(a).value for a in linalg.get_indexing_maps(op)]
    inner = [m.results[-1] for m in maps[:2]]
    layout = {}
    if isinstance(inner[0], ir.AffineDimExpr) and inner[0].position in contraction.m:
        layout["transpose_a"] = 1
    if isinstance(inner[1], ir.AffineDimExpr) and inner[1].position in contraction.k:
        layout["transpose_b"] = 1
    return layout


def _static(op: ir.Operation) -> bool:
    return all(isinstance(v.type, ir.ShapedType) and v.type.has_static_shape for v in op.operands)


def _dtypes(op: ir.Operation) -> tuple[str, ...]:
    return tuple(str(ir.ShapedType(v.type).element_type) for v in op.operands)


def loop_sizes(op: ir.Operation) -> list[int] | None:
    """Loop sizes read off the indexing maps: each loop dim appears as a plain operand dim."""
    maps_attr = linalg.get_indexing_maps(op)
    if maps_attr is None:
        return None
    maps = [ir.AffineMapAttr(a).value for a in maps_attr]
    sizes: dict[int, int] = {}
    for value, amap in zip(op.operands, maps, strict=False):
        shape = ir.ShapedType(value.type).shape
        for position, expr in enumerate(amap.results):
            if isinstance(expr, ir.AffineDimExpr):
                sizes.setdefault(expr.position, shape[position])
    n_loops = maps[0].n_dims if maps else 0
    if len(sizes) != n_loops:
        return None
    return [sizes[d] for d in range(n_loops)]


def has_reduction(op: ir.Operation) -> bool:
    """Whether a linalg op has a reduction loop."""
    if "iterator_types" not in op.attributes:
        return False
    reduction = ir.Attribute.parse("#linalg.iterator_type<reduction>")
    return any(a == reduction for a in ir.ArrayAttr(op.attributes["iterator_types"]))


def _reduction_loops(op: ir.Operation) -> list[int]:
    reduction = ir.Attribute.parse("#linalg.iterator_type<reduction>")
    iterators = ir.ArrayAttr(op.attributes["iterator_types"])
    return [i for i, a in enumerate(iterators) if a == reduction]


def _rows_cols(loops: list[int]) -> dict[str, int]:
    rows = _product(loops[:-1]) if len(loops) > 1 else 1
    return {"ROWS": rows, "COLS": loops[-1]}


def _product(values) -> int:
    result = 1
    for v in values:
        result *= int(v)
    return result
