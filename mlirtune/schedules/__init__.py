"""Transform-dialect schedule builders: small functions that return an `ir.Module`."""

from mlirtune.schedules.builder import ScheduleBuilder
from mlirtune.schedules.contraction import contraction_schedule
from mlirtune.schedules.elementwise import elementwise_schedule

__all__ = ["ScheduleBuilder", "contraction_schedule", "elementwise_schedule"]
