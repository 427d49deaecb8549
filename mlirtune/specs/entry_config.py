"""A spec entry's config against its schedule family's model here: the constraints it
breaks, the knobs it leaves unset, whether the selector now chooses otherwise, and whether
the op it matched stores its operands as the entry's workload did."""

from __future__ import annotations

from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.lowering import Lowering
from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.schedule import ScheduleFamily
from mlirtune.interfaces.target import Target
from mlirtune.schedules.registry import bound_family


def config_violations(
    config: dict[str, int], op: OpInfo, lowering: Lowering, target: Target
) -> list[str]:
    """What `config` (slot values) breaks of the constraints the pipeline's schedule family
    puts on its knobs on `target`; empty when the family has no model here (nothing to
    check against). Knobs the entry does not set are checked at their defaults, which is
    what a compile gives them."""
    modelled = _entry_knobs(config, op, lowering, target)
    if modelled is None:
        return []
    family, knobs = modelled
    return family.violations(op, target, {**family.defaults(op), **knobs})


def unset_knobs(
    config: dict[str, int], op: OpInfo, lowering: Lowering, target: Target
) -> list[str]:
    """The knobs `config` (slot values) does not set, such as one added to the family after
    it was tuned, that the family's selector sets to other values than their defaults."""
    modelled = _entry_knobs(config, op, lowering, target)
    if modelled is None:
        return []
    family, knobs = modelled
    chosen, defaults = family.select(op, target), family.defaults(op)
    return [k for k, v in chosen.items() if k not in knobs and v != defaults[k]]


# A matmul workload's `transpose` option: whether A, and B, are stored transposed.
STORED_TRANSPOSED = {
    "none": (False, False),
    "a": (True, False),
    "b": (False, True),
    "ab": (True, True),
}


def layout_differs(workload: dict[str, object], op: OpInfo) -> bool:
    """Whether `op` stores an operand transposed where the entry's `workload` (its recorded
    options) did not, or the reverse. The matchers see shapes and element types only: an
    entry tuned on B [K, N] matched a Linear layer's B [N, K] of the same shape, whose
    packing its config had not been raced on (on an AMD Zen 3, 48 ms against 5)."""
    stored = STORED_TRANSPOSED.get(str(workload.get("transpose")))
    if stored is None:  # an entry of another kind, or of a model's dispatch
        return False
    return stored != (
        bool(op.attributes.get("transpose_a")),
        bool(op.attributes.get("transpose_b")),
    )


def selector_moved(config: dict[str, int], op: OpInfo, lowering: Lowering, target: Target) -> bool:
    """Whether the family's selector now chooses other values than `config` (slot values)
    for the knobs it sets; False where the family has no model for `op` here."""
    modelled = _entry_knobs(config, op, lowering, target)
    if modelled is None:
        return False
    family, knobs = modelled
    chosen = family.select(op, target)
    return any(chosen.get(knob, value) != value for knob, value in knobs.items())


def _entry_knobs(
    config: dict[str, int], op: OpInfo, lowering: Lowering, target: Target
) -> tuple[ScheduleFamily, dict[str, int]] | None:
    """The pipeline's schedule family and `config`'s values by knob name; None where the
    family has no model for `op` on `target` (nothing to check against)."""
    try:
        family, _, slots = bound_family(lowering)
    except UsageError:
        return None
    if op.kind not in family.root_kinds or not family.covers(target):
        return None
    knob_names = {knob.name for knob in family.knobs}
    by_slot = {slot: knob for knob, slot in slots.items() if knob in knob_names}
    return family, {by_slot[slot]: value for slot, value in config.items() if slot in by_slot}
