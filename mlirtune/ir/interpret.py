"""Run a transform schedule on a payload and keep the interpreter's diagnostics.

The bindings' `apply_named_sequence` folds every diagnostic into one unstructured string
(and some failures carry none). Here the schedule runs as the `transform-interpreter` pass on
a wrapper module that holds the payload (tagged as the payload root) beside the schedule's
sequences, so failures come back as structured diagnostics with their locations. When the
interpreter reports nothing, the error still names the root ops the schedule was for.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import builtin
from mlir.passmanager import PassManager

from mlirtune.contain import compiling
from mlirtune.interfaces.errors import MlirtuneError
from mlirtune.ir.context import describe_location, format_diagnostics
from mlirtune.ir.roots import ROOT_ATTRIBUTE

PAYLOAD_TAG = "mlirtune.payload"
TARGET_TAG = "transform.target_tag"
WITH_SEQUENCES = "transform.with_named_sequence"


def interpret(payload: ir.Module, schedule: ir.Module, entry: str, where: str = "") -> None:
    """Apply `schedule`'s named sequence `entry` to `payload` in place. A failure raises a
    `[schedule]` error with the diagnostics (location: message) and the payload's root ops;
    `where` (e.g. a descriptor's `file: stage N`) prefixes it."""
    roots = root_ops(payload)  # before the schedule rewrites (or erases) them
    wrapper = ir.Module.create()
    wrapper.operation.attributes[WITH_SEQUENCES] = ir.UnitAttr.get()
    with ir.InsertionPoint(wrapper.body):
        inner = builtin.ModuleOp()
    for name in payload.operation.attributes:
        inner.operation.attributes[name] = payload.operation.attributes[name]
    inner.operation.attributes[TARGET_TAG] = ir.StringAttr.get(PAYLOAD_TAG)
    _move_ops(payload.body, inner.body)
    for op in schedule.body.operations:
        wrapper.body.append(op.operation.clone())
    manager = PassManager.parse(
        "builtin.module(transform-interpreter{"
        f"debug-payload-root-tag={PAYLOAD_TAG} entry-point={entry}}})"
    )
    try:
        with compiling(where or "schedule"):
            manager.run(wrapper.operation)
    except ir.MLIRError as error:
        diagnostics = format_diagnostics(error, op_dumps=False)
        if not getattr(error, "error_diagnostics", None):
            diagnostics = "the transform interpreter failed without a diagnostic"
        prefix = f"{where}: " if where else ""
        raise MlirtuneError(
            f"{prefix}schedule failed to apply to {roots}:\n{diagnostics}", stage="schedule"
        ) from None
    finally:
        _move_ops(inner.body, payload.body)
        for name in inner.operation.attributes:
            if name != TARGET_TAG:
                payload.operation.attributes[name] = inner.operation.attributes[name]


def root_ops(payload: ir.Module) -> str:
    """The annotated root ops as `linalg.matmul (matmul) at file:line:col`, for errors."""
    found: list[str] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if ROOT_ATTRIBUTE in op.attributes:
            kind = ir.StringAttr(op.attributes[ROOT_ATTRIBUTE]).value
            found.append(f"'{op.name}' ({kind}) at {describe_location(op.location)}")
        return ir.WalkResult.ADVANCE

    payload.operation.walk(visit)
    return ", ".join(found) or "the payload (no annotated root op)"


def _move_ops(source: ir.Block, target: ir.Block) -> None:
    for op in list(source.operations):
        target.append(op)
