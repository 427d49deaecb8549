"""Tests of the PyTorch ingress; `needs_torch` skips a module without the torch extra."""

import importlib.util

import pytest

needs_torch = pytest.mark.skipif(
    importlib.util.find_spec("torch_mlir") is None or importlib.util.find_spec("torch") is None,
    reason="the torch extra is not installed (pip install -e '.[torch]')",
)
