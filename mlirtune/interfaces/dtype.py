"""Element types known to mlirtune: their numpy, MLIR and tolerance views."""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np
from mlir import ir

from mlirtune.interfaces.errors import UsageError

# Builders of the float types' MLIR forms (integers are built from their width).
MLIR_FLOAT_TYPES = {
    "f64": ir.F64Type.get,
    "f32": ir.F32Type.get,
    "bf16": ir.BF16Type.get,
    "f16": ir.F16Type.get,
}


@dataclass(frozen=True)
class DType:
    """One element type. `rtol`/`atol_per_term` set the verification tolerance."""

    name: str
    numpy: type
    rtol: float
    atol_per_term: float

    def mlir(self) -> ir.Type:
        """The MLIR element type; needs an active context."""
        if self.is_integer:
            return ir.IntegerType.get_signless(8 * self.itemsize)
        return MLIR_FLOAT_TYPES[self.name]()

    def zero(self) -> ir.Attribute:
        """0 of this type as an MLIR attribute (a padding value); needs an active context."""
        if self.is_integer:
            return ir.IntegerAttr.get(self.mlir(), 0)
        return ir.FloatAttr.get(self.mlir(), 0.0)

    @property
    def is_integer(self) -> bool:
        return bool(np.issubdtype(self.numpy, np.integer))

    @property
    def unwritten(self) -> float | int:
        """The value outputs start as, so that a kernel that skips one fails verification:
        NaN, or -1 for integers (indices), which have no NaN."""
        return -1 if self.is_integer else np.nan

    @property
    def itemsize(self) -> int:
        return np.dtype(self.numpy).itemsize


DTYPES: dict[str, DType] = {
    "f32": DType("f32", np.float32, rtol=1e-4, atol_per_term=1e-6),
    "f64": DType("f64", np.float64, rtol=1e-10, atol_per_term=1e-13),
    "bf16": DType("bf16", ml_dtypes.bfloat16, rtol=2e-2, atol_per_term=4e-3),
    # A value held in f16 carries 11 significant bits (rounding error 2^-11 = 4.9e-4), 3 more
    # than bf16's 8 (2^-8 = 3.9e-3): bf16's tolerance scaled by 2^-3. The tolerance is that
    # of outputs stored in f16; f16 matmuls sum in f32 and are checked at f32's (their
    # reference computes from the same rounded operands).
    "f16": DType("f16", np.float16, rtol=2.5e-3, atol_per_term=5e-4),
    # Integers are exact: indices (argmax, argmin), int8 operands (widened to int16 for
    # vpmaddwd) and their int32 sums.
    "i64": DType("i64", np.int64, rtol=0.0, atol_per_term=0.0),
    "i32": DType("i32", np.int32, rtol=0.0, atol_per_term=0.0),
    "i16": DType("i16", np.int16, rtol=0.0, atol_per_term=0.0),
    "i8": DType("i8", np.int8, rtol=0.0, atol_per_term=0.0),
}
FLOAT_DTYPES = ("f32", "f64", "bf16", "f16")


def element_bytes(name: str) -> int:
    """Bytes per element of the MLIR element type `name` (4 for one without a DType)."""
    dtype = DTYPES.get(name)
    return 4 if dtype is None else dtype.itemsize


def dtype_named(name: str) -> DType:
    """Look a dtype up by its MLIR spelling, with a clear error for unknown names."""
    try:
        return DTYPES[name]
    except KeyError:
        raise UsageError(
            f"unknown dtype {name!r}; expected one of {', '.join(DTYPES)}", stage="workload"
        ) from None
