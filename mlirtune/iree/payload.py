"""A workload's payload as IREE takes it: a function on tensors that returns its outputs.

This project's payloads take every argument as a memref, read through
`bufferization.to_tensor` and written with `bufferization.materialize_in_destination`.
IREE's input is value semantics: here each memref argument becomes a tensor argument (the
outputs too, for payloads that read their destination), and the values materialized into
the outputs are returned, in argument order. The rewrite goes through the bindings; the
module is then printed for `iree-compile`.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import func

from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.workload import Workload
from mlirtune.ir.context import new_context
from mlirtune.ir.inspect import find_function


def tensor_payload(workload: Workload) -> str:
    """The assembly of `workload`'s payload with its entry function on tensors."""
    with new_context(), ir.Location.unknown():
        module = workload.payload_module()
        to_tensors(find_function(module, workload.entry), workload.name)
        module.operation.verify()
        return str(module)


def to_tensors(function: func.FuncOp, owner: str) -> None:
    """Rewrite `function` in place: memref arguments to tensor arguments, stores into them
    to returned values."""
    block = function.entry_block
    memrefs = list(block.arguments)
    if not all(isinstance(a.type, ir.MemRefType) for a in memrefs):
        raise UsageError(
            f"{owner}: IREE takes payloads whose arguments are all memrefs", stage="iree"
        )
    tensors = [
        block.add_argument(ir.RankedTensorType.get(a.type.shape, a.type.element_type), a.location)
        for a in memrefs
    ]
    stored: dict[int, ir.Value] = {}
    for op in list(block.operations):
        name = op.operation.name
        if name == "bufferization.to_tensor":
            position = _argument_position(op.operands[0], memrefs, owner)
            op.results[0].replace_all_uses_with(tensors[position])
            op.operation.erase()
        elif name == "bufferization.materialize_in_destination":
            stored[_argument_position(op.operands[1], memrefs, owner)] = op.operands[0]
            op.operation.erase()
        elif name == "func.return":
            with ir.InsertionPoint(op):
                func.ReturnOp([stored[p] for p in sorted(stored)])
            op.operation.erase()
    for _ in memrefs:
        block.erase_argument(0)
    results = [stored[p].type for p in sorted(stored)]
    function.attributes["function_type"] = ir.TypeAttr.get(
        ir.FunctionType.get([t.type for t in tensors], results)
    )
    if "llvm.emit_c_interface" in function.attributes:
        del function.attributes["llvm.emit_c_interface"]


def _argument_position(value: ir.Value, arguments: list[ir.Value], owner: str) -> int:
    for position, argument in enumerate(arguments):
        if value == argument:
            return position
    raise UsageError(
        f"{owner}: a payload IREE takes reads and writes its arguments directly "
        "(to_tensor / materialize_in_destination of an argument)",
        stage="iree",
    )
