"""Bring memref root ops to tensors, for schedules that need tensor semantics.

A payload written on memrefs (`linalg.generic ins(%a : memref<..>) outs(%c : memref<..>)`)
cannot be tiled with fusion or reduction splitting: those transforms need values, not
buffers. Each such root op is rebuilt on tensors: its memref operands are viewed with
`bufferization.to_tensor restrict`, the same linalg op (attributes and body) computes on the
views, and each result is written back with `materialize_in_destination`, which one-shot
bufferization turns back into in-place writes. `restrict` promises that the view is the only
tensor over that buffer, so an op is brought to tensors only when that promise holds;
otherwise it stays on memrefs and the caller lowers the payload without its schedules.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import bufferization

from mlirtune.interfaces.lowering import MemrefRoot
from mlirtune.ir.context import describe_location
from mlirtune.ir.inspect import op_attributes
from mlirtune.ir.roots import ROOT_ATTRIBUTE

# Ops that already view a buffer as a tensor (or write one into it): a second restrict view
# of the same buffer would break the promise `restrict` makes.
TENSOR_VIEWS = {
    "bufferization.to_tensor",
    "bufferization.to_buffer",
    "bufferization.materialize_in_destination",
}
# Defining ops of buffers that alias nothing else (function arguments count as well).
FRESH_BUFFERS = {"memref.alloc", "memref.alloca"}


def memref_roots(module: ir.Module) -> list[ir.Operation]:
    """Annotated root ops (mlirtune.ir.roots) whose operands are buffers, in program order."""
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if ROOT_ATTRIBUTE in op.attributes and any(
            isinstance(v.type, ir.MemRefType) for v in op.operands
        ):
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


def tensorize_roots(module: ir.Module) -> list[MemrefRoot]:
    """Rebuild every memref root op on tensors, all or none: if one cannot be (see `_obstacle`),
    none is changed and each record says why. Returns one record per memref root."""
    ops = memref_roots(module)
    obstacles = [_obstacle(op, ops) for op in ops]
    if any(obstacles):
        return [
            _record(op, False, reason or "another root op could not be brought to tensors")
            for op, reason in zip(ops, obstacles, strict=True)
        ]
    records = [_record(op, True) for op in ops]
    for op in ops:
        _rebuild_on_tensors(op)
    return records


def _record(op: ir.Operation, tensorized: bool, reason: str = "") -> MemrefRoot:
    kind = ir.StringAttr(op.attributes[ROOT_ATTRIBUTE]).value
    return MemrefRoot(op.name, describe_location(op.location), kind, tensorized, reason)


def _obstacle(op: ir.Operation, roots: list[ir.Operation]) -> str:
    """Why `op` cannot be rebuilt on tensors ("" when it can)."""
    parent = op.parent
    if parent is None or parent.operation.name != "func.func":
        where = parent.operation.name if parent is not None else "no parent"
        return f"it is nested in {where}, not directly in a function body"
    if len(op.results) or len(op.regions) != 1:
        return "it is not a linalg op on buffers (it has results or no single body)"
    if not all(isinstance(v.type, ir.MemRefType) for v in _shaped_operands(op)):
        return "it mixes tensor and memref operands"
    others = [r.operation for r in roots if r.operation != op.operation]
    for value in _distinct(_shaped_operands(op)):
        name = value.get_name()
        if not _is_fresh(value):
            return f"operand {name} is a view of another buffer (aliasing unknown)"
        for use in value.uses:
            user = use.owner.operation
            if user.name in TENSOR_VIEWS:
                return f"operand {name} is already viewed as a tensor ({user.name})"
            if user in others:
                return f"operand {name} is shared with another root op ({user.name})"
    return ""


def _shaped_operands(op: ir.Operation) -> list[ir.Value]:
    return [v for v in op.operands if isinstance(v.type, ir.ShapedType)]


def _distinct(values: list[ir.Value]) -> list[ir.Value]:
    unique: list[ir.Value] = []
    for value in values:
        if value not in unique:
            unique.append(value)
    return unique


def _is_fresh(value: ir.Value) -> bool:
    """A function argument or a fresh allocation, not a view (subview, cast, ...)."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return owner.owner.operation.name == "func.func"
    return owner.operation.name in FRESH_BUFFERS


def _init_count(op: ir.Operation) -> int:
    """How many trailing operands are outputs (DPS inits): linalg's operand segments, or
    the last operand for ops with a single init and no segments."""
    if "operandSegmentSizes" in op.attributes:
        return list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))[-1]
    return 1


def _rebuild_on_tensors(op: ir.Operation) -> None:
    """Replace the memref op by to_tensor views, the same op on tensors, and writes back."""
    operands = list(op.operands)
    n_inits = _init_count(op)
    inits = operands[len(operands) - n_inits :]
    with op.location, ir.InsertionPoint(op):
        views: dict[ir.Value, ir.Value] = {}
        for value in _distinct(_shaped_operands(op)):
            memref = ir.MemRefType(value.type)
            tensor = ir.RankedTensorType.get(list(memref.shape), memref.element_type)
            views[value] = bufferization.to_tensor(
                tensor, value, restrict=True, writable=value in inits
            )
        attributes = op_attributes(op)
        rebuilt = ir.Operation.create(
            op.name,
            results=[views[v].type for v in inits],
            operands=[views.get(v, v) for v in operands],
            attributes=attributes,
            regions=1,
        )
        _move_body(op.regions[0], rebuilt.regions[0])
        for result, destination in zip(rebuilt.results, inits, strict=True):
            bufferization.materialize_in_destination(
                None, result, destination, restrict=True, writable=True
            )
    op.erase()


def _move_body(source: ir.Region, target: ir.Region) -> None:
    """Move the single block of `source` (its ops and arguments) into empty `target`."""
    old = source.blocks[0]
    new = target.blocks.append(*old.arguments.types)
    for old_arg, new_arg in zip(old.arguments, new.arguments, strict=True):
        old_arg.replace_all_uses_with(new_arg)
    for inner in list(old.operations):
        new.append(inner)
