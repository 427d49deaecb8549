"""Ops that each dispatch reading them copies in, instead of reading their results as
inputs: constants, empty tensors, fills of them, reshapes of inputs, scalar arithmetic on
constants, and convolutions' bias broadcasts. So a matmul dispatch keeps its zero fill,
and a convolution's dispatch reads its bias as a vector: read as an input, the broadcast
was an output-sized tensor that the dispatch copied before accumulating onto it (it may
not write its inputs) and copied again into its output."""

from __future__ import annotations

from mlir import ir

from mlirtune.dispatch.rows import VIEWS
from mlirtune.ir.inspect import defining_op
from mlirtune.schedules.roots import describe

# The op through which a payload reads an input.
SOURCE = "bufferization.to_tensor"
# Root kinds whose dispatches take the broadcast bias they accumulate onto (their init).
TAKES_BIAS = ("conv2d", "depthwise")


def is_free(op: ir.Operation) -> bool:
    """Ops each dispatch may copy: constants, empty tensors, fills of those, reshapes of
    inputs, scalar arithmetic on constants, and convolutions' bias broadcasts."""
    if op.name in ("arith.constant", "tensor.empty"):
        return True
    if op.name == "linalg.broadcast":
        return _bias_broadcast(op)
    producers = [defining_op(v) for v in op.operands]
    if op.name == "linalg.fill" or op.name in VIEWS:
        return all(p is not None and (is_free(p) or p.name == SOURCE) for p in producers)
    tensors = any(isinstance(r.type, ir.ShapedType) for r in op.results)
    return not tensors and not op.regions and all(p is not None and is_free(p) for p in producers)


def _bias_broadcast(op: ir.Operation) -> bool:
    """Whether broadcast `op` spreads an input over an empty tensor that only convolutions
    read, each as the init it accumulates onto (a bias)."""
    source, init = (defining_op(v) for v in op.operands)
    if source is None or not (source.name == SOURCE or is_free(source)):
        return False
    if init is None or init.name != "tensor.empty":
        return False
    for use in op.results[0].uses:
        reader = use.owner.operation
        info = describe(reader)
        last = len(reader.operands) - 1
        if info is None or info.kind not in TAKES_BIAS or use.operand_number != last:
            return False
    return True
