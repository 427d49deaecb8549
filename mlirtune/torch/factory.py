"""`--torch FILE.py:FACTORY`: a Python file whose FACTORY() returns (module, example_inputs),
imported into a workload. Every way this can go wrong is a UsageError naming the file."""

from __future__ import annotations

import runpy
from pathlib import Path

from mlirtune.interfaces.errors import UsageError
from mlirtune.torch.importer import require_torch
from mlirtune.torch.workload import TorchWorkload


def workload_from_factory(spec: str) -> TorchWorkload:
    """The workload of `FILE.py:FACTORY`'s module on its example inputs."""
    path_text, sep, name = spec.rpartition(":")
    if not sep or not path_text or not name:
        raise UsageError(f"--torch {spec!r}: give FILE.py:FACTORY", stage="torch")
    path = Path(path_text)
    if not path.is_file():
        raise UsageError(f"--torch: {path}: no such file", stage="torch")
    require_torch()
    try:
        namespace = runpy.run_path(str(path))
    except SystemExit as exit_:
        raise UsageError(
            f"{path}: running it called sys.exit({exit_.code!r})", stage="torch"
        ) from None
    except Exception as error:
        raise UsageError(
            f"{path}: running it failed: {type(error).__name__}: {error}", stage="torch"
        ) from None
    factory = namespace.get(name)
    if not callable(factory):
        known = sorted(k for k, v in namespace.items() if callable(v) and not k.startswith("_"))
        raise UsageError(
            f"{path}: no function {name!r}; its functions: {', '.join(known) or 'none'}",
            stage="torch",
        )
    try:
        made = factory()
    except SystemExit as exit_:
        raise UsageError(
            f"{path}:{name}() called sys.exit({exit_.code!r})", stage="torch"
        ) from None
    except Exception as error:
        raise UsageError(
            f"{path}:{name}(): {type(error).__name__}: {error}", stage="torch"
        ) from None
    if not (isinstance(made, tuple | list) and len(made) == 2):
        raise UsageError(
            f"{path}:{name}() must return (module, example_inputs), not {type(made).__name__}",
            stage="torch",
        )
    module, example_inputs = made
    from mlirtune.torch import workload

    inputs = (
        tuple(example_inputs) if isinstance(example_inputs, tuple | list) else (example_inputs,)
    )
    return workload(module, inputs)
