"""Shared fixtures: one JIT engine per session (compiled kernels are cached per workload)."""

import pytest

from mlirtune.engine import MlirJitEngine


@pytest.fixture(scope="session")
def engine() -> MlirJitEngine:
    return MlirJitEngine()
