"""TorchWorkload: an imported PyTorch module as a workload like any other.

The imported function @main takes tensors and returns tensors; the payload wraps it in this
project's calling convention (memref arguments, outputs written in place) and inlines it, so
root ops are found, annotated, scheduled and matched by spec libraries as in built-ins. The
reference is torch eager's output on the same inputs; the FLOP count sums the root ops'.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
from mlir import ir
from mlir.dialects import func

from mlirtune.bench.baseline import torch_tensor
from mlirtune.dispatch.prepare import collapse_after_fusion, prepare_for_dispatch
from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.workload import ArgSpec, Complexity
from mlirtune.ir.context import run_passes
from mlirtune.ir.dtypes import dtype_of_mlir
from mlirtune.ir.inspect import find_function, ops_named
from mlirtune.schedules.roots import find_roots, root_flops, summed_terms
from mlirtune.toolchain import digest
from mlirtune.torch.importer import ENTRY, ImportedModule
from mlirtune.torch.masks import store_masks_as_bytes
from mlirtune.torch.scans import lower_scans
from mlirtune.torch.static_concats import concat_static_operands
from mlirtune.workloads.base import SEED_PARAM, PayloadWorkload
from mlirtune.workloads.payload import build_payload


class TorchWorkload(PayloadWorkload):
    """A PyTorch module imported through torch-mlir (see mlirtune.torch.workload)."""

    name = "torch"
    description = "a PyTorch module imported through torch-mlir"
    parameters = (SEED_PARAM,)

    def __init__(self, imported: ImportedModule) -> None:
        super().__init__()
        self.imported = imported
        self.options = {"module": imported.name, "seed": 0}
        self.ir_digest = digest(imported.text)
        with ir.Context(), ir.Location.unknown():
            self._args = self._signature(self._parse())

    def _parse(self) -> ir.Module:
        """torch-mlir's module with its scans lowered (`lower_scans`): parsed taking unknown
        dialects, since a scan is an op of torch-mlir's own, and refused if any is left."""
        context = ir.Context.current
        allowed, context.allow_unregistered_dialects = context.allow_unregistered_dialects, True
        try:
            module = ir.Module.parse(self.imported.text)
        except ir.MLIRError as error:  # an attribute or type this MLIR cannot read
            detail = "; ".join(str(d) for d in error.error_diagnostics)
            raise UsageError(
                f"{self.imported.name}: torch-mlir's IR does not parse here: {detail}",
                stage="torch",
            ) from None
        finally:
            context.allow_unregistered_dialects = allowed
        lower_scans(_entry(module))
        unlowered = _unlowered_ops(module)
        if unlowered:
            raise UsageError(f"{self.imported.name}: {unlowered}", stage="torch")
        store_masks_as_bytes(_entry(module), self.imported.name)
        concat_static_operands(_entry(module))
        return module

    def _signature(self, module: ir.Module) -> list[ArgSpec]:
        main = _entry(module)
        specs = []
        for name, arg_type in zip(self.imported.input_names, main.type.inputs, strict=True):
            specs.append(ArgSpec(name, tuple(arg_type.shape), dtype_of_mlir(arg_type.element_type)))
        for i, result_type in enumerate(main.type.results):
            dtype = dtype_of_mlir(result_type.element_type)
            specs.append(ArgSpec(f"output{i}", tuple(result_type.shape), dtype, is_output=True))
        return specs

    def arguments(self) -> list[ArgSpec]:
        return self._args

    def payload_module(self) -> ir.Module:
        """@payload(inputs..., outputs...) calling the imported @main, inlined."""
        module = self._parse()
        main = _entry(module)
        main.attributes["sym_visibility"] = ir.StringAttr.get("private")

        def body(inputs: list[ir.Value], _: list[ir.Value]) -> list[ir.Value]:
            return list(func.CallOp(main, inputs).results)

        build_payload(self._args, body, module=module)
        run_passes(module, "builtin.module(inline, symbol-dce, canonicalize)", stage="torch")
        # A Linear's weight arrives through a transpose: read in place by its matmul, one
        # root or many (a single Linear + ReLU otherwise vectorized the 512 x 512 transpose
        # whole, and the JIT ran out of memory). Runtime assertions are dropped here too.
        prepare_for_dispatch(find_function(module, self.entry))
        # A payload of one root op is scheduled whole, by its family: its element-wise
        # chains are fused first, as a compiler's front end fuses them (torch-mlir writes a
        # LeakyReLU as max(0, x) + 0.1 min(0, x), three ops reading x, which left a matmul's
        # epilogue in pieces its schedule could not take). A payload of several is split
        # into dispatches, which fuse inside each (fused before, producers would be pulled
        # into the next contraction's body, which then no family recognises).
        # A gather (an embedding) is kept apart too: fused, it becomes the contraction's
        # operand read element by element (an embedding + Linear ran at 0.03x eager).
        if len(find_roots(module)) <= 1 and not _gathers(module):
            fuse = "func.func(linalg-fuse-elementwise-ops), canonicalize, cse"
            run_passes(module, f"builtin.module({fuse})", stage="torch")
            if collapse_after_fusion(find_function(module, self.entry).operation):
                run_passes(module, "builtin.module(canonicalize, cse)", stage="torch")
        return module

    def make_inputs(self) -> list[np.ndarray]:
        return [_stored(np.ascontiguousarray(x)) for x in self.imported.inputs]

    def reference(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        # Torch eager ran on these very inputs when the module was imported: its outputs,
        # in torch's own dtype (verification compares in float64 a chunk at a time).
        return [_stored(y) for y in self.imported.outputs]

    def reference_bytes(self) -> int:
        return sum(y.nbytes for y in self.imported.outputs)

    def reference_scratch_bytes(self) -> int:
        return 0  # computed when the module was imported

    def input_scratch_bytes(self) -> int:
        return 0  # the module's own tensors, held since the import

    def torch_baseline(self) -> Callable[[], object] | None:
        """The module in eager mode on the same inputs (None once the workload was sent to
        another process, which gets no torch module)."""
        module = self.imported.module
        if module is None:
            return None
        arguments = self._example_tensors()
        return lambda: module(*arguments)

    def torch_compiled_baseline(self) -> Callable[[], object] | None:
        """The module through torch.compile (compiled on its first call)."""
        if self.imported.module is None:
            return None
        import torch

        compiled = torch.compile(self.imported.module)
        arguments = self._example_tensors()
        return lambda: compiled(*arguments)

    def _example_tensors(self) -> list[object]:
        """The module's own inputs (after the weights) as tensors sharing their memory."""
        given = zip(self.inputs, self.imported.inputs, strict=True)
        tensors = [torch_tensor(x.view(original.dtype)) for x, original in given]
        return tensors[-self.imported.examples :]

    def __getstate__(self) -> dict[str, object]:
        state = super().__getstate__()
        state["imported"] = replace(self.imported, module=None)
        return state

    def accumulation_length(self) -> int:
        """The longest sum a root op computes (K of a contraction, C*KH*KW of a convolution)."""
        return max([1, *(summed_terms(op) for op in self.roots)])

    def get_complexity(self) -> Complexity:
        """The root ops' FLOPs (2 per multiply-add, one per element of the others); the
        bytes of the module's inputs and outputs."""
        flops = sum(root_flops(op) for op in self.roots)
        read = sum(a.nbytes for a in self._args if not a.is_output)
        return Complexity(flops, read, sum(a.nbytes for a in self._args if a.is_output))


def _entry(module: ir.Module) -> func.FuncOp:
    for op in module.body.operations:
        if isinstance(op, func.FuncOp) and op.sym_name.value == ENTRY:
            return op
    raise UsageError(f"torch-mlir's module has no @{ENTRY}", stage="torch")


def _unlowered_ops(module: ir.Module) -> str:
    """The ops torch-mlir left outside linalg that are not lowered here (a scan of another
    kind than `lower_scans` takes), each with its first location; empty when there are
    none."""
    context = module.context
    found: dict[str, str] = {}

    def visit(op: ir.Operation) -> ir.WalkResult:
        unknown = not context.is_registered_operation(op.name)
        if unknown and not op.name.endswith(".yield") and op.name not in found:
            found[op.name] = str(op.location)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    ops = ", ".join(f"{name} at {where}" for name, where in found.items())
    return f"{ops}: no lowering to linalg here" if ops else ""


def _stored(array: np.ndarray) -> np.ndarray:
    """A boolean array as the bytes its payload holds (a view: torch and numpy store a bool
    as one byte, 0 or 1)."""
    return array.view(np.int8) if array.dtype == np.bool_ else array


def _gathers(module: ir.Module) -> bool:
    """Whether a linalg op of `module` reads a tensor at computed indices (tensor.extract
    in its body: an embedding's lookup)."""
    extracts = ops_named(module.operation, "tensor.extract")
    return any(op.parent.name == "linalg.generic" for op in extracts)
