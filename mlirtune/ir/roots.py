"""Root ops as the IR carries them, and what their schedules read off a linalg op.

A root op is the contraction, convolution or reduction a schedule is built around. Each
schedule family recognises the kinds it owns (mlirtune.schedules.roots asks them); a root
is annotated once with `mlirtune.root = "<kind>"`, and schedules, the tuner and spec
matchers recognise it by that attribute instead of re-deriving it. The helpers here read
loop sizes, reductions, padding and element types through the bindings.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from mlir import ir
from mlir.dialects import linalg

from mlirtune.ir.maps import identity_map

ROOT_ATTRIBUTE = "mlirtune.root"
# Marks the loops of a scan built at import (mlirtune.torch.scans): those left outermost
# make a dispatch of their own, lowered as they are.
SCAN_ATTRIBUTE = "mlirtune.scan"


def has_scans(module: ir.Module) -> bool:
    """Whether a loop of `module` is a scan's (SCAN_ATTRIBUTE)."""
    found = False

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal found
        found = found or SCAN_ATTRIBUTE in op.attributes
        return ir.WalkResult.INTERRUPT if found else ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


def is_padded(value: ir.Value) -> bool:
    """Whether a tensor.pad produces `value` (a schedule then materialises the padding)."""
    return getattr(value.owner, "name", "") == "tensor.pad"


def padding(value: ir.Value, side: str = "static_low") -> int:
    """The innermost dim's padding before (`side` "static_low") or after ("static_high")
    `value` when a tensor.pad (seen through reshapes) produces it, else 0: the rows a
    schedule copies into the padded buffer are that much narrower than the pooled input."""
    owner = value.owner
    while isinstance(owner, ir.OpView) and owner.name in {"tensor.collapse_shape"}:
        owner = owner.operands[0].owner
    if isinstance(owner, ir.OpView) and owner.name == "tensor.pad":
        return int(list(owner.attributes[side])[-1])
    return 0


def is_static(op: ir.Operation) -> bool:
    """Whether every operand of `op` has a static shape."""
    return all(isinstance(v.type, ir.ShapedType) and v.type.has_static_shape for v in op.operands)


def element_types(op: ir.Operation) -> tuple[str, ...]:
    """The element type of each operand, as MLIR prints it (f32, bf16, i8)."""
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


def indexing_maps(op: ir.Operation) -> list[ir.AffineMap]:
    """The op's indexing maps, inputs first, then its outputs."""
    return [ir.AffineMapAttr(a).value for a in linalg.get_indexing_maps(op)]


def is_windowed(op: ir.Operation) -> bool:
    """Whether an operand of the linalg op `op` is read through a window (`oh + kh`,
    `2 * ow`): an index that is neither one loop's nor a constant, as in convolutions and
    pooling."""
    maps = linalg.get_indexing_maps(op)
    return maps is not None and any(
        not isinstance(expr, ir.AffineDimExpr | ir.AffineConstantExpr)
        for amap in maps
        for expr in ir.AffineMapAttr(amap).value.results
    )


def has_reduction(op: ir.Operation) -> bool:
    """Whether a linalg op has a reduction loop."""
    if "iterator_types" not in op.attributes:
        return False
    reduction = ir.Attribute.parse("#linalg.iterator_type<reduction>")
    return any(a == reduction for a in ir.ArrayAttr(op.attributes["iterator_types"]))


def reduction_loops(op: ir.Operation) -> list[int]:
    """The positions of `op`'s reduction loops."""
    reduction = ir.Attribute.parse("#linalg.iterator_type<reduction>")
    iterators = ir.ArrayAttr(op.attributes["iterator_types"])
    return [i for i, a in enumerate(iterators) if a == reduction]


def rows_cols(loops: list[int]) -> dict[str, int]:
    """ROWS (the product of every loop but the innermost) and COLS (the innermost)."""
    rows = product(loops[:-1]) if len(loops) > 1 else 1
    return {"ROWS": rows, "COLS": loops[-1]}


def product(values: Iterable[int]) -> int:
    """The product of loop sizes, as a Python int."""
    return math.prod(int(v) for v in values)


def reads_aligned(op: ir.Operation, value: ir.Value) -> bool:
    """Whether element-wise `op` (a linalg.generic without reductions) reads `value` and
    writes its result at the same indices: its loops are the value's dims, in order."""
    if op.name != "linalg.generic" or has_reduction(op):
        return False
    maps = indexing_maps(op)
    reads = [m for v, m in zip(op.operands, maps, strict=True) if v == value]
    identity = identity_map(len(ir.ShapedType(value.type).shape))
    return bool(reads) and all(m == identity for m in [*reads, maps[-1]])


def stored_epilogue(op: ir.Operation) -> bool:
    """Whether `op`'s result is read, alone, by a chain of element-wise ops that each
    `reads_aligned` the one before and whose last result the payload stores (an
    activation after a convolution)."""
    value, length = op.results[0], 0
    while len(users := [use.owner for use in value.uses]) == 1:
        if users[0].name == "bufferization.materialize_in_destination":
            return length > 0
        if not reads_aligned(users[0].operation, value):
            return False
        value, length = users[0].results[0], length + 1
    return False
