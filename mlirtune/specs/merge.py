"""Merge spec libraries into one, and probe which entries match a payload.

Merging clones each library's named sequences into one module, in the order given, renaming
a symbol only where it would clash, and lists every entry in one `foreach_match`: the
first library's entries come first, so on an op that entries of several libraries match,
the earlier library wins. `probe` runs every matcher of a library on a payload (not just
the first that matches), which is how overlaps are found.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import transform
from mlir.dialects.transform import interpreter

from mlirtune.interfaces.errors import MlirtuneError
from mlirtune.ir.roots import ROOT_ATTRIBUTE
from mlirtune.specs.library import (
    ENTRY_POINT,
    LIBRARY_ATTRIBUTE,
    MATCH_PREFIX,
    SpecEntry,
    SpecLibrary,
    build_entry_point,
    symbol_name,
)
from mlirtune.specs.matchers import build_tagged_action

PROBE_POINT = "__mlirtune_probe"
PROBE_PREFIX = "mlirtune.probe."

# Which entries to keep, e.g. those tuned for the pipeline being compiled.
EntryFilter = Callable[[SpecLibrary, SpecEntry], bool]


@dataclass(frozen=True)
class MergedEntry:
    """Where an entry of a merged library came from: its library and its own name there."""

    library: str
    origin: str
    entry: SpecEntry

    @property
    def label(self) -> str:
        return f"{self.library}:{self.entry.name}"


def merge(
    libraries: Sequence[SpecLibrary],
    name: str,
    *,
    keep: EntryFilter | None = None,
    tag: bool = False,
) -> tuple[SpecLibrary, list[MergedEntry]]:
    """One library holding the entries of `libraries` in order (those `keep` accepts).
    With `tag`, each entry's action is wrapped to annotate ops with `mlirtune.spec =
    "<library>:<entry>"`, so a compile can say which entry configured an op."""
    module = ir.Module.create()
    module.operation.attributes["transform.with_named_sequence"] = ir.UnitAttr.get()
    if len(libraries) == 1 and LIBRARY_ATTRIBUTE in libraries[0].module.operation.attributes:
        metadata = libraries[0].module.operation.attributes[LIBRARY_ATTRIBUTE]
        module.operation.attributes[LIBRARY_ATTRIBUTE] = metadata
    taken: set[str] = set()
    pairs: list[tuple[str, str]] = []
    origins: list[MergedEntry] = []
    with ir.InsertionPoint(module.body):
        for index, library in enumerate(libraries):
            renames = _copy_sequences(library, index, taken)
            for entry in library.entries:
                if keep is not None and not keep(library, entry):
                    continue
                matcher, action = renames[entry.matcher], renames[entry.action]
                origin = MergedEntry(library.name, library.origin, entry)
                if tag:
                    tagged = _unique(f"tag_{matcher.removeprefix(MATCH_PREFIX)}", taken)
                    build_tagged_action(tagged, action, origin.label)
                    action = tagged
                pairs.append((matcher, action))
                origins.append(origin)
        build_entry_point([m for m, _ in pairs], [a for _, a in pairs])
    return SpecLibrary(module, name, "<merged>"), origins


def _copy_sequences(library: SpecLibrary, index: int, taken: set[str]) -> dict[str, str]:
    """Clone the library's named sequences (not its entry point) at the insertion point,
    renaming those whose names are taken; returns old name -> new name."""
    sequences = [
        op
        for op in library.module.body.operations
        if op.operation.name == "transform.named_sequence" and symbol_name(op) != ENTRY_POINT
    ]
    renames = {}
    for op in sequences:
        old = symbol_name(op)
        renames[old] = old if old not in taken else _unique(f"{old}_{index + 1}", taken)
        taken.add(renames[old])
    for op in sequences:
        clone = op.operation.clone()
        for old, new in renames.items():
            if old != new:
                ir.SymbolTable.replace_all_symbol_uses(old, new, clone)
        if renames[symbol_name(op)] != symbol_name(op):
            ir.SymbolTable.set_symbol_name(clone, renames[symbol_name(op)])
    return renames


def _unique(name: str, taken: set[str]) -> str:
    candidate, suffix = name, 2
    while candidate in taken:
        candidate, suffix = f"{name}_{suffix}", suffix + 1
    taken.add(candidate)
    return candidate


def apply(library: SpecLibrary, payload: ir.Module) -> None:
    """Run the library's entry point on `payload` (annotating the ops it matches)."""
    _run(library, ENTRY_POINT, payload)


def probe(library: SpecLibrary, payload: ir.Module) -> list[list[str]]:
    """For each root op of `payload` (annotated, in program order), the names of every
    entry whose matcher matches it, in library order."""
    any_op = transform.AnyOpType.get()
    with ir.InsertionPoint(library.module.body):
        sequence = transform.NamedSequenceOp(
            PROBE_POINT, [any_op], [], arg_attrs=[{"transform.readonly": ir.UnitAttr.get()}]
        )
    with ir.InsertionPoint(sequence.body):
        for index, entry in enumerate(library.entries):
            found = transform.CollectMatchingOp(
                [any_op], sequence.bodyTarget, ir.FlatSymbolRefAttr.get(entry.matcher)
            ).results[0]
            transform.AnnotateOp(found, f"{PROBE_PREFIX}{index}")
        transform.YieldOp([])
    try:
        _run(library, PROBE_POINT, payload)
    finally:
        sequence.operation.erase()
    matches = []
    for op in root_ops(payload):
        hits = []
        for index, entry in enumerate(library.entries):
            key = f"{PROBE_PREFIX}{index}"
            if key in op.attributes:
                hits.append(entry.name)
                del op.attributes[key]
        matches.append(hits)
    return matches


def root_ops(payload: ir.Module) -> list[ir.Operation]:
    """The ops annotated as roots, in program order."""
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if ROOT_ATTRIBUTE in op.attributes:
            found.append(op)
        return ir.WalkResult.ADVANCE

    payload.operation.walk(visit)
    return found


def _run(library: SpecLibrary, entry_point: str, payload: ir.Module) -> None:
    sequence = next(
        op
        for op in library.module.body.operations
        if op.operation.name == "transform.named_sequence" and symbol_name(op) == entry_point
    )
    try:
        interpreter.apply_named_sequence(payload, sequence, library.module)
    except (ValueError, ir.MLIRError) as error:
        raise MlirtuneError(
            f"spec library {library.origin} failed to apply: {error}", stage="specs"
        ) from None
