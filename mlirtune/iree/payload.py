"""A workload's payload as IREE takes it: a function on tensors that returns its outputs.

This project's payloads are in destination form (memref arguments, outputs written in
place); IREE's input is value form. `mlirtune.ir.value_functions.to_values` rewrites the
entry function through the bindings; the module is then printed for `iree-compile`.
"""

from __future__ import annotations

from mlir import ir

from mlirtune.interfaces.workload import Workload
from mlirtune.ir.context import new_context
from mlirtune.ir.inspect import find_function
from mlirtune.ir.value_functions import to_values


def tensor_payload(workload: Workload) -> str:
    """The assembly of `workload`'s payload with its entry function in value form."""
    with new_context(), ir.Location.unknown():
        module = workload.payload_module()
        function = find_function(module, workload.entry)
        to_values(function, workload.name)
        if "llvm.emit_c_interface" in function.attributes:
            del function.attributes["llvm.emit_c_interface"]
        module.operation.verify()
        return str(module)
