"""mlirtune: describe, lower, verify, benchmark and tune MLIR tensor kernels.

The workload types import MLIR, so they load on first use: a GPU machine without MLIR can
still import mlirtune.runtime.cuda to run programs compiled elsewhere.
"""

from __future__ import annotations

import importlib
import sys

from mlirtune.interfaces.errors import MlirtuneError, UsageError, VerificationError

# Triton (which PyTorch's Linux wheels bring, and import when torch.export or torch.compile
# first loads) carries an LLVM of its own: loaded after this process has compiled a kernel,
# it aborts the process. PyTorch's CPU paths do not need it, so it stays unloaded here.
sys.modules.setdefault("triton", None)  # type: ignore[arg-type]

__version__ = "0.2.0"

_WORKLOAD_TYPES = ("ArgSpec", "Complexity", "Workload")

__all__ = [*_WORKLOAD_TYPES, "MlirtuneError", "UsageError", "VerificationError", "__version__"]


def __getattr__(name: str) -> object:
    if name in _WORKLOAD_TYPES:
        return getattr(importlib.import_module("mlirtune.interfaces.workload"), name)
    raise AttributeError(f"module 'mlirtune' has no attribute {name!r}")
