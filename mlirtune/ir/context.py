"""Context creation and diagnostic-preserving wrappers around parsing and pass pipelines."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mlir import ir
from mlir.passmanager import PassManager

from mlirtune.contain import compiling
from mlirtune.contain.stages import contained
from mlirtune.interfaces.errors import MlirtuneError, UsageError


@dataclass
class CompileChecks:
    """How a process compiles: MLIR's own thread pool per context, the IR verified after
    every pass, and a fresh context per compile. A tuning worker turns all three off: it
    compiles one small module at a time beside its siblings, one per core, where the pool
    only costs its start-up; it verifies the lowered module once before the JIT instead
    (`verify_lowered`); and it compiles every candidate in one context, since creating one
    (every dialect loaded) costs about 8 ms. Together that is about 20% of a 256^3
    candidate's compile time."""

    context_threads: bool = True
    verify_each_pass: bool = True
    fresh_contexts: bool = True


COMPILE_CHECKS = CompileChecks()
_reused: list[ir.Context] = []  # the one context, where COMPILE_CHECKS.fresh_contexts is off


def new_context() -> ir.Context:
    """A context with every upstream dialect available: a fresh one, unless this process
    compiles in one context (COMPILE_CHECKS.fresh_contexts off)."""
    if not COMPILE_CHECKS.fresh_contexts and _reused:
        return _reused[0]
    context = ir.Context()
    if not COMPILE_CHECKS.context_threads or contained():  # contained: steps may fork
        context.enable_multithreading(False)
    if not COMPILE_CHECKS.fresh_contexts:
        _reused.append(context)
    return context


def describe_location(location: ir.Location) -> str:
    """`file:line:col` for file locations, the name for named ones (schedule steps)."""
    if location.is_a_file():
        return f"{location.filename}:{location.start_line}:{location.start_col}"
    if location.is_a_name():
        return location.name_str
    if location.is_a_callsite():
        return describe_location(location.callee)
    return str(location)


OP_DUMP_NOTE = "see current operation"


def _diagnostic_lines(diagnostic, depth: int = 0, op_dumps: bool = True) -> list[str]:
    lines = [f"{'  ' * depth}{describe_location(diagnostic.location)}: {diagnostic.message}"]
    for note in diagnostic.notes:
        if op_dumps or not str(note.message).startswith(OP_DUMP_NOTE):
            lines += _diagnostic_lines(note, depth + 1, op_dumps)
    return lines


def format_diagnostics(error: Exception, op_dumps: bool = True) -> str:
    """Render an MLIRError's diagnostics as `location: message` lines (locations keep
    file:line). `op_dumps=False` drops the notes that print the whole failing op again."""
    diagnostics = getattr(error, "error_diagnostics", None)
    if not diagnostics:
        return str(error).strip()
    return "\n".join(line for diag in diagnostics for line in _diagnostic_lines(diag, 0, op_dumps))


def parse_module(path: str | Path) -> ir.Module:
    """Parse an MLIR file in the current context; diagnostics keep their file:line:col."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"{path}: no such file", stage="parse")
    try:
        return ir.Module.parseFile(str(path))
    except ir.MLIRError as error:
        raise UsageError(
            f"cannot parse {path}:\n{format_diagnostics(error)}", stage="parse"
        ) from None


def run_passes(module: ir.Module, pipeline: str, *, stage: str, print_after_all: bool = False):
    """Run an upstream textual pass pipeline on `module` in place."""
    try:
        manager = PassManager.parse(pipeline)
    except (ValueError, ir.MLIRError) as error:
        raise MlirtuneError(f"bad pass pipeline {pipeline!r}: {error}", stage=stage) from None
    if print_after_all:
        manager.enable_ir_printing(print_after_all=True)
    manager.enable_verifier(COMPILE_CHECKS.verify_each_pass)
    try:
        with compiling(stage):
            manager.run(module.operation)
    except ir.MLIRError as error:
        raise MlirtuneError(format_diagnostics(error), stage=stage) from None


def verify_lowered(module: ir.Module) -> None:
    """Verify a lowered module once where passes did not verify after each step (run_pipeline
    calls it last): a pass that left invalid IR is then an error before the JIT, not a crash
    inside it."""
    if COMPILE_CHECKS.verify_each_pass:
        return
    try:
        module.operation.verify()
    except ir.MLIRError as error:
        raise MlirtuneError(
            "the lowered module is invalid (rerun outside the tuner, where every pass is "
            f"verified, to find the pass):\n{format_diagnostics(error, op_dumps=False)}",
            stage="lowering",
        ) from None
