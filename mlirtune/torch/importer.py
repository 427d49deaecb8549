"""PyTorch modules into MLIR: `torch.export` here, then torch-mlir's FX importer down to
linalg on tensors in a child process (torch-mlir bundles an MLIR and LLVM of another version,
which cannot be loaded beside this project's), then the IR moved into this project's MLIR
through its generic text form, which both read.

Weights become function inputs by default (the module is called functionally, its
parameters and buffers passed first), or constants baked into the IR when asked.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mlirtune.interfaces.errors import UsageError

INSTALL = "pip install -e '.[torch]' (or pip install 'mlirtune[torch]')"
ENTRY = "main"


@dataclass(frozen=True)
class ImportedModule:
    """A module's linalg-on-tensors IR (generic form text, function @main), its inputs in
    call order (weights first when they are inputs) and torch eager's outputs on them;
    `module` is the torch.nn.Module itself, which takes the last `examples` inputs (the
    eager baseline)."""

    name: str
    text: str
    input_names: tuple[str, ...]
    inputs: tuple[np.ndarray, ...]
    outputs: tuple[np.ndarray, ...]
    module: object = None
    examples: int = 0


def require_torch() -> None:
    """A UsageError saying what to install when torch or torch-mlir is missing."""
    missing = [name for name in ("torch", "torch_mlir") if importlib.util.find_spec(name) is None]
    if missing:
        raise UsageError(
            f"importing PyTorch modules needs {' and '.join(missing)}, which is not installed: "
            f"{INSTALL}",
            stage="torch",
        )


def import_module(
    module: object, example_inputs: tuple[object, ...], weights: str = "inputs"
) -> ImportedModule:
    """Export `module` on `example_inputs` and import it as linalg on tensors."""
    require_torch()
    import torch

    if not isinstance(module, torch.nn.Module):
        raise UsageError(f"expected a torch.nn.Module, got {type(module).__name__}", stage="torch")
    if weights not in ("inputs", "constants"):
        raise UsageError(f"weights={weights!r}: give 'inputs' or 'constants'", stage="torch")
    examples = tuple(example_inputs)
    if not examples or not all(isinstance(x, torch.Tensor) for x in examples):
        raise UsageError("example inputs must be a non-empty tuple of tensors", stage="torch")
    module = module.eval()
    state = dict(module.named_parameters()) | dict(module.named_buffers())
    # Floating-point weights only: integer buffers (a batchnorm's batch count) stay constants.
    names = (
        tuple(n for n, t in state.items() if t.is_floating_point()) if weights == "inputs" else ()
    )
    weight_values = tuple(state[name].detach() for name in names)
    callable_module = _functional(module, names) if names else module
    arguments = (*weight_values, *examples)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch's own deprecations
        try:
            eager = callable_module(*arguments)
        except Exception as error:  # the module's own error on these inputs
            raise UsageError(
                f"{type(module).__name__} fails on its example inputs: {_first_line(error)}",
                stage="torch",
            ) from None
        outputs = eager if isinstance(eager, tuple | list) else (eager,)
        try:
            program = torch.export.export(callable_module, arguments)
        except Exception as error:  # torch.export's refusal (data-dependent control flow)
            raise UsageError(
                f"{type(module).__name__} cannot be imported (torch.export, then torch-mlir "
                f"to linalg): {_first_line(error)}",
                stage="torch",
            ) from None
    text = _to_linalg(program, type(module).__name__)
    return ImportedModule(
        name=type(module).__name__,
        text=text,
        input_names=(*names, *(f"input{i}" for i in range(len(examples)))),
        inputs=tuple(_numpy(x) for x in arguments),
        outputs=tuple(_numpy(y) for y in outputs),
        module=module,
        examples=len(examples),
    )


def _to_linalg(program: object, name: str) -> str:
    """The exported program as linalg on tensors (generic form), lowered by torch-mlir in a
    process of its own (see mlirtune/torch/to_linalg.py)."""
    import torch

    with tempfile.TemporaryDirectory(prefix="mlirtune-torch-") as folder:
        program_path, text_path = Path(folder) / "program.pt2", Path(folder) / "linalg.mlir"
        torch.export.save(program, program_path)
        script = Path(__file__).with_name("to_linalg.py")
        done = subprocess.run(
            [sys.executable, "-I", str(script), str(program_path), str(text_path), ENTRY],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
            raise UsageError(
                f"{name} cannot be imported (torch.export, then torch-mlir to linalg): "
                f"{lines[-1] if lines else f'torch-mlir exited {done.returncode}'}",
                stage="torch",
            )
        return text_path.read_text()


def _numpy(tensor: object) -> np.ndarray:
    import torch

    value = tensor.detach()
    if value.dtype == torch.bfloat16:
        import ml_dtypes

        return value.view(torch.int16).numpy().view(ml_dtypes.bfloat16).copy()
    return value.numpy().copy()


def _first_line(error: BaseException) -> str:
    lines = [line for line in str(error).strip().splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[0] if lines else ''}".rstrip(": ")


def _functional(module: object, names: tuple[str, ...]) -> object:
    """`module` called with its weights as leading arguments (torch.func.functional_call)."""
    import torch

    class Functional(torch.nn.Module):
        def forward(self, *args: torch.Tensor) -> object:
            state = dict(zip(names, args[: len(names)], strict=True))
            return torch.func.functional_call(module, state, args[len(names) :])

    return Functional()
