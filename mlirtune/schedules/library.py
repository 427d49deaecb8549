"""The schedule library: named, parameterised schedule builders keyed by root-op kind.

Pipeline descriptors name these (`schedule: contraction {MC=$MC ...}`), workloads use them for
`schedule_module`, and targets pick their parameters. Each entry declares its parameters and
their defaults in one place.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mlir import ir

from mlirtune.errors import UsageError
from mlirtune.ir.roots import OpInfo
from mlirtune.schedules.contraction import (
    CONTRACTION_KNOBS,
    CONTRACTION_OPTIONAL_PARAMETERS,
    CONTRACTION_PARAMETERS,
    contraction_schedule,
)
from mlirtune.schedules.convolution import (
    CONVOLUTION_KNOBS,
    convolution_parameters,
    convolution_schedule,
)
from mlirtune.schedules.elementwise import (
    ELEMENTWISE_KNOBS,
    ELEMENTWISE_PARAMETERS,
    elementwise_schedule,
)
from mlirtune.schedules.knobs import Knob
from mlirtune.schedules.packing import (
    PACKED_CONTRACTION_KNOBS,
    PACKED_CONTRACTION_PARAMETERS,
    packed_contraction_schedule,
)
from mlirtune.schedules.reduction import ROWWISE_KNOBS, ROWWISE_PARAMETERS, rowwise_schedule

ITEMSIZE = {"f32": 4, "f64": 8, "bf16": 2}


@dataclass(frozen=True)
class ScheduleEntry:
    """A schedule builder, the root kinds it handles, its parameter defaults and the knobs
    (tunable parameters) a tuner searches over."""

    name: str
    description: str
    root_kinds: tuple[str, ...]
    defaults: Callable[[OpInfo], dict[str, int]]
    build: Callable[[OpInfo, dict[str, int]], ir.Module]
    knobs: tuple[Knob, ...]

    def parameters(self, op: OpInfo, values: dict[str, int] | None = None) -> dict[str, int]:
        """Defaults for `op` overlaid with `values`; unknown names or non-integers fail."""
        resolved = self.defaults(op)
        for key, value in (values or {}).items():
            if key not in resolved:
                raise UsageError(
                    f"schedule {self.name}: unknown parameter {key!r}; "
                    f"known: {', '.join(resolved)}",
                    stage="schedule",
                )
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise UsageError(
                    f"schedule {self.name}: parameter {key}={value!r} must be a positive integer",
                    stage="schedule",
                )
            resolved[key] = value
        return resolved


def _shape(op: OpInfo) -> list[int]:
    return [op.dims["ROWS"], op.dims["COLS"]]


SCHEDULES: dict[str, ScheduleEntry] = {
    entry.name: entry
    for entry in (
        ScheduleEntry(
            "contraction",
            "cache + register tiling, fused epilogue, broadcast/FMA micro-kernel",
            ("matmul", "batch_matmul"),
            lambda op: {**CONTRACTION_PARAMETERS, **CONTRACTION_OPTIONAL_PARAMETERS},
            contraction_schedule,
            CONTRACTION_KNOBS,
        ),
        ScheduleEntry(
            "packed_contraction",
            "operands packed into register-tile blocks, broadcast/FMA micro-kernel",
            ("matmul",),
            lambda op: dict(PACKED_CONTRACTION_PARAMETERS),
            packed_contraction_schedule,
            PACKED_CONTRACTION_KNOBS,
        ),
        ScheduleEntry(
            "convolution",
            "output-row tiles, per-tap 1-D decomposition, vectorized outer products",
            ("conv2d",),
            lambda op: convolution_parameters(ITEMSIZE[op.element_type]),
            lambda op, p: convolution_schedule(loop_sizes=list(op.dims.values()), parameters=p),
            CONVOLUTION_KNOBS,
        ),
        ScheduleEntry(
            "rowwise",
            "row tiles fusing row reductions (softmax), column-tiled vector loops",
            ("reduction",),
            lambda op: dict(ROWWISE_PARAMETERS),
            lambda op, p: rowwise_schedule(shape=_shape(op), parameters=p),
            ROWWISE_KNOBS,
        ),
        ScheduleEntry(
            "elementwise",
            "2-D tiles of the last op with its producers fused, vectorized",
            ("elementwise",),
            lambda op: dict(ELEMENTWISE_PARAMETERS),
            lambda op, p: elementwise_schedule(
                anchor_op="linalg.generic", shape=_shape(op), parameters=p
            ),
            ELEMENTWISE_KNOBS,
        ),
    )
}


def schedule_named(name: str) -> ScheduleEntry:
    """The library entry called `name`, or a UsageError listing them."""
    try:
        return SCHEDULES[name]
    except KeyError:
        raise UsageError(
            f"unknown schedule {name!r}; the library has {', '.join(SCHEDULES)} "
            "(or give a .mlir transform file)",
            stage="schedule",
        ) from None
