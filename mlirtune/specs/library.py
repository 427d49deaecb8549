"""A spec library: a transform module of matcher/action pairs applied by `foreach_match`.

Layout of a library module (`transform.with_named_sequence`):
- `@match_<entry>` recognises one root op (see `matchers.py`) and carries the entry's
  metadata in `mlirtune.entry`: the workload it was tuned on, its pipeline, the target
  fingerprint and toolchain, and the speedup over the untuned baseline;
- `@apply_<entry>` annotates the matched op with `mlirtune.config`;
- `@__mlirtune_specs` applies every pair in order with one `transform.foreach_match`, so
  the first entry that matches an op configures it.
The module itself carries `mlirtune.library` (what it was tuned for and with).

Libraries are read and written as text (`.mlir`) or bytecode (`.mlirbc`); both parse the
same. Hand-written entries are welcome: only the entry point's pairs define the entries.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlir import ir
from mlir.dialects import transform

from mlirtune.files import write_output
from mlirtune.interfaces.errors import UsageError
from mlirtune.ir.attrs import from_attribute, to_attribute
from mlirtune.ir.context import describe_location, format_diagnostics
from mlirtune.specs.matchers import (
    CONFIG_ATTRIBUTE,
    OpSignature,
    build_action,
    build_matcher,
    read_config,
)
from mlirtune.specs.sources import SpecSource

ENTRY_POINT = "__mlirtune_specs"
ENTRY_ATTRIBUTE = "mlirtune.entry"
LIBRARY_ATTRIBUTE = "mlirtune.library"
MATCH_PREFIX, APPLY_PREFIX = "match_", "apply_"


@dataclass(frozen=True)
class SpecEntry:
    """One matcher/action pair. `metadata` is the matcher's `mlirtune.entry` (empty for a
    hand-written entry); `config` is the constant the action annotates ops with."""

    name: str
    matcher: str
    action: str
    metadata: dict[str, Any]
    config: dict[str, int] | None

    @property
    def speedup(self) -> float | None:
        return self.metadata.get("speedup")

    @property
    def pipeline(self) -> str | None:
        return self.metadata.get("pipeline")


class SpecLibrary:
    """A parsed spec library (it lives in the MLIR context that was active when parsed)."""

    def __init__(self, module: ir.Module, name: str, origin: str) -> None:
        self.module, self.name, self.origin = module, name, origin
        self._refresh()

    def _refresh(self) -> None:
        """Re-read the symbols and entries (after parsing or editing the module)."""
        self._symbols = {
            symbol_name(op): op
            for op in self.module.body.operations
            if op.operation.name == "transform.named_sequence"
        }
        self.entries = self._read_entries()

    @classmethod
    def create(cls, name: str, metadata: dict[str, Any] | None = None) -> SpecLibrary:
        """An empty library (in the current context)."""
        module = ir.Module.create()
        module.operation.attributes["transform.with_named_sequence"] = ir.UnitAttr.get()
        module.operation.attributes[LIBRARY_ATTRIBUTE] = to_attribute(metadata or {})
        with ir.InsertionPoint(module.body):
            build_entry_point([], [])
        return cls(module, name, "<new>")

    @classmethod
    def parse(cls, source: SpecSource) -> SpecLibrary:
        """Parse and verify `source`; any problem is an error naming the library and, where
        the location allows, the entry."""
        local = Path(source.origin).is_file()  # parsed from the file: diagnostics name it
        try:
            module = ir.Module.parseFile(source.origin) if local else ir.Module.parse(source.data)
            module.operation.verify()
        except ir.MLIRError as error:
            raise UsageError(
                f"spec library {source.origin}{_entry_hint(source, error)} does not parse or "
                f"verify:\n{format_diagnostics(error)}",
                stage="specs",
            ) from None
        return cls(module, source.name, source.origin)

    @property
    def metadata(self) -> dict[str, Any]:
        attrs = self.module.operation.attributes
        return from_attribute(attrs[LIBRARY_ATTRIBUTE]) if LIBRARY_ATTRIBUTE in attrs else {}

    def entry(self, name: str) -> SpecEntry:
        for entry in self.entries:
            if entry.name == name:
                return entry
        known = ", ".join(e.name for e in self.entries) or "none"
        raise UsageError(
            f"spec library {self.origin} has no entry {name!r}; its entries: {known}",
            stage="specs",
        )

    # --- editing ---------------------------------------------------------------------------

    def add(
        self, name: str, signature: OpSignature, config: dict[str, int], metadata: dict[str, Any]
    ) -> None:
        """Add an entry; an entry of the same name is replaced in place (same position)."""
        matcher, action = MATCH_PREFIX + name, APPLY_PREFIX + name
        names = [e.name for e in self.entries]
        pairs = [(e.matcher, e.action) for e in self.entries]
        if name in names:
            self._erase(matcher, action)
        else:
            pairs.append((matcher, action))
        with ir.InsertionPoint(self._entry_point().operation):
            sequence = build_matcher(matcher, signature)
            sequence.operation.attributes[ENTRY_ATTRIBUTE] = to_attribute(metadata)
            build_action(action, config)
        self._rebuild_entry_point(pairs)

    def _erase(self, *symbols: str) -> None:
        for symbol in symbols:
            self._symbols.pop(symbol).operation.erase()

    def _rebuild_entry_point(self, pairs: list[tuple[str, str]]) -> None:
        self._symbols.pop(ENTRY_POINT).operation.erase()
        with ir.InsertionPoint(self.module.body):
            build_entry_point([m for m, _ in pairs], [a for _, a in pairs])
        self._refresh()

    # --- reading ---------------------------------------------------------------------------

    def _entry_point(self):
        if ENTRY_POINT not in self._symbols:
            raise UsageError(
                f"spec library {self.origin} has no @{ENTRY_POINT} named sequence; a spec "
                "library applies its entries from there with transform.foreach_match",
                stage="specs",
            )
        return self._symbols[ENTRY_POINT]

    def _read_entries(self) -> list[SpecEntry]:
        entries = []
        for op in self._entry_point().body.operations:
            if op.operation.name != "transform.foreach_match":
                continue
            attrs = op.operation.attributes
            for matcher_ref, action_ref in zip(
                ir.ArrayAttr(attrs["matchers"]), ir.ArrayAttr(attrs["actions"]), strict=True
            ):
                matcher = ir.FlatSymbolRefAttr(matcher_ref).value
                action = ir.FlatSymbolRefAttr(action_ref).value
                name = matcher.removeprefix(MATCH_PREFIX)
                entries.append(self._entry(name, matcher, action))
        return entries

    def _entry(self, name: str, matcher: str, action: str) -> SpecEntry:
        attrs = self._symbols[matcher].operation.attributes
        metadata = from_attribute(attrs[ENTRY_ATTRIBUTE]) if ENTRY_ATTRIBUTE in attrs else {}
        config = None
        for op in self._symbols[action].body.operations:
            if op.operation.name == "transform.annotate" and _annotates_config(op):
                constant = op.operation.operands[1].owner
                if constant.name != "transform.param.constant":
                    continue
                try:
                    config = read_config(constant.attributes["value"])
                except ValueError as error:
                    raise UsageError(
                        f"spec library {self.origin}, entry {name}: its config is not a "
                        f"dictionary of integers ({error})",
                        stage="specs",
                    ) from None
        return SpecEntry(name, matcher, action, metadata, config)

    # --- writing ---------------------------------------------------------------------------

    def serialize(self, *, bytecode: bool) -> bytes:
        """The module as MLIR bytecode, or as text."""
        if not bytecode:
            return (str(self.module) + "\n").encode()
        buffer = io.BytesIO()
        self.module.operation.write_bytecode(buffer)
        return buffer.getvalue()

    def save(self, path: str | Path) -> Path:
        """Write as bytecode for `.mlirbc`, else as text; atomically (never half a file)."""
        data = self.serialize(bytecode=Path(path).suffix == ".mlirbc")
        return write_output(path, data, "specs")


def build_entry_point(matchers: list[str], actions: list[str]) -> None:
    """`@__mlirtune_specs`: one foreach_match over the matcher/action pairs, in order."""
    any_op = transform.AnyOpType.get()
    sequence = transform.NamedSequenceOp(
        ENTRY_POINT, [any_op], [], arg_attrs=[{"transform.consumed": ir.UnitAttr.get()}]
    )
    with ir.InsertionPoint(sequence.body):
        if matchers:
            transform.ForeachMatchOp(
                any_op,
                [],
                sequence.bodyTarget,
                [],
                ir.ArrayAttr.get([ir.FlatSymbolRefAttr.get(m) for m in matchers]),
                ir.ArrayAttr.get([ir.FlatSymbolRefAttr.get(a) for a in actions]),
            )
        transform.YieldOp([])


def symbol_name(op) -> str:
    """The symbol name of a named sequence."""
    return ir.StringAttr(op.operation.attributes["sym_name"]).value


def _annotates_config(op) -> bool:
    return ir.StringAttr(op.operation.attributes["name"]).value == CONFIG_ATTRIBUTE


def _entry_hint(source: SpecSource, error: ir.MLIRError) -> str:
    """ ", entry NAME" for a text library whose first diagnostic falls inside the named
    sequences of an entry: the nearest `named_sequence @` line above it names the entry.
    (The module did not parse, so its text is the only thing left to go by.)"""
    diagnostics = getattr(error, "error_diagnostics", None)
    if not diagnostics or source.data[:4] == b"ML\xefR":
        return ""
    where = describe_location(diagnostics[0].location).rsplit(":", 2)
    if len(where) != 3 or not where[1].isdigit():
        return ""
    lines = source.data.decode(errors="replace").splitlines()[: int(where[1])]
    for line in reversed(lines):
        _, marker, rest = line.partition("transform.named_sequence @")
        if marker:
            symbol = rest.split("(", 1)[0].strip('"')
            return f", entry {symbol.removeprefix(MATCH_PREFIX).removeprefix(APPLY_PREFIX)}"
    return ""
