"""The spec libraries a compile applies, and what they decide for one payload.

Order: user libraries (`--spec`, then $MLIRTUNE_SPECS, then the config directory), then the
defaults shipped for the target; where no entry matches, the parameter selector decides.
Only entries tuned for the pipeline being compiled take part. An entry tuned on another
CPU or toolchain still applies if its config is valid in this target's search space, with a
warning; otherwise it is skipped, with a warning naming the broken constraints.
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
from mlirtune.interfaces.target import Target
from mlirtune.schedules.registry import bound_family
from mlirtune.specs.library import SpecEntry, SpecLibrary
from mlirtune.specs.matchers import CONFIG_ATTRIBUTE, SOURCE_ATTRIBUTE, read_config
from mlirtune.specs.merge import MergedEntry, apply, merge, root_ops
from mlirtune.specs.sources import SpecSource, configured_specs, expand, fetch
from mlirtune.toolchain import current_toolchain, digest

DEFAULTS_DIR = Path(__file__).parent / "defaults"


class SpecWarning(UserWarning):
    """An entry applies (or not) for a reason the user should know: it is stale."""


def default_library_path(target: Target) -> Path | None:
    """The library shipped for `target` (e.g. defaults/x86_64-avx512.mlir), if any."""
    name = target.spec_library_name()
    path = DEFAULTS_DIR / f"{name}.mlir" if name else None
    return path if path is not None and path.is_file() else None


@dataclass(frozen=True)
class SpecChoice:
    """The entry that configured a compile's root op, and the config it set."""

    entry: MergedEntry
    config: dict[str, int]

    @property
    def source(self) -> str:
        return f"spec:{self.entry.label}"


class SpecSet:
    """Spec libraries in priority order, for one target."""

    def __init__(self, sources: Sequence[SpecSource], target: Target) -> None:
        self.sources = list(sources)
        self.target = target
        self._merged: dict[str, tuple[bytes, list[MergedEntry]]] = {}

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
        the target's shipped defaults."""
        names = [path for spec in specs for path in expand(spec)]
        if configured:
            names += configured_specs()
        default = default_library_path(target) if defaults else None
        if default is not None:
            names.append(str(default))
        return cls([fetch(name) for name in names], target)

    def libraries(self) -> list[SpecLibrary]:
        """Every library parsed in the current context, in priority order."""
        return [SpecLibrary.parse(source) for source in self.sources]

    def choose(self, payload: ir.Module, plan: Lowering) -> SpecChoice | None:
        """Apply the merged libraries to `payload` (in the current context) and return the
        entry that configured its first configured root op, if any entry matched. `plan` is
        the Lowering being prepared (its descriptor and root ops); a note on each stale entry
        that matched is added to its notes."""
        pipeline = plan.descriptor.name
        library, origins = self._library_for(pipeline)
        if not origins:
            return None
        apply(library, payload)
        choice = None
        for op, info in zip(root_ops(payload), plan.roots, strict=False):
            attrs = op.attributes
            if SOURCE_ATTRIBUTE not in attrs:
                continue
            label = ir.StringAttr(attrs[SOURCE_ATTRIBUTE]).value
            origin = next(o for o in origins if o.label == label)
            config = _config(attrs, origin)
            for name in (SOURCE_ATTRIBUTE, CONFIG_ATTRIBUTE):
                if name in attrs:
                    del attrs[name]
            if choice is None:
                usable, note = self._usable(origin, config, info, plan)
                if note:
                    plan.notes.append(note)
                if usable:
                    choice = SpecChoice(origin, config)
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

    def _library_for(self, pipeline: str) -> tuple[SpecLibrary, list[MergedEntry]]:
        """The merged, tagged library of the entries for `pipeline`; merged once, then
        re-parsed from bytecode in each compile's context."""
        if pipeline not in self._merged:

            def keep(_library: SpecLibrary, entry: SpecEntry) -> bool:
                return entry.pipeline in (None, pipeline)

            merged, origins = merge(self.libraries(), "merged", keep=keep, tag=True)
            self._merged[pipeline] = (merged.serialize(bytecode=True), origins)
        data, origins = self._merged[pipeline]
        return SpecLibrary.parse(SpecSource("merged", "<merged>", data)), origins

    def _usable(
        self, origin: MergedEntry, config: dict[str, int], op: OpInfo, lowering: Lowering
    ) -> tuple[bool, str | None]:
        """Whether a matched entry applies here, and what to tell the user about it. An
        entry tuned on this target and toolchain always applies. Otherwise it applies only
        if its config is valid in this target's space. A user's library warns either way;
        the shipped defaults, tuned on one CPU of their class for every CPU of it, say so
        in the lowering's notes instead, so a warning is not printed for every compile."""
        stale = stale_reasons(origin.entry, self.target)
        if not stale:
            return True, None
        broken = config_violations(config, op, lowering, self.target)
        where = f"spec entry {origin.label} was tuned {' and '.join(stale)}"
        if broken:
            note = f"{where}; its config breaks {', '.join(broken)} here, so it is not applied"
        else:
            note = f"{where}; its config is valid here, applying it"
        if not is_shipped(origin.origin):
            warnings.warn(note, SpecWarning, stacklevel=3)
        return not broken, note


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


def config_violations(
    config: dict[str, int], op: OpInfo, lowering: Lowering, target: Target
) -> list[str]:
    """What `config` (slot values) breaks of the constraints the pipeline's schedule family
    puts on its knobs on `target`; empty when the family has no model here (nothing to
    check against). Knobs the entry does not set are checked at their defaults, which is
    what a compile gives them."""
    try:
        family, _, slots = bound_family(lowering)
    except UsageError:
        return []
    if op.kind not in family.root_kinds or not family.covers(target):
        return []
    knob_names = {knob.name for knob in family.knobs}
    by_slot = {slot: knob for knob, slot in slots.items() if knob in knob_names}
    knobs = {by_slot[slot]: value for slot, value in config.items() if slot in by_slot}
    return family.violations(op, target, {**family.defaults(op), **knobs})


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
