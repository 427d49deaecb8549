"""mlirtune: describe, lower, verify, benchmark and tune MLIR tensor kernels."""

from mlirtune.errors import MlirtuneError, UsageError, VerificationError
from mlirtune.workload import Complexity, Workload

__version__ = "0.1.0"

__all__ = [
    "Complexity",
    "MlirtuneError",
    "UsageError",
    "VerificationError",
    "Workload",
    "__version__",
]
