"""The rows a reduction dispatch is tiled by, and the ops that would leave them: what
keeps a softmax or a layer norm in one dispatch and a group norm's regrouping out of it."""

from __future__ import annotations

from mlir import ir

from mlirtune.ir.roots import has_reduction, loop_sizes

VIEWS = ("tensor.expand_shape", "tensor.collapse_shape")


def leaves_the_rows(group: list[ir.Operation], op: ir.Operation, kind: str | None) -> bool:
    """Whether `op` would leave the rows that the first reduction of `group` tiles it by: a
    reduction that yields other rows (a mean of a loss's per-row terms, across them), or
    an element-wise op over neither those rows nor their elements (a tensor divided by
    its norm, a reduction of all of it); or whether the first reduction would have rows
    that the group's element-wise ops were regrouped into (a group norm's [N, G, C/G*H*W]
    of an activation's [N, C, H, W]: the row tiles cannot fuse it through the reshape)."""
    reductions = [member for member in group if has_reduction(member)]
    if not reductions:
        return kind == "reduction" and any(regroups_rows(member) for member in group)
    rows = _nonunit(reductions[0].results[0].type)
    if kind == "reduction":
        return _nonunit(op.results[0].type) != rows
    if not is_elementwise(op):
        return False
    elements = [n for n in loop_sizes(reductions[0]) or [] if n != 1]
    return _nonunit(op.results[0].type) not in (rows, elements)


def _nonunit(tensor: ir.Type) -> list[int]:
    """A tensor's shape without its unit dims (a keepdim's)."""
    return [d for d in ir.ShapedType(tensor).shape if d != 1]


def regroups_rows(op: ir.Operation) -> bool:
    """Whether `op` is a reshape that splits or merges the innermost dim of more than one
    element, the rows a reduction dispatch is tiled by (not one that only adds or drops
    unit dims, as a keepdim reduction's does, nor one of the leading dims alone)."""
    if op.name not in VIEWS:
        return False
    source, result = _nonunit(op.operands[0].type), _nonunit(op.results[0].type)
    return source != result and source[-1:] != result[-1:]


def is_elementwise(op: ir.Operation) -> bool:
    """A linalg.generic without a reduction dim."""
    return op.name == "linalg.generic" and not has_reduction(op)
