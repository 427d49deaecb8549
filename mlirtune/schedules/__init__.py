"""Schedule families: one per kind of schedule, each owning its transform builder, its knobs
and their defaults, its selector per target kind, its constraints and its cost model
(mlirtune.schedules.registry lists them)."""

from mlirtune.schedules.builder import ScheduleBuilder

__all__ = ["ScheduleBuilder"]
