"""The OpenMP runtime that parallel kernels run on: a schedule's `scf.forall` becomes an
OpenMP worksharing loop (lower_cpu.yaml), whose calls the JIT resolves in the intel-openmp
package's `libiomp5.so`. Its threads spin a while after each parallel loop, so that the next
call starts at once (MLIR's async runtime, which wakes sleeping threads per call, spent about
0.1 ms there: a 1.3 ms convolution scaled 1.0x on two cores, 2.0x on this runtime); a
benchmark lets them sleep when it is done (`release_threads`), so that what it times next
has the cores to itself.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.metadata

from mlirtune.interfaces.errors import MlirtuneError

OPENMP_PACKAGE = "intel-openmp"
OPENMP_LIBRARY = "libiomp5.so"
# omp_pause_resource_all's kind: a soft pause puts the threads to sleep and keeps them.
OMP_PAUSE_SOFT = 1


@functools.cache
def openmp_library() -> str:
    """Absolute path of the OpenMP runtime shipped by the intel-openmp package."""
    try:
        files = importlib.metadata.distribution(OPENMP_PACKAGE).files or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for file in files:
        if file.name == OPENMP_LIBRARY:
            return str(file.locate().resolve())
    raise MlirtuneError(
        f"kernels on several threads need the OpenMP runtime {OPENMP_LIBRARY} of the "
        f"{OPENMP_PACKAGE} package, which is not installed (pip install {OPENMP_PACKAGE})",
        stage="toolchain",
    )


@functools.cache
def _runtime() -> ctypes.CDLL:
    """The runtime, loaded once and kept for the life of the process: its threads outlive
    any one kernel, so no JIT engine may unload it. Loaded with local symbols, so that a
    library that brings its own OpenMP (PyTorch's libgomp) keeps binding to that one."""
    return ctypes.CDLL(openmp_library())


def load_openmp() -> str:
    """Load the runtime for parallel kernels; returns its path, for the JIT to resolve in."""
    _runtime()
    return openmp_library()


def release_threads() -> None:
    """Put the runtime's spinning threads to sleep (a no-op before it is loaded)."""
    if _runtime.cache_info().currsize:
        _runtime().omp_pause_resource_all(OMP_PAUSE_SOFT)
