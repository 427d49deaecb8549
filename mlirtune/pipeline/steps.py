"""Descriptor steps: named Python IR rewrites a pipeline runs between its passes.

A `step: NAME` stage calls STEPS[NAME] on the module in place. Steps are for fix-ups that
no upstream pass performs (e.g. `prepare-gpu-kernels`: FMA contraction and noalias kernel
arguments between kernel outlining and `nvvm-attach-target`); they take no arguments.
"""

from __future__ import annotations

from collections.abc import Callable

from mlir import ir

from mlirtune.interfaces.errors import UsageError
from mlirtune.ir.expand_exp import expand_exp
from mlirtune.ir.expand_math import expand_math
from mlirtune.ir.flatten_transfers import flatten_narrow_transfers
from mlirtune.ir.gpu import prepare_kernels

Step = Callable[[ir.Module], None]

STEPS: dict[str, Step] = {
    "prepare-gpu-kernels": prepare_kernels,
    "flatten-narrow-transfers": flatten_narrow_transfers,
    "expand-math": expand_math,
    "expand-exp": expand_exp,
}


def step_named(name: str) -> Step:
    """The registered step called `name`, or a UsageError listing them."""
    try:
        return STEPS[name]
    except KeyError:
        raise UsageError(
            f"unknown step {name!r}; known steps: {', '.join(STEPS)}", stage="pipeline"
        ) from None
