"""The spec libraries a compile applies, and what they decide for one payload.

Order: user libraries (`--spec`, then $MLIRTUNE_SPECS, then the config directory), then the
libraries shipped for the target's ISA: the one tuned on this host's CPU class first, then
those of other classes. Only entries tuned for the pipeline being compiled take part, and
the first that matches a root op and may apply here configures it; where none does, the
parameter selector decides. What an entry may do depends on where it was tuned:
- on this CPU class (or with no provenance): it applies. Tuned on another CPU of the class
  or with another toolchain, only if its config is valid in this target's search space;
  either way the lowering says so (a note for the shipped libraries, a SpecWarning for
  the user's), naming the broken constraints when it is skipped;
- on another CPU class (or, with no class recorded, on another CPU): it is not applied,
  never silently: a note (shipped) or a SpecWarning (user's) names the entry, both classes
  and the fix (`mlirtune specs adapt` races the shipped classes' configs on this host;
  `mlirtune tune ... --starter-spec` searches from it). `mlirtune tune` starts its search
  from such entries of the libraries it loads.
An entry whose race found nothing faster than the selector (`won` false) recorded the
selector's choice of its day: once the selector chooses otherwise, it is not applied.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mlir import ir

from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.lowering import Lowering
from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.target import UNKNOWN_CLASS, Target
from mlirtune.specs.entry_config import (
    config_violations,
    layout_differs,
    selector_moved,
    unset_knobs,
)
from mlirtune.specs.library import SpecEntry, SpecLibrary
from mlirtune.specs.matchers import CONFIG_ATTRIBUTE, SOURCE_ATTRIBUTE, read_config
from mlirtune.specs.merge import EntryFilter, MergedEntry, apply, merge, probe, root_ops
from mlirtune.specs.sources import SpecSource, configured_specs, expand, fetch
from mlirtune.toolchain import current_toolchain, digest

DEFAULTS_DIR = Path(__file__).parent / "defaults"


class SpecWarning(UserWarning):
    """An entry applies (or not) for a reason the user should know: it is stale, or it was
    tuned on another CPU class."""


def default_library_paths(target: Target) -> list[Path]:
    """The libraries shipped for `target`'s ISA, one per CPU class they were tuned on
    (defaults/<name>-<class>.mlir, e.g. x86_64-avx512-amd-zen4.mlir): the one of
    `target`'s own class first, then the others by name."""
    name = target.spec_library_name()
    if not name:
        return []
    own = DEFAULTS_DIR / f"{name}-{target.hardware_class()}.mlir"
    return sorted(DEFAULTS_DIR.glob(f"{name}-*.mlir"), key=lambda path: (path != own, path))


def default_library_path(target: Target) -> Path | None:
    """The shipped library tuned on `target`'s own CPU class, if there is one: the one whose
    entries compiles on `target` apply."""
    paths = default_library_paths(target)
    own = f"{target.spec_library_name()}-{target.hardware_class()}.mlir"
    return paths[0] if paths and paths[0].name == own else None


@dataclass(frozen=True)
class SpecChoice:
    """The entry that configured a compile's root op, and the config it set."""

    entry: MergedEntry
    config: dict[str, int]

    @property
    def source(self) -> str:
        return f"spec:{self.entry.label}"


@dataclass(frozen=True)
class _Merged:
    """The entries of the libraries for one pipeline, merged and serialised (re-parsed in
    each compile's context): those that may apply here and those tuned on another CPU
    class, with each entry's position among all of them (its priority)."""

    applicable: bytes
    applicable_origins: list[MergedEntry]
    foreign: bytes
    foreign_origins: list[MergedEntry]
    rank: dict[str, int]


class SpecSet:
    """Spec libraries in priority order, for one target."""

    def __init__(self, sources: Sequence[SpecSource], target: Target) -> None:
        self.sources = list(sources)
        self.target = target
        self._merged: dict[str, _Merged] = {}

    @classmethod
    def for_target(
        cls,
        target: Target,
        specs: Sequence[str] = (),
        *,
        configured: bool = True,
        defaults: bool = True,
    ) -> SpecSet:
        """`specs` (paths, directories or https URLs), then the configured libraries, then
        the libraries shipped for the target's ISA (its own CPU class first)."""
        names = [path for spec in specs for path in expand(spec)]
        if configured:
            names += configured_specs()
        if defaults:
            names += [str(path) for path in default_library_paths(target)]
        return cls([fetch(name) for name in names], target)

    def libraries(self) -> list[SpecLibrary]:
        """Every library parsed in the current context, in priority order."""
        return [SpecLibrary.parse(source) for source in self.sources]

    def choose(self, payload: ir.Module, plan: Lowering) -> SpecChoice | None:
        """Apply the merged libraries to `payload` (in the current context) and return the
        entry that configured its first configured root op, if any entry matched. `plan` is
        the Lowering being prepared (its descriptor and root ops); a note on each stale or
        other-class entry that matched before the chosen one is added to its notes."""
        pipeline = plan.descriptor.name
        merged = self._merged_for(pipeline)
        if not merged.applicable_origins and not merged.foreign_origins:
            return None
        foreign = self._foreign_hits(merged, payload)
        applicable = self._applied(merged, payload)
        choice = None
        for found, skipped, info in zip(applicable, foreign, plan.roots, strict=False):
            first = skipped[0] if skipped else None
            if first and (
                found is None or merged.rank[first.label] < merged.rank[found.entry.label]
            ):
                plan.notes.append(self._not_applied(first))
            if found is None:
                continue
            usable, note = self._usable(found.entry, found.config, info, plan)
            if note:
                plan.notes.append(note)
            if usable:
                choice = found
                break
        if choice is not None:
            unknown = sorted(set(choice.config) - set(plan.descriptor.params))
            if unknown:
                raise UsageError(
                    f"spec library {choice.entry.origin}, entry {choice.entry.entry.name}: "
                    f"sets {', '.join(unknown)}, which pipeline {pipeline} does not have "
                    f"(its parameters: {', '.join(plan.descriptor.params)}); re-tune or "
                    "re-export the entry",
                    stage="specs",
                )
        return choice

    def foreign_entries(self, payload: ir.Module, pipeline: str) -> list[MergedEntry]:
        """Every entry for `pipeline` tuned on another CPU class that matches a root op of
        `payload` (annotated; in the current context), in priority order: what compiles
        here do not apply, and `mlirtune tune` starts its search from."""
        hits = self._foreign_hits(self._merged_for(pipeline), payload)
        found: list[MergedEntry] = []
        for origin in (origin for per_op in hits for origin in per_op):
            if origin not in found:
                found.append(origin)
        return found

    def _merged_for(self, pipeline: str) -> _Merged:
        """The entries for `pipeline`, split by whether they may apply here; merged once."""
        if pipeline not in self._merged:
            libraries = self.libraries()
            fingerprint = digest(self.target.fingerprint())

            def keep(foreign: bool) -> EntryFilter:
                return lambda _library, entry: (
                    entry.pipeline in (None, pipeline)
                    and foreign == (foreign_class(entry, self.target, fingerprint) is not None)
                )

            applicable, origins = merge(libraries, "merged", keep=keep(False), tag=True)
            foreign, foreign_origins = merge(libraries, "foreign", keep=keep(True))
            rank: dict[str, int] = {}
            for library in libraries:
                for entry in library.entries:
                    if entry.pipeline in (None, pipeline):
                        rank.setdefault(f"{library.name}:{entry.name}", len(rank))
            self._merged[pipeline] = _Merged(
                applicable.serialize(bytecode=True),
                origins,
                foreign.serialize(bytecode=True),
                foreign_origins,
                rank,
            )
        return self._merged[pipeline]

    def _applied(self, merged: _Merged, payload: ir.Module) -> list[SpecChoice | None]:
        """Per root op of `payload`, the first applicable entry that matched it and its
        config; the annotations the entries left are removed."""
        if not merged.applicable_origins:
            return [None] * len(root_ops(payload))
        apply(_parse(merged.applicable), payload)
        found: list[SpecChoice | None] = []
        for op in root_ops(payload):
            attrs = op.attributes
            if SOURCE_ATTRIBUTE not in attrs:
                found.append(None)
                continue
            label = ir.StringAttr(attrs[SOURCE_ATTRIBUTE]).value
            origin = next(o for o in merged.applicable_origins if o.label == label)
            found.append(SpecChoice(origin, _config(attrs, origin)))
            for name in (SOURCE_ATTRIBUTE, CONFIG_ATTRIBUTE):
                if name in attrs:
                    del attrs[name]
        return found

    def _foreign_hits(self, merged: _Merged, payload: ir.Module) -> list[list[MergedEntry]]:
        """Per root op of `payload`, every other-class entry that matches it, in order."""
        if not merged.foreign_origins:
            return [[] for _ in root_ops(payload)]
        library = _parse(merged.foreign)
        index = {entry.name: i for i, entry in enumerate(library.entries)}
        return [
            [merged.foreign_origins[index[name]] for name in names]
            for names in probe(library, payload)
        ]

    def _not_applied(self, origin: MergedEntry) -> str:
        """What to say about a matching entry tuned on another CPU class (and warn about it,
        for a user's library): it is not applied, and how to use it here."""
        tuned_on = foreign_class(origin.entry, self.target) or UNKNOWN_CLASS
        workload = origin.entry.metadata.get("workload", {}).get("name", "WORKLOAD")
        shipped = is_shipped(origin.origin)
        fix = (
            f"`mlirtune specs adapt --workload {workload}` races it here"
            if shipped
            else f"`mlirtune tune {workload} ... --starter-spec {origin.origin}` searches from it"
        )
        note = (
            f"spec entry {origin.label} was tuned on CPU class {tuned_on}, not on this host's "
            f"({self.target.hardware_class()}), so it is not applied; {fix}"
        )
        if not shipped:
            warnings.warn(note, SpecWarning, stacklevel=3)
        return note

    def _usable(
        self, origin: MergedEntry, config: dict[str, int], op: OpInfo, lowering: Lowering
    ) -> tuple[bool, str | None]:
        """Whether a matched entry of this CPU class applies here, and what to tell the user
        about it. An entry tuned on this target and toolchain applies; where its config
        breaks the family's constraints (edited by hand, or left from an older family), it
        gets the warning a --param config gets. A stale one applies only if its config is
        valid in this target's space. A user's library warns either way; the shipped
        defaults, tuned on one CPU of their class for every CPU of it, say so in the
        lowering's notes instead, so a warning is not printed for every compile. An entry
        whose race found nothing faster than the selector of its day applies only while the
        selector still chooses its config (then silently: that config is the selector's
        own, which may lie outside the tuner's space): it must not pin an older selector's
        choice."""
        if layout_differs(origin.entry.metadata.get("workload") or {}, op):
            return False, None  # not this op's entry: its operands lie otherwise
        stale = stale_reasons(origin.entry, self.target)
        applies = True
        raced_in_vain = origin.entry.metadata.get("won") is False
        if raced_in_vain and selector_moved(config, op, lowering, self.target):
            applies = False
            note = (
                f"spec entry {origin.label} found no config faster than the selector it was "
                "raced against, and the selector now chooses another, so it is not applied "
                "(`mlirtune specs adapt` races it again)"
            )
        elif raced_in_vain:
            note = None  # the selector's own choice, constraints or not: nothing to say
        elif not stale:
            broken = [
                name
                for name in config_violations(config, op, lowering, self.target)
                if not name.endswith("_unknown")  # refused with the pipeline's parameters
            ]
            note = (
                f"spec entry {origin.label}: its config breaks {', '.join(broken)} of its "
                "schedule family, outside the space `mlirtune tune` searches; applying it"
                if broken
                else None
            )
        else:
            unset = unset_knobs(config, op, lowering, self.target)
            broken = unset or config_violations(config, op, lowering, self.target)
            applies = not broken
            where = f"spec entry {origin.label} was tuned {' and '.join(stale)}"
            if unset:
                note = (
                    f"{where}; it predates the knob(s) {', '.join(unset)} of its schedule "
                    "family, which the selector sets here and the entry would leave at their "
                    "defaults, so it is not applied"
                )
            elif broken:
                note = f"{where}; its config breaks {', '.join(broken)} here, so it is not applied"
            else:
                note = f"{where}; its config is valid here, applying it"
        if note and not is_shipped(origin.origin):
            warnings.warn(note, SpecWarning, stacklevel=3)
        return applies, note


def foreign_class(entry: SpecEntry, target: Target, fingerprint: str | None = None) -> str | None:
    """The CPU class `entry` was tuned on when that is not `target`'s, so that the entry
    does not apply there; None when it may. Where either class is unknown (an entry that
    records none, a target that cannot tell), a fingerprint other than `target`'s
    (`fingerprint`: its digest, if known) counts as another class."""
    tuned_on = entry.metadata.get("target", {})
    recorded, here = tuned_on.get("class") or UNKNOWN_CLASS, target.hardware_class()
    if UNKNOWN_CLASS not in (recorded, here):
        return None if recorded == here else recorded
    fingerprint = fingerprint or digest(target.fingerprint())
    return recorded if tuned_on.get("hash") not in (None, fingerprint) else None


def is_shipped(path: str) -> bool:
    """Whether `path` is one of the libraries shipped with mlirtune."""
    return Path(path).parent == DEFAULTS_DIR


def stale_reasons(entry: SpecEntry, target: Target) -> list[str]:
    """Why an entry's provenance differs from this target and toolchain (empty if not)."""
    reasons = []
    tuned_on = entry.metadata.get("target", {})
    if tuned_on.get("hash") not in (None, digest(target.fingerprint())):
        reasons.append(f"on another target ({tuned_on.get('summary', tuned_on.get('hash'))})")
    toolchain = entry.metadata.get("toolchain", {})
    if toolchain.get("hash") not in (None, digest(current_toolchain())):
        reasons.append(f"with another toolchain ({toolchain.get('summary', '?')})")
    return reasons


def _parse(data: bytes) -> SpecLibrary:
    """A merged library, from its bytecode, in the current context."""
    return SpecLibrary.parse(SpecSource("merged", "<merged>", data))


def _config(attrs, origin: MergedEntry) -> dict[str, int]:
    if CONFIG_ATTRIBUTE not in attrs:
        raise UsageError(
            f"spec library {origin.origin}, entry {origin.entry.name}: matched an op but set "
            f"no {CONFIG_ATTRIBUTE} on it",
            stage="specs",
        )
    try:
        return read_config(attrs[CONFIG_ATTRIBUTE])
    except ValueError as error:
        raise UsageError(
            f"spec library {origin.origin}, entry {origin.entry.name}: bad config ({error})",
            stage="specs",
        ) from None
