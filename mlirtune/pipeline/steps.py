"""Descriptor steps: named Python IR rewrites a pipeline runs between its passes.

A `step: NAME {key=value ...}` stage calls STEPS[NAME] on the module in place, with the
stage's arguments as keyword arguments (e.g. `expand-exp {isa=$ISA}`: the target's vector ISA
picks how exp scales by a power of two). Steps are for fix-ups that no upstream pass performs
(e.g. `prepare-gpu-kernels`: FMA contraction and noalias kernel arguments between kernel
outlining and `nvvm-attach-target`), and for upstream pipelines that run only where they have
work (`deallocate-buffers`).
"""

from __future__ import annotations

import inspect

from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.schedule import Step
from mlirtune.ir.column_slices import slice_columns_flat
from mlirtune.ir.deallocate import deallocate_buffers
from mlirtune.ir.expand_exp import expand_exp
from mlirtune.ir.expand_math import expand_math
from mlirtune.ir.gpu import prepare_kernels, record_launches
from mlirtune.ir.prefetch import prefetch_next_tile
from mlirtune.ir.strided_copies import copy_strided_as_loops
from mlirtune.schedules.registry import FAMILIES

# Steps of the lowering itself, whatever family scheduled the payload; each family adds its
# own (ScheduleFamily.steps).
LOWERING_STEPS: dict[str, Step] = {
    "deallocate-buffers": deallocate_buffers,
    "prepare-gpu-kernels": prepare_kernels,
    "record-gpu-launches": record_launches,
    "expand-math": expand_math,
    "expand-exp": expand_exp,
    "prefetch-next-tile": prefetch_next_tile,
    "copy-strided-as-loops": copy_strided_as_loops,
    "slice-columns-flat": slice_columns_flat,
}


def _all_steps() -> dict[str, Step]:
    steps = dict(LOWERING_STEPS)
    for family in FAMILIES.values():
        twice = sorted(set(steps) & set(family.steps))
        assert not twice, f"step(s) {', '.join(twice)} registered twice ({family.name})"
        steps.update(family.steps)
    return steps


STEPS = _all_steps()


def step_named(name: str) -> Step:
    """The registered step called `name`, or a UsageError listing them."""
    try:
        return STEPS[name]
    except KeyError:
        raise UsageError(
            f"unknown step {name!r}; known steps: {', '.join(STEPS)}", stage="pipeline"
        ) from None


def check_step_arguments(name: str, arguments: dict[str, object]) -> None:
    """A UsageError naming the arguments step `name` does not take, and those it does."""
    taken = list(inspect.signature(step_named(name)).parameters)[1:]  # after the module
    unknown = sorted(set(arguments) - set(taken))
    if unknown:
        raise UsageError(
            f"step {name} takes no argument(s) {', '.join(unknown)}; "
            f"it takes {', '.join(taken) or 'none'}",
            stage="pipeline",
        )
