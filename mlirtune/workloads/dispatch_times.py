"""Where a split payload's time goes: each distinct dispatch timed on the values it reads.

A model repeats its layers, so its dispatches are grouped by their code (the standalone
module's text): one group is timed once, as its first dispatch, and counts as many times as
it is called. The sum over groups is close to the whole payload's time (the calls between
dispatches are not in it); each group's share of that sum says what to tune first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mlirtune.interfaces.bench import BenchOptions
from mlirtune.interfaces.engine import Engine
from mlirtune.workloads.dispatches import DispatchWorkload

# The measuring time of one distinct dispatch: a profile of a model with tens of distinct
# dispatches stays within a minute or two.
MAX_TIME_S = 0.2


@dataclass(frozen=True)
class DispatchTime:
    """A group of dispatches with the same code: the first one, how many calls, the median
    seconds of one, and whether a schedule family took it."""

    dispatch: DispatchWorkload
    calls: int
    median_s: float
    scheduled: bool

    @property
    def total_s(self) -> float:
        return self.calls * self.median_s

    @property
    def roots_text(self) -> str:
        """The dispatch's root ops: kind and loop sizes, as `matmul M=197 N=768 K=192`."""
        roots = self.dispatch.roots
        if not roots:
            return "(no root op)"
        return "; ".join(
            f"{op.kind} " + " ".join(f"{k}={v}" for k, v in op.dims.items()) for op in roots
        )

    def to_json(self) -> dict[str, str | int | float | bool]:
        return {
            "function": self.dispatch.function,
            "kind": self.dispatch.kind,
            "calls": self.calls,
            "median_s": self.median_s,
            "scheduled": self.scheduled,
            "roots": self.roots_text,
        }


def dispatch_times(
    parts: list[DispatchWorkload],
    engine: Engine,
    max_time_s: float = MAX_TIME_S,
    progress: Callable[[int, int], None] | None = None,
) -> list[DispatchTime]:
    """The distinct dispatches of `parts` (from `dispatch_workloads`), each benchmarked on
    `engine` as a compile of the whole payload would lower it, slowest total first."""
    groups: dict[str, list[DispatchWorkload]] = {}
    for part in parts:
        groups.setdefault(part.text, []).append(part)
    options = BenchOptions(max_time_s=max_time_s, warmup_s=0.01)
    times = []
    for done, members in enumerate(groups.values()):
        first = members[0]
        result = engine.benchmark(first, check_correctness=False, options=options)
        # A chain of reductions is split again, as a payload of its own, into one dispatch.
        nested = result.extra.get("dispatches")
        if nested:
            scheduled = all(d["scheduled"] for d in nested)
        else:
            scheduled = engine.plan(first).descriptor.has_schedule_stage
        times.append(DispatchTime(first, len(members), result.median_s, scheduled))
        if progress:
            progress(done + 1, len(groups))
    return sorted(times, key=lambda t: t.total_s, reverse=True)
