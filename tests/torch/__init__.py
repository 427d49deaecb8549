"""Tests of the PyTorch ingress; `needs_torch` skips a module without the torch extra, and
`write_problem` / `problem_workload` make a problem file (KernelBench's convention) of a
test's source."""

import importlib.util
import textwrap
from pathlib import Path

import pytest

needs_torch = pytest.mark.skipif(
    importlib.util.find_spec("torch_mlir") is None or importlib.util.find_spec("torch") is None,
    reason="the torch extra is not installed (pip install -e '.[torch]')",
)


def write_problem(folder: Path, name: str, text: str) -> Path:
    """`text`, dedented, as the file `name` in `folder`."""
    path = folder / name
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def problem_workload(folder: Path, name: str, text: str):
    """The torch workload of the problem file `text`, written as `name` in `folder`."""
    from mlirtune.torch.factory import workload_from_factory

    return workload_from_factory(str(write_problem(folder, name, text)))
