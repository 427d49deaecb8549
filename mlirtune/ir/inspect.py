"""Read payload structure through the bindings (never by matching printed IR)."""

from __future__ import annotations

from mlir import ir
from mlir.dialects import func

from mlirtune.interfaces.errors import UsageError


def find_function(module: ir.Module, name: str, source: str = "payload") -> func.FuncOp:
    """The top-level func.func called `name`; a UsageError lists the ones that exist."""
    names = []
    for op in module.body.operations:
        if isinstance(op.opview, func.FuncOp):
            if op.opview.name.value == name:
                return op.opview
            names.append("@" + op.opview.name.value)
    raise UsageError(
        f"{source}: entry function @{name} not found; it defines {', '.join(names) or 'none'}",
        stage="inspect",
    )
