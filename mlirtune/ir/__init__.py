"""Small helpers over the MLIR Python bindings: contexts, parsing with diagnostics."""

from mlirtune.ir.context import new_context, parse_module, run_passes

__all__ = ["new_context", "parse_module", "run_passes"]
