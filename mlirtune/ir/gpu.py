"""GPU-module helpers over the bindings: the PTX of serialized kernels, the kernel fix-up
that runs between outlining and attaching the NVVM target, and the launches a runtime
needs.

`prepare_kernels` and `record_launches` are the descriptor steps `prepare-gpu-kernels` and
`record-gpu-launches` (mlirtune.pipeline.steps); `extract_ptx` and `read_launches` read
what the lowering left: the PTX of `gpu-module-to-binary{format=isa}`, and the launches
recorded on the module while they were still plain `gpu.launch_func`s with constant sizes.
"""

from __future__ import annotations

from collections.abc import Iterable

from mlir import ir
from mlir.dialects import gpu

from mlirtune.interfaces.errors import MlirtuneError
from mlirtune.interfaces.gpu_program import KernelLaunch
from mlirtune.ir.constants import constant_int
from mlirtune.ir.inspect import ops_named

SERIALIZE_STAGE = "gpu-serialize"
LAUNCH_STAGE = "gpu-launch"
LAUNCHES_ATTRIBUTE = "mlirtune.gpu_launches"
# How many workgroup (shared-memory) buffers a gpu.launch or gpu.func declares.
WORKGROUP_ATTRIBUTIONS = "workgroup_attributions"
# Their argument attributes (alignment), one dictionary per buffer.
WORKGROUP_ARGUMENT_ATTRIBUTES = "workgroup_attrib_attrs"
_CONTRACTIBLE = ("arith.mulf", "arith.addf", "arith.subf")


def extract_ptx(module: ir.Module) -> str:
    """The PTX text of the module's `gpu.binary` objects, read through `#gpu.object`."""
    objects = [
        gpu.ObjectAttr(a)
        for binary in ops_named(module.operation, "gpu.binary")
        for a in ir.ArrayAttr(binary.attributes["objects"])
    ]
    if not objects:
        raise MlirtuneError("lowering produced no gpu.binary", stage=SERIALIZE_STAGE)
    formats = {gpu.CompilationTarget(o.format) for o in objects}
    if formats != {gpu.CompilationTarget.Assembly}:
        raise MlirtuneError(
            f"expected PTX (assembly) objects, got {formats}", stage=SERIALIZE_STAGE
        )
    return "\n".join(o.object.decode() for o in objects)


def prepare_kernels(module: ir.Module) -> None:
    """Let LLVM contract a*b+c into FMA inside kernels, as nvcc does by default
    (--fmad=true), align shared-memory buffers to 16 bytes, and mark kernel memref
    arguments noalias where every launch passes
    distinct arguments of the host function, whose `restrict` views promise no aliasing
    (this keeps accumulators in registers and lets loads use the read-only cache).

    Runs on outlined kernels (`gpu.func` with `gpu.kernel`) and their `gpu.launch_func`s."""
    distinct: dict[tuple[str, ...], bool] = {}
    kernels: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "gpu.launch_func":
            key = tuple(ir.SymbolRefAttr(op.attributes["kernel"]).value)
            distinct[key] = distinct.get(key, True) and _distinct_arguments(
                op.opview.kernelOperands
            )
        elif op.name == "gpu.func" and "gpu.kernel" in op.attributes:
            kernels.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    for kernel in kernels:
        kernel.walk(_allow_contraction)
        _align_workgroup_buffers(kernel)
        key = tuple(ir.StringAttr(o.attributes["sym_name"]).value for o in (kernel.parent, kernel))
        if distinct.get(key):
            _add_noalias(kernel)


def _align_workgroup_buffers(kernel: ir.Operation) -> None:
    """Align the kernel's shared-memory buffers to 16 bytes, so that 16-byte vector copies
    into tiles whose rows are multiples of 16 bytes are aligned too (LLVM otherwise aligns
    them to their element)."""
    count = workgroup_attributions(kernel)
    if count:
        align = ir.DictAttr.get(
            {"llvm.align": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 16)}
        )
        kernel.attributes[WORKGROUP_ARGUMENT_ATTRIBUTES] = ir.ArrayAttr.get([align] * count)


def workgroup_attributions(op: ir.Operation) -> int:
    """The workgroup buffers a gpu.launch or gpu.func declares (the attribute is absent
    where there are none)."""
    count = op.attributes.get(WORKGROUP_ATTRIBUTIONS)
    return 0 if count is None else ir.IntegerAttr(count).value


def _allow_contraction(op: ir.Operation) -> ir.WalkResult:
    if op.name in _CONTRACTIBLE:
        op.attributes["fastmath"] = ir.Attribute.parse("#arith.fastmath<contract>")
    return ir.WalkResult.ADVANCE


def _distinct_arguments(values: Iterable[ir.Value]) -> bool:
    """Whether the memref operands are distinct arguments of the enclosing function."""
    memrefs = [v for v in values if isinstance(v.type, ir.MemRefType)]
    if not all(isinstance(v, ir.BlockArgument) for v in memrefs):
        return False
    return len({v.arg_number for v in memrefs}) == len(memrefs)


def _add_noalias(kernel: ir.Operation) -> None:
    """Mark the kernel's memref arguments noalias (not its workgroup attributions, which
    follow the arguments among the entry block's values)."""
    inputs = ir.FunctionType(ir.TypeAttr(kernel.attributes["function_type"]).value).inputs
    arguments = list(kernel.regions[0].blocks[0].arguments)[: len(inputs)]
    old = kernel.attributes.get("arg_attrs", None)
    attrs = []
    for i, argument in enumerate(arguments):
        entries = {a.name: a.attr for a in ir.DictAttr(old[i])} if old is not None else {}
        if isinstance(argument.type, ir.MemRefType):
            entries["llvm.noalias"] = ir.UnitAttr.get()
        attrs.append(ir.DictAttr.get(entries))
    kernel.attributes["arg_attrs"] = ir.ArrayAttr.get(attrs)


def record_launches(module: ir.Module) -> None:
    """Record every `gpu.launch_func` on the module (LAUNCHES_ATTRIBUTE): its kernel, grid,
    block, dynamic shared memory and the host function's arguments it passes. Later
    lowering turns the launches into LLVM calls; the record is what a runtime that is not
    the LLVM host code (mlirtune.runtime.cuda) launches from. Sizes must be constants and
    kernel operands the function's own arguments, else the error says which is not."""
    launches = [_launch_record(op) for op in ops_named(module.operation, "gpu.launch_func")]
    module.operation.attributes[LAUNCHES_ATTRIBUTE] = ir.ArrayAttr.get(launches)


def read_launches(module: ir.Module) -> tuple[KernelLaunch, ...]:
    """The launches `record_launches` stored on `module`, in program order."""
    if LAUNCHES_ATTRIBUTE not in module.operation.attributes:
        raise MlirtuneError(
            "the lowering recorded no GPU launches (its descriptor lacks the "
            "record-gpu-launches step)",
            stage=LAUNCH_STAGE,
        )
    launches = []
    for entry in ir.ArrayAttr(module.operation.attributes[LAUNCHES_ATTRIBUTE]):
        fields = {a.name: a.attr for a in ir.DictAttr(entry)}
        grid, block = (tuple(ir.DenseI64ArrayAttr(fields[k])) for k in ("grid", "block"))
        launches.append(
            KernelLaunch(
                kernel=ir.StringAttr(fields["kernel"]).value,
                grid=(grid[0], grid[1], grid[2]),
                block=(block[0], block[1], block[2]),
                shared_bytes=ir.IntegerAttr(fields["shared_bytes"]).value,
                arguments=tuple(ir.DenseI64ArrayAttr(fields["arguments"])),
            )
        )
    return tuple(launches)


def _launch_record(op: ir.Operation) -> ir.DictAttr:
    launch = op.opview
    kernel = ir.SymbolRefAttr(op.attributes["kernel"]).value[-1]
    sizes = [
        launch.gridSizeX,
        launch.gridSizeY,
        launch.gridSizeZ,
        launch.blockSizeX,
        launch.blockSizeY,
        launch.blockSizeZ,
    ]
    shared = launch.dynamicSharedMemorySize
    constants = [_constant(v, kernel, "grid and block sizes") for v in sizes]
    arguments = []
    for position, operand in enumerate(launch.kernelOperands):
        if not (isinstance(operand, ir.BlockArgument) and isinstance(operand.type, ir.MemRefType)):
            raise MlirtuneError(
                f"operand {position} of the launch of {kernel} is not a buffer argument of "
                "the host function: the CUDA runtime passes only those",
                stage=LAUNCH_STAGE,
            )
        arguments.append(operand.arg_number)
    i64 = ir.IntegerType.get_signless(64)
    return ir.DictAttr.get(
        {
            "kernel": ir.StringAttr.get(kernel),
            "grid": ir.DenseI64ArrayAttr.get(constants[:3]),
            "block": ir.DenseI64ArrayAttr.get(constants[3:]),
            "shared_bytes": ir.IntegerAttr.get(
                i64, 0 if shared is None else _constant(shared, kernel, "shared memory")
            ),
            "arguments": ir.DenseI64ArrayAttr.get(arguments),
        }
    )


def _constant(value: ir.Value, kernel: str, what: str) -> int:
    constant = constant_int(value)
    if constant is None:
        raise MlirtuneError(
            f"the launch of {kernel} has {what} that are not constants: the CUDA runtime "
            "needs static launches",
            stage=LAUNCH_STAGE,
        )
    return constant
