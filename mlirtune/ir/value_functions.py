"""An entry function in either of the two forms payloads come in, rewritten into the other.

- Destination form (this project's payloads): every argument a memref, read through
  `bufferization.to_tensor`, the outputs written with `bufferization.materialize_in_destination`
  into the trailing arguments; nothing returned.
- Value form (IREE's input, and many hand-written files): tensor arguments, the outputs
  returned.

`to_values` turns the first into the second (every memref argument becomes a tensor
argument, the outputs' too, for payloads that read their destination); `to_destinations`
the second into the first (one memref argument per result, after the inputs). Both work
in place, through the bindings.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import bufferization, func

from mlirtune.interfaces.errors import UsageError


def to_values(function: func.FuncOp, owner: str) -> None:
    """Destination form to value form, in place."""
    block = function.entry_block
    memrefs = list(block.arguments)
    if not all(isinstance(a.type, ir.MemRefType) for a in memrefs):
        raise UsageError(f"{owner}: a destination-form payload takes memrefs", stage="inspect")
    tensors = [
        block.add_argument(ir.RankedTensorType.get(a.type.shape, a.type.element_type), a.location)
        for a in memrefs
    ]
    stored: dict[int, ir.Value] = {}
    for op in list(block.operations):
        name = op.operation.name
        if name == "bufferization.to_tensor":
            position = _position(op.operands[0], memrefs, owner)
            op.results[0].replace_all_uses_with(tensors[position])
            op.operation.erase()
        elif name == "bufferization.materialize_in_destination":
            stored[_position(op.operands[1], memrefs, owner)] = op.operands[0]
            op.operation.erase()
        elif name == "func.return":
            with ir.InsertionPoint(op):
                func.ReturnOp([stored[p] for p in sorted(stored)])
            op.operation.erase()
    for _ in memrefs:
        block.erase_argument(0)
    results = [stored[p].type for p in sorted(stored)]
    _retype(function, [t.type for t in tensors], results)


def to_destinations(function: func.FuncOp) -> None:
    """Value form to destination form, in place: the inputs' memrefs, then one per result."""
    block = function.entry_block
    inputs = list(block.arguments)
    outputs = list(function.type.results)
    memrefs = [block.add_argument(_memref(a.type), a.location) for a in inputs]
    destinations = [block.add_argument(_memref(t), function.location) for t in outputs]
    with ir.InsertionPoint.at_block_begin(block), function.location:
        for argument, memref in zip(inputs, memrefs, strict=True):
            value = bufferization.to_tensor(argument.type, memref, restrict=True)
            argument.replace_all_uses_with(value)
    for op in list(block.operations):
        if op.operation.name == "func.return":
            with ir.InsertionPoint(op), op.location:
                for value, destination in zip(op.operands, destinations, strict=True):
                    bufferization.materialize_in_destination(
                        None, value, destination, restrict=True, writable=True
                    )
                func.ReturnOp([])
            op.operation.erase()
    for _ in inputs:
        block.erase_argument(0)
    _retype(function, [m.type for m in memrefs + destinations], [])


def _memref(tensor: ir.Type) -> ir.MemRefType:
    shaped = ir.RankedTensorType(tensor)
    return ir.MemRefType.get(shaped.shape, shaped.element_type)


def _retype(function: func.FuncOp, inputs: list[ir.Type], results: list[ir.Type]) -> None:
    function.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, results))


def _position(value: ir.Value, arguments: list[ir.Value], owner: str) -> int:
    for position, argument in enumerate(arguments):
        if value == argument:
            return position
    raise UsageError(
        f"{owner}: a destination-form payload reads and writes its arguments directly "
        "(to_tensor / materialize_in_destination of an argument)",
        stage="inspect",
    )
