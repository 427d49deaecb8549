"""PyTorch modules into MLIR: `torch.export` here, then torch-mlir's FX importer down to
linalg on tensors in a child process (torch-mlir bundles an MLIR and LLVM of another version,
which cannot be loaded beside this project's), then the IR moved into this project's MLIR
through its generic text form, which both read.

Weights become function inputs by default (the module is called functionally, its
parameters and buffers passed first), or constants baked into the IR when asked. Python
numbers among the example inputs are baked in too; the tensors are the inputs.
"""

from __future__ import annotations

import importlib.util
import re
import signal
import subprocess
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mlirtune.contain.child import CHILD_BASE_BYTES, run_capped
from mlirtune.interfaces.errors import UsageError
from mlirtune.torch.conversions import cached_conversion, conversion_key, keep_conversion

INSTALL = "pip install -e '.[torch]' (or pip install 'mlirtune[torch]')"
# Address space torch and torch-mlir take in the conversion's child before any module
# (0.8 GiB measured after their imports); the compile ceiling comes on top.
ENTRY = "main"
# A Python number among a module's example inputs, baked into the IR as a constant.
Scalar = bool | int | float


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
    module = module.eval()
    examples, scalars = _tensors_and_scalars(tuple(example_inputs), type(module).__name__)
    eager_module = _bound(module, scalars)
    state = dict(module.named_parameters()) | dict(module.named_buffers())
    # Floating-point weights only: integer buffers (a batchnorm's batch count) stay constants.
    names = (
        tuple(n for n, t in state.items() if t.is_floating_point()) if weights == "inputs" else ()
    )
    weight_values = tuple(state[name].detach() for name in names)
    callable_module = _flat_outputs(_functional(module, names, scalars) if names else eager_module)
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
        outputs = eager
        try:
            program = torch.export.export(callable_module, arguments)
        except Exception as error:  # torch.export's refusal (data-dependent control flow)
            raise UsageError(
                f"{type(module).__name__} cannot be imported (torch.export, then torch-mlir "
                f"to linalg): {_first_line(error)}",
                stage="torch",
            ) from None
    _refuse_dynamic_shapes(program, type(module).__name__)
    text = _to_linalg(program, type(module).__name__)
    return ImportedModule(
        name=type(module).__name__,
        text=text,
        input_names=(*names, *(f"input{i}" for i in range(len(examples)))),
        inputs=tuple(_numpy(x) for x in arguments),
        outputs=tuple(_numpy(y) for y in outputs),
        module=eager_module,
        examples=len(examples),
    )


def _refuse_dynamic_shapes(program: object, name: str) -> None:
    """A UsageError naming the first op whose result's shape depends on the values (a
    boolean mask's selection, nonzero): kernels here are compiled for static shapes, and
    torch-mlir's conversion of such a program can run for minutes before it fails."""
    import torch

    for node in program.graph.nodes:
        value = node.meta.get("val")
        if isinstance(value, torch.Tensor) and not all(isinstance(d, int) for d in value.shape):
            frames = re.findall(
                r'File "([^"]+)", line (\d+).*\n\s*(.+)', node.meta.get("stack_trace") or ""
            )
            where = (
                f" at {frames[-1][0]}:{frames[-1][1]} ({frames[-1][2].strip()})" if frames else ""
            )
            raise UsageError(
                f"{name}: {node.target}{where} makes a tensor whose shape depends on the "
                "input's values; only static shapes can be compiled",
                stage="torch",
            )


def _to_linalg(program: object, name: str) -> str:
    """The exported program as linalg on tensors (generic form), lowered by torch-mlir in a
    process of its own (see mlirtune/torch/to_linalg.py), or kept from an earlier import
    of the same program (conversions.py)."""
    import torch

    with tempfile.TemporaryDirectory(prefix="mlirtune-torch-") as folder:
        program_path, text_path = Path(folder) / "program.pt2", Path(folder) / "linalg.mlir"
        torch.export.save(program, program_path)
        script = Path(__file__).with_name("to_linalg.py")
        key = conversion_key(program_path, script)
        kept = cached_conversion(key)
        if kept is not None:
            return kept
        child = run_capped(
            [sys.executable, "-I", str(script), str(program_path), str(text_path), ENTRY],
            f"{name}: torch-mlir's conversion to linalg",
            "torch",
        )
        if child.done.returncode != 0:
            raise UsageError(
                f"{name} cannot be imported (torch.export, then torch-mlir to linalg): "
                + _conversion_failure(child.done, child.cap, child.cap_origin),
                stage="torch",
            )
        text = text_path.read_text()
        keep_conversion(key, text)
        return text


def _conversion_failure(done: subprocess.CompletedProcess, cap: int | None, origin: str) -> str:
    """Why torch-mlir's child failed, in a line: out of memory under its cap, the signal
    that ended it, or its own error."""
    lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
    markers = ("MemoryError", "out of memory", "allocation failed", "bad_alloc")
    if cap is not None and any(marker in done.stderr for marker in markers):
        from mlirtune.memory import format_bytes

        return (
            f"torch-mlir's conversion ran out of memory under its cap of {format_bytes(cap)} "
            f"(the compile ceiling, {origin}, and {format_bytes(CHILD_BASE_BYTES)} for torch "
            "itself)"
        )
    if done.returncode < 0:
        return f"torch-mlir's conversion crashed ({signal.Signals(-done.returncode).name})"
    diagnostic = _first_diagnostic(done.stderr)
    if diagnostic:
        return diagnostic
    return lines[-1] if lines else f"torch-mlir exited {done.returncode}"


# An MLIR error diagnostic as torch-mlir prints it: its location (a call-site chain,
# innermost first), the message, and the op dumped after ": %".
DIAGNOSTIC = re.compile(r"^loc\((?P<loc>.*)\): error: (?P<message>.*?)(?:: %.*)?$", re.MULTILINE)
FILE_LINE = re.compile(r'"([^"]+)":(\d+):\d+')


def _first_diagnostic(stderr: str) -> str | None:
    """torch-mlir's first error as one line, the op and where the module made it (`error:
    failed to legalize operation 'torch.aten.convolution'` at the model's file and line),
    or None where it printed none; the exception after it only says that one was printed."""
    found = DIAGNOSTIC.search(stderr)
    if found is None:
        return None
    import torch

    # The innermost frame of the model's own code: not torch's layers, not this package.
    library = (Path(torch.__file__).parent, Path(__file__).parents[1])
    places = [
        (Path(file), line)
        for file, line in FILE_LINE.findall(found["loc"])
        if not any(Path(file).is_relative_to(folder) for folder in library)
    ]
    where = f" at {places[0][0].name}:{places[0][1]}" if places else ""
    return f"{found['message'].strip()}{where}"


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


def _flat_outputs(module: object) -> object:
    """`module` returning the tensors of its output as one flat tuple: a model's output
    class (transformers' `BaseModelOutput`, a dict, nested tuples) is a pytree the IR has
    no type for, and the child that runs torch-mlir has not imported the package that
    defines it."""
    import torch
    from torch.utils import _pytree

    class FlatOutputs(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = module

        def forward(self, *args: torch.Tensor) -> tuple[torch.Tensor, ...]:
            leaves = _pytree.tree_leaves(self.inner(*args))
            return tuple(leaf for leaf in leaves if isinstance(leaf, torch.Tensor))

    return FlatOutputs()


def _functional(module: object, names: tuple[str, ...], scalars: dict[int, Scalar]) -> object:
    """`module` called with its weights as leading arguments (torch.func.functional_call),
    then its tensor inputs, the `scalars` put back where they stood."""
    import torch

    class Functional(torch.nn.Module):
        def forward(self, *args: torch.Tensor) -> object:
            state = dict(zip(names, args[: len(names)], strict=True))
            inputs = _with_scalars(args[len(names) :], scalars)
            return torch.func.functional_call(module, state, inputs)

    return Functional()


def _tensors_and_scalars(
    examples: tuple[object, ...], name: str
) -> tuple[tuple[object, ...], dict[int, Scalar]]:
    """The tensors among `examples`, which become the function's inputs, and the Python
    numbers by position, which are baked in as the constants torch.export makes of them (a
    problem file's `get_inputs()` may return a scale beside its tensors)."""
    import torch

    tensors, scalars = [], {}
    for position, value in enumerate(examples):
        if isinstance(value, torch.Tensor):
            tensors.append(value)
        elif isinstance(value, (bool, int, float)):
            scalars[position] = value
        else:
            raise UsageError(
                f"{name}: example input {position} is a {type(value).__name__}; inputs are "
                "tensors, or Python numbers (bool, int, float) baked in as constants",
                stage="torch",
            )
    if not tensors:
        raise UsageError(f"{name}: the example inputs hold no tensor", stage="torch")
    return tuple(tensors), scalars


def _with_scalars(tensors: tuple[object, ...], scalars: dict[int, Scalar]) -> tuple[object, ...]:
    """The module's full argument list: `tensors` in order, `scalars` at their positions."""
    rest = iter(tensors)
    count = len(tensors) + len(scalars)
    return tuple(scalars[i] if i in scalars else next(rest) for i in range(count))


def _bound(module: object, scalars: dict[int, Scalar]) -> object:
    """`module` taking its tensor inputs alone, the `scalars` bound (itself if none)."""
    import torch

    if not scalars:
        return module

    class BoundScalars(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = module

        def forward(self, *tensors: torch.Tensor) -> object:
            return self.inner(*_with_scalars(tensors, scalars))

    return BoundScalars()
