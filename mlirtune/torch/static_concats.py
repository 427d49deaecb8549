"""Concatenations of operands whose static shapes torch-mlir cast away.

torch-mlir lowers `torch.roll` (a Swin block's shifted windows) to two slices, each cast to
a type dynamic along the rolled axis, joined by a `tensor.concat` whose result is static
again. MLIR's canonicalizer keeps those casts, and the dynamic values become buffers of
unknown size once the model is split into dispatches. The concatenation takes the slices'
own static types as well, so each cast it reads is bypassed here and dropped once unused.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import func

from mlirtune.ir.inspect import defining_op


def concat_static_operands(function: func.FuncOp) -> int:
    """Make each `tensor.concat` of `function` read the static values its operands were
    cast from; the number of casts bypassed."""
    bypassed = 0
    casts: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal bypassed
        if op.name != "tensor.concat":
            return ir.WalkResult.ADVANCE
        for position, operand in enumerate(op.operands):
            producer = defining_op(operand)
            if producer is None or producer.name != "tensor.cast":
                continue
            source = producer.operands[0]
            if ir.RankedTensorType(source.type).has_static_shape:
                op.operands[position] = source
                if producer not in casts:
                    casts.append(producer)
                bypassed += 1
        return ir.WalkResult.ADVANCE

    function.operation.walk(visit)
    for cast in casts:
        if not list(cast.results[0].uses):
            cast.erase()
    return bypassed
