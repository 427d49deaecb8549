"""DispatchWorkload: one dispatch of a split payload as a workload of its own.

`dispatch_workloads(workload)` splits a payload of several root ops as a compile does, then
runs its dispatches in order, each lowered as it is (no schedule): what every dispatch reads
and writes on the workload's own inputs is captured. A dispatch's inputs are those values
and its reference the untuned result, which the whole payload's verification (against its
own reference) vouches for. So a schedule is tuned on the data it will see in the model.
"""

from __future__ import annotations

import numpy as np
from mlir import ir
from mlir.dialects import func

from mlirtune.dispatch.functions import standalone_module
from mlirtune.dispatch.partition import split_into_dispatches
from mlirtune.engine.mlir_jit import MlirJitEngine
from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.workload import ArgSpec, Complexity, Workload
from mlirtune.ir.context import new_context
from mlirtune.ir.dtypes import dtype_of_mlir
from mlirtune.ir.inspect import find_function
from mlirtune.schedules.roots import root_flops, summed_terms
from mlirtune.toolchain import digest
from mlirtune.workloads.base import SEED_PARAM, PayloadWorkload


class DispatchWorkload(PayloadWorkload):
    """A dispatch (`function` of the payload of `source`) with its captured inputs and its
    untuned output as the reference."""

    name = "dispatch"
    description = "one dispatch of a split payload, on the values it reads in the model"
    parameters = (SEED_PARAM,)

    def __init__(
        self,
        source: str,
        function: str,
        kind: str,
        text: str,
        inputs: list[np.ndarray],
        reference: list[np.ndarray],
    ) -> None:
        super().__init__()
        self.options = {"module": source, "dispatch": function, "seed": 0}
        self.function, self.kind, self.text = function, kind, text
        self.ir_digest = digest(text)
        self._inputs, self._reference = inputs, reference
        with new_context(), ir.Location.unknown():
            entry = find_function(ir.Module.parse(self.text), "payload")
            types = [ir.ShapedType(t) for t in entry.type.inputs]
            *ins, out = [(tuple(t.shape), dtype_of_mlir(t.element_type)) for t in types]
        self._args = [ArgSpec(f"in{i}", *spec) for i, spec in enumerate(ins)]
        self._args.append(ArgSpec("out", *out, is_output=True))

    @property
    def descriptor_name(self) -> str:
        """The pipeline a compile of the whole payload plans this dispatch with: its root
        op's kind, or with several (a softmax's two reductions) the dispatch's kind where
        one of them is of that kind; else none (`plan_dispatches` lowers it as it is: a
        batch norm and a 3-D average pool of two generics in an element-wise dispatch)."""
        roots = self.roots
        if not roots:
            return self.name
        if len(roots) == 1:
            return roots[0].kind
        return self.kind if any(op.kind == self.kind for op in roots) else "default"

    def arguments(self) -> list[ArgSpec]:
        return self._args

    def payload_module(self) -> ir.Module:
        return ir.Module.parse(self.text)

    def make_inputs(self) -> list[np.ndarray]:
        return self._inputs

    def reference(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        return [r.astype(np.float64) for r in self._reference]

    def accumulation_length(self) -> int:
        return max([1, *(summed_terms(op) for op in self.roots)])

    def get_complexity(self) -> Complexity:
        """The root ops' FLOPs (2 per multiply-add, one per element of the others), or one
        per output element where there are none; the bytes of the arguments."""
        flops = sum(root_flops(op) for op in self.roots) or self._args[-1].elements
        read = sum(a.nbytes for a in self._args if not a.is_output)
        return Complexity(flops, read, self._args[-1].nbytes)


def dispatch_workloads(workload: Workload) -> list[DispatchWorkload]:
    """The dispatches of `workload`'s payload, in program order, with the values each reads
    and writes when the payload runs on `workload.inputs`, every dispatch lowered as it is
    (the `default` pipeline). A UsageError if the payload is not split (one root op: tune
    the workload itself)."""
    with new_context(), ir.Location.unknown():
        module = workload.payload_module()
        dispatches, _ = split_into_dispatches(module, workload.entry)
        if not dispatches:
            raise UsageError(
                f"{workload.name}: the payload is not split into dispatches (one root op); "
                "tune it as it is",
                stage="dispatch",
            )
        texts = {d.function: str(standalone_module(module, d.function)) for d in dispatches}
        calls = _calls(module, workload.entry)
    arguments = workload.arguments()
    values: dict[int, np.ndarray] = {}
    inputs = iter(workload.inputs)
    for index, spec in enumerate(arguments):
        if not spec.is_output:
            values[index] = next(inputs)
    engine = MlirJitEngine(pipeline="default")
    captured = []
    for dispatch, (function, operands, output) in zip(dispatches, calls, strict=True):
        reads = [values[key] for key in operands]
        untuned = DispatchWorkload(
            workload.describe().get("module", workload.name),
            function,
            dispatch.kind,
            texts[function],
            reads,
            [],
        )
        kernel = engine.compile(untuned)
        with untuned.allocate(engine) as buffers:
            kernel.call(buffers)
            result = np.array(engine.runtime.to_host(buffers[-1]))
        values[output] = result
        captured.append(
            DispatchWorkload(
                untuned.options["module"], function, dispatch.kind, untuned.text, reads, [result]
            )
        )
    return captured


def _calls(module: ir.Module, entry: str) -> list[tuple[str, list[int], int]]:
    """(callee, operand keys, output key) of each call of the split payload, where a key is
    the payload argument's index or, for a buffer the payload allocates, a number past them."""
    function = find_function(module, entry)
    keys: dict[ir.Value, int] = {arg: i for i, arg in enumerate(function.arguments)}
    calls = []
    for op in function.entry_block.operations:
        if op.operation.name == "memref.alloc":
            keys[op.results[0]] = len(keys)
        elif isinstance(op, func.CallOp):
            *reads, output = [keys[v] for v in op.operands]
            calls.append((ir.FlatSymbolRefAttr(op.attributes["callee"]).value, reads, output))
    return calls


def root_signature(workload: DispatchWorkload) -> tuple:
    """What makes two dispatches the same tuning problem: the kind, shapes and types of
    their root ops (a model repeats layers)."""
    shapes = [
        (op.kind, sorted(op.dims.items()), op.dtypes, sorted(op.attributes.items()))
        for op in workload.roots
    ]
    return (workload.kind, repr(shapes))
