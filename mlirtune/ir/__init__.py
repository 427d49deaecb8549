"""Small helpers over the MLIR Python bindings: contexts, parsing with diagnostics, dtypes."""

from mlirtune.ir.context import new_context, parse_module, run_passes
from mlirtune.ir.dtypes import DTYPES, DType, dtype_named

__all__ = ["DTYPES", "DType", "dtype_named", "new_context", "parse_module", "run_passes"]
