"""PyTorch ingress: `workload(module, example_inputs)` imports a `torch.nn.Module` through
torch.export and torch-mlir into a Workload that runs, benchmarks and tunes like a built-in.
Needs the `torch` extra (torch and torch-mlir); the rest of mlirtune runs without it.
"""

from __future__ import annotations

from mlirtune.torch.importer import import_module, require_torch
from mlirtune.torch.workload import TorchWorkload


def workload(
    module: object, example_inputs: tuple[object, ...], weights: str = "inputs"
) -> TorchWorkload:
    """The workload of `module` called on `example_inputs` (a tuple of tensors); `weights`
    is "inputs" (parameters and buffers passed as leading arguments, the default) or
    "constants" (baked into the IR)."""
    return TorchWorkload(import_module(module, example_inputs, weights))


__all__ = ["TorchWorkload", "require_torch", "workload"]
