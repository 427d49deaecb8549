"""mlirtune: describe, lower, verify, benchmark and tune MLIR tensor kernels."""

from mlirtune.interfaces.errors import MlirtuneError, UsageError, VerificationError
from mlirtune.interfaces.workload import ArgSpec, Complexity, Workload

__version__ = "0.2.0"

__all__ = [
    "ArgSpec",
    "Complexity",
    "MlirtuneError",
    "UsageError",
    "VerificationError",
    "Workload",
    "__version__",
]
