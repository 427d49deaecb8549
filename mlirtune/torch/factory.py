"""`--torch FILE.py[:FACTORY]`: a PyTorch module from a Python file, imported into a workload.

Two forms are taken:
- `FILE.py:FACTORY`: FACTORY() returns (module, example_inputs);
- `FILE.py`, a problem file in the KernelBench convention: it defines `Model`,
  `get_inputs()` and `get_init_inputs()`; the module is Model(*get_init_inputs()) on
  get_inputs(), and `batch` (--batch N) replaces the file's module-level `batch_size` before
  the inputs are made.

Modules and inputs are made with torch's random seed at 0, so that a run repeats. Every way
this can go wrong is a UsageError naming the file.
"""

from __future__ import annotations

import runpy
from collections.abc import Callable
from pathlib import Path

from mlirtune.interfaces.errors import UsageError
from mlirtune.torch.importer import require_torch
from mlirtune.torch.workload import TorchWorkload

PROBLEM_NAMES = ("Model", "get_inputs", "get_init_inputs")


def workload_from_factory(spec: str, batch: int | None = None) -> TorchWorkload:
    """The workload of `FILE.py:FACTORY`'s module on its example inputs, or of the problem
    file `FILE.py`'s (KernelBench's convention) at batch size `batch` (None: the file's)."""
    path_text, sep, name = spec.rpartition(":")
    if not sep or not name.strip() or name.endswith(".py"):  # no factory: a problem file
        path_text, name = spec.removesuffix(":"), ""
    path = Path(path_text)
    if not path.is_file():
        raise UsageError(f"--torch: {path}: no such file", stage="torch")
    require_torch()
    import torch

    namespace = _run(path)
    torch.manual_seed(0)
    if name:
        if batch is not None:
            raise UsageError(
                f"--batch applies to problem files (Model, get_inputs, get_init_inputs), not "
                f"to {path}:{name}; the factory makes its own inputs",
                stage="torch",
            )
        made = _call(path, name, namespace)()
        if not (isinstance(made, tuple | list) and len(made) == 2):
            raise UsageError(
                f"{path}:{name}() must return (module, example_inputs), not {type(made).__name__}",
                stage="torch",
            )
        module, example_inputs = made
    else:
        module, example_inputs = _problem(path, namespace, batch)
    from mlirtune.torch import workload

    inputs = (
        tuple(example_inputs) if isinstance(example_inputs, tuple | list) else (example_inputs,)
    )
    return workload(module, inputs)


def _problem(path: Path, namespace: dict[str, object], batch: int | None) -> tuple[object, object]:
    """The module and inputs of a KernelBench-convention problem file."""
    missing = [n for n in PROBLEM_NAMES if not callable(namespace.get(n))]
    if missing:
        known = sorted(k for k, v in namespace.items() if callable(v) and not k.startswith("_"))
        raise UsageError(
            f"{path}: no {', '.join(missing)}: give FILE.py:FACTORY, or a problem file defining "
            f"{', '.join(PROBLEM_NAMES)} (its functions: {', '.join(known) or 'none'})",
            stage="torch",
        )
    if batch is not None:
        # The functions read the file's own globals, not the copy runpy returns.
        inputs_globals = namespace["get_inputs"].__globals__  # type: ignore[union-attr]
        if "batch_size" not in inputs_globals:
            raise UsageError(f"{path}: --batch needs a module-level batch_size", stage="torch")
        inputs_globals["batch_size"] = batch
    init = _call(path, "get_init_inputs", namespace)()
    module = _call(path, "Model", namespace)(*(init or ()))
    return module, _call(path, "get_inputs", namespace)()


def _run(path: Path) -> dict[str, object]:
    """The globals of `path`, run as a script; its failures as one UsageError."""
    try:
        return runpy.run_path(str(path))
    except SystemExit as exit_:
        raise UsageError(
            f"{path}: running it called sys.exit({exit_.code!r})", stage="torch"
        ) from None
    except Exception as error:
        raise UsageError(
            f"{path}: running it failed: {type(error).__name__}: {error}", stage="torch"
        ) from None


def _call(path: Path, name: str, namespace: dict[str, object]) -> Callable[..., object]:
    """`namespace[name]`, wrapped so that what it raises (or a sys.exit) is one UsageError
    naming `path` and the function."""
    function = namespace.get(name)
    if not callable(function):
        known = sorted(k for k, v in namespace.items() if callable(v) and not k.startswith("_"))
        raise UsageError(
            f"{path}: no function {name!r}; its functions: {', '.join(known) or 'none'}",
            stage="torch",
        )

    def called(*args: object) -> object:
        try:
            return function(*args)
        except SystemExit as exit_:
            raise UsageError(
                f"{path}:{name}() called sys.exit({exit_.code!r})", stage="torch"
            ) from None
        except Exception as error:
            raise UsageError(
                f"{path}:{name}(): {type(error).__name__}: {error}", stage="torch"
            ) from None

    return called
