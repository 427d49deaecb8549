"""Check spec libraries: does each entry match its own payload, which earlier entry shadows
it, was it tuned on another CPU class (then it is not applied here), and is it stale (tuned
on another CPU of this class or with another toolchain) and if so still valid here?

Each entry's payload is rebuilt from the workload recorded in its metadata and every matcher
of the merged libraries is run on it (`probe`), so overlaps are found by the matchers
themselves, not by comparing metadata. An entry tuned on a dispatch of a model (`tune
--torch`) has no payload to rebuild without that model: its class and staleness are checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mlirtune.curation.export import payload_root, rebuild_workload
from mlirtune.interfaces.errors import MlirtuneError
from mlirtune.interfaces.target import Target
from mlirtune.pipeline.plan import plan_for
from mlirtune.schedules.registry import bound_family
from mlirtune.specs.entry_config import config_violations, selector_moved, unset_knobs
from mlirtune.specs.library import SpecLibrary
from mlirtune.specs.merge import merge, probe
from mlirtune.specs.specset import foreign_class, stale_reasons
from mlirtune.workloads.dispatches import DispatchWorkload


@dataclass
class EntryReport:
    """What `check` found about one entry (labels are `<library>:<entry>`)."""

    label: str
    pipeline: str | None
    workload: dict[str, Any] | None
    matches_own: bool | None = None  # None: no workload recorded, nothing to match
    shadowed_by: str | None = None  # an earlier entry for the same pipeline matching it
    also_matches: list[str] = field(default_factory=list)  # later entries it shadows
    foreign: str | None = None  # the other CPU class it was tuned on: not applied here
    stale: list[str] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)  # constraints its config breaks here
    error: str | None = None
    model: str | None = None  # the model whose dispatch it was tuned on: no payload here

    @property
    def ok(self) -> bool:
        return self.error is None and self.matches_own is not False and not self.broken


def check(libraries: list[SpecLibrary], target: Target) -> list[EntryReport]:
    """One report per entry of `libraries` merged in order (inside an MLIR context)."""
    merged, origins = merge(libraries, "check")
    reports = []
    for index, origin in enumerate(origins):
        entry, meta = origin.entry, origin.entry.metadata
        report = EntryReport(origin.label, entry.pipeline, meta.get("workload"))
        report.foreign = foreign_class(entry, target)
        report.stale = stale_reasons(entry, target)
        reports.append(report)
        if report.workload is None or "kind" not in meta:
            continue
        if report.workload.get("name") == DispatchWorkload.name:
            # Tuned on a dispatch of a model (`tune --torch`), which only that model makes.
            report.model = str(report.workload.get("module"))
            continue
        try:
            payload, root = payload_root({"options": report.workload, "kind": meta["kind"]})
            hits = set(probe(merged, payload)[root])
            same = [
                j
                for j, other in enumerate(merged.entries)
                if other.name in hits and origins[j].entry.pipeline in (None, entry.pipeline)
            ]
            report.matches_own = index in same
            if same and same[0] != index:
                report.shadowed_by = origins[same[0]].label
            report.also_matches = [origins[j].label for j in same if j > index]
            kept_selector = meta.get("won") is False  # applies while the selector agrees
            if (report.stale or kept_selector) and entry.config and report.foreign is None:
                report.broken = _broken_here(
                    entry.config, report.workload, entry.pipeline, target, kept_selector
                )
        except MlirtuneError as error:
            report.error = str(error)
    return reports


def _broken_here(
    config: dict[str, int],
    workload: dict,
    pipeline: str | None,
    target: Target,
    kept_selector: bool,
) -> list[str]:
    lowering = plan_for(rebuild_workload(workload), target)
    if pipeline is not None and lowering.descriptor.name != pipeline:
        return []  # tuned for a pipeline this target does not pick by default
    _, op, _ = bound_family(lowering)
    if kept_selector:
        moved = selector_moved(config, op, lowering, target)
        return (
            ["the choice of a selector that has since moved (its race found no winner)"]
            if moved
            else []
        )
    unset = unset_knobs(config, op, lowering, target)
    return config_violations(config, op, lowering, target) + [f"unset {k}" for k in unset]
