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
from collections.abc import Callable

from mlirtune.interfaces.errors import UsageError
from mlirtune.ir.amx_accumulators import hoist_amx_accumulators
from mlirtune.ir.bf16_shuffles import shuffle_bf16_as_i16
from mlirtune.ir.deallocate import deallocate_buffers
from mlirtune.ir.dynamic_shared import extern_dynamic_shared_memory, use_dynamic_shared_memory
from mlirtune.ir.expand_exp import expand_exp
from mlirtune.ir.expand_math import expand_math
from mlirtune.ir.flat_conv import flatten_conv_rows
from mlirtune.ir.flatten_transfers import flatten_narrow_transfers
from mlirtune.ir.gpu import prepare_kernels, record_launches
from mlirtune.ir.pair_products import pair_products
from mlirtune.ir.prefetch import prefetch_next_tile
from mlirtune.ir.prefetch_ahead import prefetch_panel_ahead
from mlirtune.ir.prefetch_panel import prefetch_next_panel
from mlirtune.ir.stages import pipeline_shared_copies
from mlirtune.ir.warp_mma import lower_warp_mma
from mlirtune.ir.word_transposes import transpose_groups_as_words
from mlirtune.ir.workgroup import share_workgroup_tiles
from mlirtune.schedules.contraction.widen import widen_narrow_operands

Step = Callable[..., None]  # (module, **arguments)

STEPS: dict[str, Step] = {
    "deallocate-buffers": deallocate_buffers,
    "prepare-gpu-kernels": prepare_kernels,
    "dynamic-shared-memory": use_dynamic_shared_memory,
    "extern-dynamic-shared-memory": extern_dynamic_shared_memory,
    "record-gpu-launches": record_launches,
    "share-workgroup-tiles": share_workgroup_tiles,
    "lower-warp-mma": lower_warp_mma,
    "pipeline-shared-copies": pipeline_shared_copies,
    "flatten-narrow-transfers": flatten_narrow_transfers,
    "flatten-conv-rows": flatten_conv_rows,
    "expand-math": expand_math,
    "expand-exp": expand_exp,
    "prefetch-next-tile": prefetch_next_tile,
    "prefetch-next-panel": prefetch_next_panel,
    "prefetch-panel-ahead": prefetch_panel_ahead,
    "pair-products": pair_products,
    "hoist-amx-accumulators": hoist_amx_accumulators,
    "shuffle-bf16-as-i16": shuffle_bf16_as_i16,
    "transpose-groups-as-words": transpose_groups_as_words,
    "widen-narrow-operands": widen_narrow_operands,
}


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
