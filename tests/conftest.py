"""Shared fixtures: one JIT engine per session (compiled kernels are cached per workload)."""

import os

import numpy as np
import pytest

from mlirtune.engine import MlirJitEngine
from mlirtune.targets import fma_in_flight
from mlirtune.targets.host_cpu import NOMINAL_FMA_IN_FLIGHT
from tests.payloads import MATMUL_16x8x32


def pytest_configure(config):
    """The selectors' register tiles follow the FMAs the host keeps in flight, which
    HostCPU measures (targets/fma_in_flight.py): the tests pin the nominal figure, before
    any module builds a HostCPU, so that their selections are the same on every CI host
    (tests/targets/test_fma_in_flight.py measures it)."""
    os.environ[fma_in_flight.VARIABLE] = str(NOMINAL_FMA_IN_FLIGHT)


@pytest.fixture(autouse=True, scope="session")
def _no_user_spec_libraries(tmp_path_factory):
    """Keep the developer's own spec libraries ($MLIRTUNE_SPECS, ~/.config/mlirtune/specs)
    out of every test: compiles see only the shipped defaults unless a test adds some. The
    cache (measured peaks, the default tuning database) goes to a scratch folder too.
    Output is as wide as with no terminal wherever the tests run (the fallback widths of
    help text and reports; pytest-xdist tells its workers COLUMNS=80)."""
    patch = pytest.MonkeyPatch()
    patch.delenv("MLIRTUNE_SPECS", raising=False)
    patch.delenv("COLUMNS", raising=False)
    patch.delenv("LINES", raising=False)
    patch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("config")))
    patch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
    yield
    patch.undo()


@pytest.fixture(scope="session")
def engine() -> MlirJitEngine:
    return MlirJitEngine()


@pytest.fixture
def matmul_files(tmp_path):
    """mm.mlir (16x8 @ 8x32 into its last argument) with a.npy, b.npy, the right c.npy and
    a wrong.npy that is off by one everywhere."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((16, 8)).astype(np.float32)
    b = rng.standard_normal((8, 32)).astype(np.float32)
    (tmp_path / "mm.mlir").write_text(MATMUL_16x8x32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    np.save(tmp_path / "c.npy", a @ b)
    np.save(tmp_path / "wrong.npy", a @ b + 1)
    return tmp_path


@pytest.fixture
def peaks_file(tmp_path, monkeypatch):
    """The measured-peaks cache (mlirtune.peak) of a test of its own, not yet written."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "mlirtune" / "peaks.json"
