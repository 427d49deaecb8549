"""Finding ops in a test's module."""

from __future__ import annotations

from mlir import ir


def ops_named(module: ir.Module, name: str) -> list[ir.Operation]:
    """Every op called `name` in `module`, outer before inner."""
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == name:
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found
