"""The schedule families a pipeline can name (`schedule: contraction {MR=$MR ...}`), and the
one a lowering's pipeline binds to its slots.

Adding a family is one line in FAMILIES.
"""

from __future__ import annotations

from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.lowering import Lowering
from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.schedule import ScheduleFamily
from mlirtune.schedules.axis_reduction import AXIS_REDUCTION_FAMILY
from mlirtune.schedules.channel_norm import CHANNEL_NORM
from mlirtune.schedules.contraction import CONTRACTION
from mlirtune.schedules.convolution import CONVOLUTION
from mlirtune.schedules.depthwise import DEPTHWISE
from mlirtune.schedules.elementwise import ELEMENTWISE
from mlirtune.schedules.full_reduction import FULL_REDUCTION
from mlirtune.schedules.generic import GENERIC
from mlirtune.schedules.gpu_contraction import GPU_CONTRACTION
from mlirtune.schedules.pooling import POOLING
from mlirtune.schedules.rowwise import ROWWISE

FAMILIES: dict[str, ScheduleFamily] = {
    family.name: family
    for family in (
        CONTRACTION,
        CONVOLUTION,
        ROWWISE,
        ELEMENTWISE,
        GENERIC,
        GPU_CONTRACTION,
        AXIS_REDUCTION_FAMILY,
        POOLING,
        DEPTHWISE,
        FULL_REDUCTION,
        CHANNEL_NORM,
    )
}


# The families that recognise root ops, asked in this order (a pooling or depthwise op is
# its family's alone; a convolution before a contraction, an axis reduction before a row
# reduction, and any other windowed op or reduction last); an element-wise chain's root is
# taken only where no op is one.
ROOT_OWNERS: tuple[ScheduleFamily, ...] = (
    POOLING,
    DEPTHWISE,
    CONVOLUTION,
    CONTRACTION,
    AXIS_REDUCTION_FAMILY,
    ROWWISE,
    GENERIC,
    ELEMENTWISE,
)
KIND_OWNER: dict[str, ScheduleFamily] = {
    kind: family for family in ROOT_OWNERS for kind in family.owns
}
assert len(KIND_OWNER) == sum(len(f.owns) for f in ROOT_OWNERS), "a root kind owned twice"


def family_named(name: str) -> ScheduleFamily:
    """The family called `name`, or a UsageError listing them."""
    try:
        return FAMILIES[name]
    except KeyError:
        raise UsageError(
            f"unknown schedule {name!r}; the library has {', '.join(FAMILIES)} "
            "(or give a .mlir transform file)",
            stage="schedule",
        ) from None


def bound_family(lowering: Lowering) -> tuple[ScheduleFamily, OpInfo, dict[str, str]]:
    """The pipeline's one library schedule stage: its family, the root op it works on and
    its knobs bound to descriptor slots (knob -> slot)."""
    descriptor = lowering.descriptor
    stages = [s for s in descriptor.stages if s.kind == "schedule"]
    library_stages = [s for s in stages if not s.name.endswith(".mlir")]
    if len(library_stages) != 1:
        raise UsageError(
            f"pipeline {descriptor.name} has {len(library_stages)} library schedule stages; "
            "the tuner needs exactly one to take its knobs from",
            stage="tune",
        )
    stage = library_stages[0]
    family = family_named(stage.name)
    op = next((r for r in lowering.roots if r.kind in family.root_kinds), None)
    if op is None:
        raise UsageError(
            f"the payload has no {' or '.join(family.root_kinds)} root op for schedule "
            f"{family.name} of pipeline {descriptor.name}",
            stage="tune",
        )
    slots = {
        knob: value[1:]
        for knob, value in stage.arguments.items()
        if isinstance(value, str) and value.startswith("$")
    }
    return family, op, slots
