"""Context creation and diagnostic-preserving wrappers around parsing and pass pipelines."""

from __future__ import annotations

from mlir import ir
from mlir.passmanager import PassManager

from mlirtune.errors import MlirtuneError, UsageError


def new_context() -> ir.Context:
    """A fresh context with every upstream dialect available."""
    return ir.Context()


def format_diagnostics(error: Exception) -> str:
    """Render an MLIRError's diagnostics as `location: message` lines (locations keep file:line)."""
    diagnostics = getattr(error, "error_diagnostics", None)
    if not diagnostics:
        return str(error).strip()
    lines = []

    def walk(diag, depth: int) -> None:
        lines.append(f"{'  ' * depth}{diag.location}: {diag.message}")
        for note in diag.notes:
            walk(note, depth + 1)

    for diag in diagnostics:
        walk(diag, 0)
    return "\n".join(lines)


def parse_module(text: str, source_name: str = "<input>") -> ir.Module:
    """Parse MLIR text in the current context; malformed input becomes a UsageError with lines."""
    try:
        return ir.Module.parse(text)
    except ir.MLIRError as error:
        raise UsageError(
            f"cannot parse {source_name}:\n{format_diagnostics(error)}", stage="parse"
        ) from None


def run_passes(module: ir.Module, pipeline: str, *, stage: str, print_after_all: bool = False):
    """Run an upstream textual pass pipeline on `module` in place."""
    try:
        manager = PassManager.parse(pipeline)
    except (ValueError, ir.MLIRError) as error:
        raise MlirtuneError(f"bad pass pipeline {pipeline!r}: {error}", stage=stage) from None
    if print_after_all:
        manager.enable_ir_printing(print_after_all=True)
    try:
        manager.run(module.operation)
    except ir.MLIRError as error:
        raise MlirtuneError(format_diagnostics(error), stage=stage) from None
