"""Read payload structure through the bindings (never by matching printed IR)."""

from __future__ import annotations

import math
from collections import Counter

from mlir import ir
from mlir.dialects import func

from mlirtune.interfaces.errors import UsageError

# Prefixes of LLVM's AMX intrinsics (tile loads, stores, products, zeroing).
AMX_INTRINSICS = ("llvm.x86.tile", "llvm.x86.tdp")


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


def defining_op(value: ir.Value) -> ir.Operation | None:
    """The op whose result `value` is; None for a block argument."""
    return None if isinstance(value.owner, ir.Block) else value.owner.operation


def linalg_index_loop(value: ir.Value) -> int | None:
    """The loop a `linalg.index` result names; None for any other value."""
    op = defining_op(value)
    if op is None or op.name != "linalg.index":
        return None
    return ir.IntegerAttr(op.attributes["dim"]).value


def filled_with(value: ir.Value) -> float | None:
    """The scalar constant a `linalg.fill` defining `value` fills with, else None."""
    fill = defining_op(value)
    if fill is None or fill.name != "linalg.fill":
        return None
    constant = defining_op(fill.operands[0])
    if constant is None or constant.name != "arith.constant":
        return None
    attribute = constant.attributes["value"]
    if isinstance(attribute, ir.FloatAttr):
        return attribute.value
    return ir.IntegerAttr(attribute).value if isinstance(attribute, ir.IntegerAttr) else None


def ops_named(scope: ir.Operation, name: str) -> list[ir.Operation]:
    """The ops called `name` nested in `scope` (not `scope` itself), outer before inner,
    collected before the caller rewrites any."""
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == name and op != scope:
            found.append(op)
        return ir.WalkResult.ADVANCE

    scope.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def intrinsics_called(module: ir.Module) -> set[str]:
    """The LLVM intrinsics a module's `llvm.call_intrinsic` ops call (after lowering)."""
    found: set[str] = set()

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "llvm.call_intrinsic":
            found.add(ir.StringAttr(op.attributes["intrin"]).value)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


def op_attributes(op: ir.Operation) -> dict[str, ir.Attribute]:
    """`op`'s attributes by name (iterating them gives only the names)."""
    return {name: op.attributes[name] for name in op.attributes}


def op_counts(module: ir.Module) -> Counter[str]:
    """How many ops of each name `module` holds, nested ones included."""
    counts: Counter[str] = Counter()

    def visit(op: ir.Operation) -> ir.WalkResult:
        counts[op.name] += 1
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return counts


def uses_amx_tiles(module: ir.Module) -> bool:
    """Whether the lowered (LLVM dialect) module calls AMX tile intrinsics, whose first use
    faults unless the OS granted this process tile state (mlirtune.targets.tile_state)."""
    return any(name.startswith(AMX_INTRINSICS) for name in intrinsics_called(module))


def largest_vector(module: ir.Module) -> int:
    """Elements of the largest vector any op of `module` makes (0 if none): a schedule
    that left an op untiled vectorizes it whole, which unrolls past any memory."""
    largest = 0

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal largest
        for result in op.results:
            if isinstance(result.type, ir.VectorType):
                largest = max(largest, math.prod(ir.VectorType(result.type).shape))
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return largest
