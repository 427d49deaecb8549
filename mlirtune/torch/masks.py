"""Boolean tensors stored a byte per element, as torch stores them.

torch-mlir imports a mask (`x > 0`, the all-masked rows of an attention, a max-pool's
comparison) as a tensor of i1. A mask that is not fused away gets a buffer, and MLIR's host
lowering cannot store vectors of i1 into memory (memref-to-LLVM asserts on sub-byte element
types; a vector of i1 is bit-packed, a scalar one a byte). So, on the imported IR: every
tensor of i1 becomes a tensor of i8 holding 0 or 1, and the scalar bodies that read or
write one convert at their edge (`arith.trunci` on entry, `arith.extui` before the yield).
The arithmetic on masks stays in i1; only storage changes.
"""

from __future__ import annotations

import numpy as np
from mlir import ir
from mlir.dialects import arith, func

from mlirtune.interfaces.errors import UsageError


def store_masks_as_bytes(function: func.FuncOp, name: str) -> bool:
    """Rewrite `function` (torch-mlir's @main) so that no tensor holds i1; True when any did.
    A mask the rewrite cannot carry is a UsageError naming its op."""
    with function.context, ir.Location.unknown():
        boolean, byte = ir.IntegerType.get_signless(1), ir.IntegerType.get_signless(8)
        if not _has_masks(function, boolean):
            return False
        rewrite = _ByteMasks(boolean, byte)
        entry = function.entry_block
        for argument in entry.arguments:
            argument.set_type(rewrite.stored(argument.type))
        function.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get(
                [rewrite.stored(t) for t in function.type.inputs],
                [rewrite.stored(t) for t in function.type.results],
            )
        )
        for op in list(entry.operations):
            rewrite.op(op.operation)
        try:
            function.operation.verify()
        except ir.MLIRError as error:
            detail = "; ".join(str(d) for d in error.error_diagnostics) or str(error)
            raise UsageError(
                f"{name}: its boolean tensors could not be stored as bytes: {detail}",
                stage="torch",
            ) from None
        return True


def _has_masks(function: func.FuncOp, boolean: ir.Type) -> bool:
    found = False

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal found
        found = any(_element(r.type) == boolean for r in op.results)
        return ir.WalkResult.INTERRUPT if found else ir.WalkResult.ADVANCE

    function.operation.walk(visit)
    return found or any(_element(t) == boolean for t in function.type.inputs)


def _element(value_type: ir.Type) -> ir.Type | None:
    if isinstance(value_type, ir.RankedTensorType):
        return value_type.element_type
    return None


class _ByteMasks:
    """The rewrite of one function's top-level ops, in program order (producers first)."""

    def __init__(self, boolean: ir.Type, byte: ir.Type) -> None:
        self.boolean = boolean
        self.byte = byte

    def stored(self, value_type: ir.Type) -> ir.Type:
        """`value_type` with i1 elements stored as i8; other types unchanged."""
        if _element(value_type) == self.boolean:
            return ir.RankedTensorType.get(value_type.shape, self.byte, value_type.encoding)
        return value_type

    def op(self, op: ir.Operation) -> None:
        """Store `op`'s mask results as bytes and convert at its bodies' edges."""
        if op.name == "arith.constant" and _element(op.results[0].type) == self.boolean:
            self._constant(op)
            return
        if op.name in ("tensor.extract", "tensor.from_elements"):
            self._element_access(op)
            return
        self._scalar_operands(op)
        for result in op.results:
            result.set_type(self.stored(result.type))
        for region in op.regions:
            for block in region.blocks:
                self._body(op, block)

    def _constant(self, op: ir.Operation) -> None:
        """A constant mask becomes a constant of bytes (0 and 1)."""
        value = op.attributes["value"]
        stored = self.stored(op.results[0].type)
        if value.is_splat:
            bit = ir.BoolAttr(value.get_splat_value()).value
            attr = ir.DenseElementsAttr.get_splat(stored, ir.IntegerAttr.get(self.byte, int(bit)))
        else:
            bits = np.array([bool(ir.BoolAttr(b).value) for b in value], dtype=np.int8)
            attr = ir.DenseElementsAttr.get(bits.reshape(stored.shape), type=stored)
        with ir.InsertionPoint(op):
            replacement = arith.ConstantOp(stored, attr)
        op.results[0].replace_all_uses_with(replacement.result)
        op.erase()

    def _element_access(self, op: ir.Operation) -> None:
        """tensor.extract of a byte mask reads a byte and narrows it; tensor.from_elements
        of bits widens each."""
        if op.name == "tensor.extract":
            if _element(op.operands[0].type) != self.byte or op.results[0].type != self.boolean:
                return
            result = op.results[0]
            result.set_type(self.byte)
            with ir.InsertionPoint.after(op):
                narrowed = arith.TruncIOp(self.boolean, result)
            result.replace_all_uses_except(narrowed.result, narrowed.operation)
            return
        if _element(op.results[0].type) != self.boolean:
            return
        self._scalar_operands(op, every=True)
        op.results[0].set_type(self.stored(op.results[0].type))

    def _scalar_operands(self, op: ir.Operation, every: bool = False) -> None:
        """Scalar i1 operands widened to bytes, where their op writes a byte mask (a fill's
        value) or `every`."""
        writes_mask = any(_element(r.type) == self.boolean for r in op.results)
        if not (writes_mask or every):
            return
        for index, operand in enumerate(op.operands):
            if operand.type == self.boolean:
                with ir.InsertionPoint(op):
                    op.operands[index] = arith.ExtUIOp(self.byte, operand).result

    def _body(self, op: ir.Operation, block: ir.Block) -> None:
        """A scalar body reads its operands' elements through its block arguments (one per
        operand, in order) and yields one element per result."""
        for index, argument in enumerate(block.arguments):
            if argument.type != self.boolean or index >= len(op.operands):
                continue
            operand_type = op.operands[index].type
            if (_element(operand_type) or operand_type) != self.byte:
                continue
            argument.set_type(self.byte)
            with ir.InsertionPoint.at_block_begin(block):
                narrowed = arith.TruncIOp(self.boolean, argument)
            argument.replace_all_uses_except(narrowed.result, narrowed.operation)
        terminator = block.operations[len(block.operations) - 1]
        results = [r for r in op.results if isinstance(r.type, ir.RankedTensorType)]
        for index, value in enumerate(terminator.operands):
            if value.type != self.boolean or index >= len(results):
                continue
            if _element(results[index].type) != self.byte:
                continue
            with ir.InsertionPoint(terminator):
                terminator.operands[index] = arith.ExtUIOp(self.byte, value).result
