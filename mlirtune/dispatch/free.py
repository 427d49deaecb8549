"""Ops that each dispatch reading them copies in, instead of reading their results as
inputs: constants, empty tensors, fills of them, reshapes of inputs, scalar arithmetic on
constants, convolutions' bias broadcasts, and the unit-stride slices and reshapes that
convolutions read their input through. So a matmul dispatch keeps its zero fill, and a
convolution's dispatch reads its bias as a vector: read as an input, the broadcast was an
output-sized tensor that the dispatch copied before accumulating onto it (it may not write
its inputs) and copied again into its output. A convolution's input slice (one phase of a
strided convolution's deinterleaved input) is a view of the whole in its dispatch, where a
dispatch of its own copied it."""

from __future__ import annotations

from mlir import ir

from mlirtune.dispatch.rows import VIEWS
from mlirtune.ir.inspect import defining_op
from mlirtune.schedules.roots import describe

# The op through which a payload reads an input.
SOURCE = "bufferization.to_tensor"
# Convolution kinds, whose dispatches take the broadcast bias they accumulate onto (their
# init) and the views of their input they read.
CONVOLUTION_KINDS = ("conv2d", "depthwise")
INPUT_VIEWS = ("tensor.extract_slice", *VIEWS)


def is_free(op: ir.Operation) -> bool:
    """Ops each dispatch may copy: constants, empty tensors, fills of those, reshapes of
    inputs, scalar arithmetic on constants, convolutions' bias broadcasts, and the views
    convolutions read their input through."""
    if op.name in ("arith.constant", "tensor.empty"):
        return True
    if op.name == "linalg.broadcast":
        return _bias_broadcast(op)
    producers = [defining_op(v) for v in op.operands]
    reads_inputs = op.name == "linalg.fill" or op.name in VIEWS
    if reads_inputs and all(p is not None and (is_free(p) or p.name == SOURCE) for p in producers):
        return True
    if op.name in INPUT_VIEWS:
        return _convolution_input_view(op)
    tensors = any(isinstance(r.type, ir.ShapedType) for r in op.results)
    return not tensors and not op.regions and all(p is not None and is_free(p) for p in producers)


def _convolution_input_view(op: ir.Operation) -> bool:
    """Whether view `op` (a unit-stride slice or a reshape) is read only by convolutions
    as their input, directly, through more such views or through the zero padding the
    convolution's dispatch takes."""
    slice_op = op.name == "tensor.extract_slice"
    if slice_op and any(s != 1 for s in ir.DenseI64ArrayAttr(op.attributes["static_strides"])):
        return False
    for use in op.results[0].uses:
        reader = use.owner.operation
        if reader.name in INPUT_VIEWS:
            if not _convolution_input_view(reader):
                return False
        elif reader.name == "tensor.pad":
            padded = list(reader.results[0].uses)
            if len(padded) != 1 or not _convolution_input(padded[0]):
                return False
        elif not _convolution_input(use):
            return False
    return True


def _convolution_input(use: ir.OpOperand) -> bool:
    info = describe(use.owner.operation)
    return info is not None and info.kind in CONVOLUTION_KINDS and use.operand_number == 0


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
        if info is None or info.kind not in CONVOLUTION_KINDS or use.operand_number != last:
            return False
    return True
