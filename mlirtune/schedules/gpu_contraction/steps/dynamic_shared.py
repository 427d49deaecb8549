"""Shared memory past the static 48 KiB: the step `dynamic-shared-memory`.

A kernel's workgroup attributions become static `.shared` arrays, and ptxas refuses more
than 48 KiB of those. Where an outlined kernel's attributions add up to more (deep
double-buffered tiles), this step carves them out of the kernel's dynamic shared memory
instead (`gpu.dynamic_shared_memory`, one `memref.view` per buffer at a 16-byte aligned
offset) and gives each launch of the kernel that many bytes of it. The CUDA runtime then
raises the kernel's dynamic shared memory limit before the first launch; how far a chip
allows is NvidiaGPU.shared_bytes_per_block.

The lowering declares that memory as an internal zero-length global, which the NVPTX
backend demotes to a one-byte local `.shared` variable; the step
`extern-dynamic-shared-memory` makes it external, so that the PTX says what it is:
`.extern .shared .b8 name[]`.
"""

from __future__ import annotations

import math

from mlir import ir
from mlir.dialects import arith, gpu, memref

from mlirtune.interfaces.errors import MlirtuneError
from mlirtune.interfaces.gpu_program import STATIC_SHARED_BYTES
from mlirtune.ir.constants import index_constant
from mlirtune.ir.gpu import (
    WORKGROUP_ARGUMENT_ATTRIBUTES,
    WORKGROUP_ATTRIBUTIONS,
    workgroup_attributions,
)
from mlirtune.ir.inspect import ops_named

STAGE = "dynamic-shared-memory"
SHARED_SPACE = 3  # NVPTX's address space of shared memory
ALIGNMENT = 16  # each buffer's offset: 16-byte vector copies and ldmatrix rows need it


def use_dynamic_shared_memory(module: ir.Module) -> None:
    for kernel in ops_named(module.operation, "gpu.func"):
        count = workgroup_attributions(kernel)
        body = kernel.regions[0].blocks[0]
        buffers = list(body.arguments)[len(body.arguments) - count :] if count else []
        sizes = [_bytes(buffer.type) for buffer in buffers]
        if sum(sizes) <= STATIC_SHARED_BYTES:
            continue
        inputs = len(ir.FunctionType(ir.TypeAttr(kernel.attributes["function_type"]).value).inputs)
        if inputs + count != len(body.arguments):
            raise MlirtuneError("a kernel with private attributions cannot move them", stage=STAGE)
        space = ir.MemRefType(buffers[0].type).memory_space
        byte = ir.IntegerType.get_signless(8)
        dynamic_type = ir.MemRefType.get(
            [ir.ShapedType.get_dynamic_size()], byte, memory_space=space
        )
        offset = 0
        with ir.InsertionPoint.at_block_begin(body), kernel.location:
            dynamic = gpu.dynamic_shared_memory(dynamic_type)
            for buffer, size in zip(buffers, sizes, strict=True):
                shift = index_constant(offset)
                buffer.replace_all_uses_with(memref.view(buffer.type, dynamic, shift, []))
                offset += math.ceil(size / ALIGNMENT) * ALIGNMENT
        for position in reversed(range(inputs, inputs + count)):
            body.erase_argument(position)
        del kernel.attributes[WORKGROUP_ATTRIBUTIONS]
        if WORKGROUP_ARGUMENT_ATTRIBUTES in kernel.attributes:
            del kernel.attributes[WORKGROUP_ARGUMENT_ATTRIBUTES]
        _launch_with(module, ir.StringAttr(kernel.attributes["sym_name"]).value, offset)


def _bytes(buffer_type: ir.Type) -> int:
    buffer = ir.MemRefType(buffer_type)
    return math.prod(buffer.shape) * buffer.element_type.width // 8


def _launch_with(module: ir.Module, kernel: str, shared_bytes: int) -> None:
    """Rebuild each gpu.launch_func of `kernel` with `shared_bytes` of dynamic shared
    memory (the operand cannot be added in place)."""
    for launch in ops_named(module.operation, "gpu.launch_func"):
        if ir.SymbolRefAttr(launch.attributes["kernel"]).value[-1] != kernel:
            continue
        view = launch.opview
        if list(view.asyncDependencies) or view.asyncToken is not None:
            raise MlirtuneError("an asynchronous launch cannot be rebuilt", stage=STAGE)
        with ir.InsertionPoint(launch), launch.location:
            size = arith.constant(ir.IntegerType.get_signless(32), shared_bytes)
            gpu.LaunchFuncOp(
                ir.SymbolRefAttr(launch.attributes["kernel"]).value,
                (view.gridSizeX, view.gridSizeY, view.gridSizeZ),
                (view.blockSizeX, view.blockSizeY, view.blockSizeZ),
                kernel_operands=list(view.kernelOperands),
                dynamic_shared_memory_size=size,
            )
        launch.erase()


def extern_dynamic_shared_memory(module: ir.Module) -> None:
    unsized = ir.Type.parse("!llvm.array<0 x i8>")  # how gpu.dynamic_shared_memory lowers
    for variable in ops_named(module.operation, "llvm.mlir.global"):
        space = variable.attributes.get("addr_space")
        in_shared = space is not None and ir.IntegerAttr(space).value == SHARED_SPACE
        if in_shared and ir.TypeAttr(variable.attributes["global_type"]).value == unsized:
            variable.attributes["linkage"] = ir.Attribute.parse("#llvm.linkage<external>")
