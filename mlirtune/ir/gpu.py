"""GPU-module helpers over the bindings: the PTX of serialized kernels, and the kernel
fix-up that runs between outlining and attaching the NVVM target.

`prepare_kernels` is registered as the descriptor step `prepare-gpu-kernels`
(mlirtune.pipeline.steps); `extract_ptx` reads what `gpu-module-to-binary{format=isa}`
produced.
"""

from __future__ import annotations

from collections.abc import Iterable

from mlir import ir
from mlir.dialects import gpu

from mlirtune.interfaces.errors import MlirtuneError

SERIALIZE_STAGE = "gpu-serialize"
_CONTRACTIBLE = ("arith.mulf", "arith.addf", "arith.subf")


def extract_ptx(module: ir.Module) -> str:
    """The PTX text of the module's `gpu.binary` objects, read through `#gpu.object`."""
    objects: list[gpu.ObjectAttr] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "gpu.binary":
            objects.extend(gpu.ObjectAttr(a) for a in ir.ArrayAttr(op.attributes["objects"]))
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
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
    (--fmad=true), and mark kernel memref arguments noalias where every launch passes
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
        key = tuple(ir.StringAttr(o.attributes["sym_name"]).value for o in (kernel.parent, kernel))
        if distinct.get(key):
            _add_noalias(kernel)


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
    arguments = kernel.regions[0].blocks[0].arguments
    old = kernel.attributes.get("arg_attrs", None)
    attrs = []
    for i, argument in enumerate(arguments):
        entries = {a.name: a.attr for a in ir.DictAttr(old[i])} if old is not None else {}
        if isinstance(argument.type, ir.MemRefType):
            entries["llvm.noalias"] = ir.UnitAttr.get()
        attrs.append(ir.DictAttr.get(entries))
    kernel.attributes["arg_attrs"] = ir.ArrayAttr.get(attrs)
