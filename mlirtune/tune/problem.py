"""The `generate` stage: what is being tuned, its search space and its database key.

A TuningProblem ties a workload to the pipeline that lowers it on a target: the root op the
pipeline's schedule family works on, the family's knobs mapped onto the descriptor's slots,
the constrained space, the baseline (the family's selector, then its defaults) and the
TuningKey its records are stored under.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from mlir import ir

from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.lowering import Lowering
from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.schedule import ScheduleFamily
from mlirtune.interfaces.target import Target
from mlirtune.interfaces.workload import Workload
from mlirtune.ir.context import new_context
from mlirtune.memory import WORKER_OVERHEAD_BYTES, check_memory
from mlirtune.pipeline.plan import plan_for
from mlirtune.schedules.registry import bound_family
from mlirtune.toolchain import current_toolchain, digest
from mlirtune.tune.evaluator import EvaluatorSettings
from mlirtune.tune.key import TuningKey
from mlirtune.tune.space import SearchSpace
from mlirtune.tune.space_for import space_for

Config = dict[str, int]


@dataclass(frozen=True)
class TuningProblem:
    """One workload on one target through one pipeline, ready to search."""

    workload: Workload
    target: Target
    pipeline: str | None
    # The plan and the schedule family behind the space; None for a space of another
    # compiler's knobs (mlirtune/iree), whose untuned config is `untuned`.
    lowering: Lowering | None
    family: ScheduleFamily | None
    op: OpInfo
    slots: dict[str, str]  # knob -> descriptor slot
    space: SearchSpace
    key: TuningKey
    untuned: Config | None = None
    # What a candidate's time covers, where it is not the whole workload: the FLOPs of the
    # one dispatch an IREE engine times.
    timed_flops: int | None = None

    @property
    def flops(self) -> int:
        """The floating-point operations of what a candidate's samples time."""
        if self.timed_flops is not None:
            return self.timed_flops
        return self.workload.get_complexity().flops

    @property
    def baseline(self) -> Config:
        """The config the pipeline uses untuned (selector, then the family's defaults), or
        the other compiler's own (`untuned`)."""
        if self.lowering is None:
            assert self.untuned is not None
            return dict(self.untuned)
        return {param: self.lowering.values[slot] for param, slot in self.slots.items()}

    def slot_values(self, config: Config) -> dict[str, int]:
        """A config of schedule parameters as the descriptor slot values engines take."""
        return {self.slots[param]: value for param, value in config.items()}

    def config_of(self, slot_values: dict[str, int]) -> Config:
        """The inverse of `slot_values`."""
        params = {slot: param for param, slot in self.slots.items()}
        return {params[slot]: value for slot, value in slot_values.items()}


def generate(
    workload: Workload,
    target: Target,
    pipeline: str | None = None,
    *,
    settings: EvaluatorSettings | None = None,
    memory_check: bool = True,
    search_threads: bool = False,
) -> TuningProblem:
    """Resolve the pipeline for `workload` on `target` and build its search space;
    `search_threads` adds the thread count to it (`searchable_threads`).

    Unless `memory_check` is off (nothing will run, e.g. to show the space), a workload whose
    worker processes (`settings`: their count and memory cap) would not fit in the memory
    budget is refused here, before any worker starts."""
    if memory_check:
        check_worker_memory(workload, settings or EvaluatorSettings())
    lowering = plan_for(workload, target, pipeline)
    descriptor = lowering.descriptor
    family, op, slots = bound_family(lowering)
    space = space_for(op, family.name, target, searchable_threads(target) if search_threads else ())
    unbound = sorted(set(space.domains) - set(slots))
    if unbound:
        raise UsageError(
            f"pipeline {descriptor.name} does not expose knob(s) {', '.join(unbound)} of "
            f"schedule {family.name} as slots, so they cannot be tuned; bind them in "
            f"{descriptor.path} (e.g. {unbound[0]}=${unbound[0]})",
            stage="tune",
        )
    slots = {param: slot for param, slot in slots.items() if param in space.domains}
    key = TuningKey(
        workload=workload_identity(workload, op),
        target=target.fingerprint(),
        toolchain=current_toolchain(),
        pipeline=descriptor.name,
        pipeline_hash=digest(
            {
                "schedule": family.name,
                "stages": [(s.kind, s.name, s.arguments) for s in descriptor.stages],
                "defaults": descriptor.params,
                # Only when searched, so keys of other runs stay as they were.
                **({"threads": "searched"} if search_threads else {}),
            }
        ),
    )
    return TuningProblem(workload, target, pipeline, lowering, family, op, slots, space, key)


def searchable_threads(target: Target) -> tuple[int, ...]:
    """Thread counts a search may try on `target`: the powers of two below its thread count,
    and that count (e.g. 1, 2, 4, 6 for 6)."""
    ceiling = target.pipeline_values().get("THREADS")
    if not isinstance(ceiling, int) or ceiling < 2:
        raise UsageError(
            f"searching the thread count needs a host target on 2 or more threads, not "
            f"{target!r} (tune --threads N --search-threads)",
            stage="tune",
        )
    powers = {1 << i for i in range(ceiling.bit_length()) if 1 << i < ceiling}
    return tuple(sorted(powers | {ceiling}))


def check_worker_memory(workload: Workload, settings: EvaluatorSettings) -> None:
    """Every worker holds the workload's inputs, buffers and reference at once, under an
    address-space cap of which the interpreter and libraries take WORKER_OVERHEAD_BYTES."""
    check_memory(
        workload,
        "tuning",
        processes=settings.worker_count(),
        process_limit=max(0, settings.worker_address_space() - WORKER_OVERHEAD_BYTES),
    )


def workload_identity(workload: Workload, op: OpInfo) -> dict[str, Any]:
    """Op kind, shapes, dtypes, the payload's hash and the workload's own options."""
    with new_context(), ir.Location.unknown():
        payload = str(workload.payload_module())
    return {
        "name": workload.name,
        "kind": op.kind,
        "dims": op.dims,
        "shapes": [list(spec.shape) for spec in workload.arguments()],
        "dtypes": [spec.dtype.name for spec in workload.arguments()],
        "payload_hash": hashlib.sha256(payload.encode()).hexdigest()[:16],
        "options": workload.describe(),
    }
