"""Build payload functions through the bindings: memref arguments, tensor bodies.

Each payload takes every tensor as a memref argument (outputs last), views them as tensors
with `bufferization.to_tensor restrict`, computes on tensors and writes results back with
`materialize_in_destination`, so one-shot bufferization writes outputs in place.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mlir import ir
from mlir.dialects import arith, bufferization, func, linalg, tensor, vector

from mlirtune.interfaces.workload import ArgSpec
from mlirtune.ir.constants import splat
from mlirtune.memory import check_shapes

Body = Callable[[list[ir.Value], list[ir.Value]], Sequence[ir.Value]]


def tensor_type(spec: ArgSpec) -> ir.RankedTensorType:
    return ir.RankedTensorType.get(list(spec.shape), spec.dtype.mlir())


def build_payload(
    args: Sequence[ArgSpec], body: Body, name: str = "payload", module: ir.Module | None = None
) -> ir.Module:
    """A module (`module`, else a new one) with one function `name(args...)` added;
    `body(inputs, output_inits)` returns the output tensors in output-argument order."""
    check_shapes(args, f"@{name}")  # MLIR asserts on shapes whose size overflows int64
    module = module or ir.Module.create()
    memref_types = [ir.MemRefType.get(list(a.shape), a.dtype.mlir()) for a in args]
    with ir.InsertionPoint(module.body):
        function = func.FuncOp(name, (memref_types, []))
        function.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
        entry = function.add_entry_block()
        with ir.InsertionPoint(entry):
            inputs, inits, destinations = [], [], []
            for spec, memref in zip(args, entry.arguments, strict=True):
                view = bufferization.to_tensor(
                    tensor_type(spec), memref, restrict=True, writable=spec.is_output
                )
                if spec.is_output:
                    inits.append(view)
                    destinations.append(memref)
                else:
                    inputs.append(view)
            results = body(inputs, inits)
            for result, destination in zip(results, destinations, strict=True):
                bufferization.materialize_in_destination(
                    None, result, destination, restrict=True, writable=True
                )
            func.ReturnOp([])
    return module


def padded_spatially(
    x: ir.Value, padding: Sequence[int], value: float, *, channels_last: bool = False
) -> ir.Value:
    """A channels-first tensor x [N, C, spatial...] (channels_last: [N, spatial..., C]) with
    `padding[i]` elements of `value` on both sides of spatial dim i (tensor.pad); x itself
    where there is no padding."""
    if not any(padding):
        return x
    x_type = ir.RankedTensorType(x.type)
    element = x_type.element_type
    low = [0, *padding, 0] if channels_last else [0, 0, *padding]
    shape = [size + 2 * pad for size, pad in zip(x_type.shape, low, strict=True)]
    pad = tensor.PadOp(ir.RankedTensorType.get(shape, element), x, [], [], low, low)
    with ir.InsertionPoint(pad.region.blocks.append(*[ir.IndexType.get()] * len(low))):
        tensor.YieldOp(arith.constant(element, value))
    return pad.result


def zero_filled(init: ir.Value, element_type: ir.Type) -> ir.Value:
    """`init` filled with 0 of the element type."""
    return filled(init, element_type, 0.0)


def filled(init: ir.Value, element_type: ir.Type, value: float) -> ir.Value:
    """`init` filled with `value` (e.g. -inf, the identity of a max reduction)."""
    return linalg.fill(splat(value, element_type), outs=[init])


def zero_vector(vector_type: ir.VectorType) -> ir.Value:
    """A constant vector of zeros (an accumulator's start)."""
    return splat(0.0, vector_type)


def store_rows(vectors: Sequence[ir.Value], init: ir.Value) -> ir.Value:
    """`init`, a 2-D tensor, with row i replaced by `vectors[i]` (e.g. the accumulators of
    a micro-benchmark, stored so that its loop cannot be optimised away)."""
    index = ir.IndexType.get()
    minor = ir.AffineMapAttr.get(ir.AffineMap.get_minor_identity(2, 1))
    zero = arith.constant(index, 0)
    result = init
    for row, value in enumerate(vectors):
        where = [arith.constant(index, row), zero]
        result = vector.transfer_write(result.type, value, result, where, minor, [True])
    return result
