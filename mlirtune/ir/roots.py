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
            return OpInfo("matmul", dims, dtypes, op.name)
    if _has_reduction(op):
        return OpInfo("reduction", _rows_cols(loops), dtypes, op.name)
    return None


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


def _has_reduction(op: ir.Operation) -> bool:
    if "iterator_types" not in op.attributes:
        return False
    reduction = ir.Attribute.parse("#linalg.iterator_type<reduction>")
    return any(a == reduction for a in ir.ArrayAttr(op.attributes["iterator_types"]))


def _rows_cols(loops: list[int]) -> dict[str, int]:
    rows = _product(loops[:-1]) if len(loops) > 1 else 1
    return {"ROWS": rows, "COLS": loops[-1]}


def _product(values) -> int:
    result = 1
    for v in values:
        result *= int(v)
    return result
