"""Element types of MLIR payloads mapped back to mlirtune's DTypes."""

from __future__ import annotations

from mlir import ir

from mlirtune.interfaces.dtype import DTYPES, DType
from mlirtune.interfaces.errors import UsageError


def dtype_of_mlir(element_type: ir.Type) -> DType:
    """Map an MLIR element type back to a DType (used when inspecting user payloads)."""
    for dtype in DTYPES.values():
        if dtype.mlir() == element_type:
            return dtype
    raise UsageError(f"unsupported element type {element_type}", stage="inspect")
