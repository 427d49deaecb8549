"""Transform-dialect schedule builders: small functions that return an `ir.Module`."""

from mlirtune.schedules.builder import ScheduleBuilder
from mlirtune.schedules.library import SCHEDULES, ScheduleEntry, schedule_named

__all__ = ["SCHEDULES", "ScheduleBuilder", "ScheduleEntry", "schedule_named"]
