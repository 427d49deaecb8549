"""YAML pipeline descriptors: a list of `pass`, `schedule`, `step`, `dispatch` and `include`
stages with `$slots`.

    description: matmul-like contractions on x86-64
    flow: select            # optional: a Python flow fills slots from the family's selector
    params: {TILE: 8}       # values of the other slots; `null` means "something must fill it"
    stages:
      - schedule: contraction {MC=$MC MR=$MR}
      - include: ../generic/lower_cpu.yaml
      - pass: canonicalize{max-iterations=$TILE}
      - step: expand-exp {isa=$ISA}  # a registered Python IR step (pipeline/steps.py)
      - dispatch: roots       # split a payload of several root ops into dispatches, each
                              # scheduled by the pipeline of its root kind (mlirtune.dispatch)

A schedule stage binds its family's knobs to slots (`MC=$MC`); such a slot needs no `params`
entry, since the knob's default (mlirtune.schedules) fills it when nothing stronger does.
Includes are expanded at load time (with their own `{key=value}` bindings), so a loaded
Descriptor is a flat list of pass, schedule and step stages. Every problem is reported with the
file, the stage number and the cause.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from mlirtune.files import read_text, yaml_problem
from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.lowering import SLOT, Descriptor, ParamValue, Stage
from mlirtune.pipeline.steps import check_step_arguments
from mlirtune.schedules.registry import FAMILIES, family_named

STAGE_KINDS = ("pass", "schedule", "step", "dispatch", "include")
# What a `dispatch` stage may split a payload by (mlirtune.dispatch).
DISPATCH_BY = ("roots",)
ARGUMENT = re.compile(r"^\s*([^\s{}]+)\s*(?:\{(.*)\})?\s*$", re.DOTALL)


class DescriptorError(UsageError):
    """A descriptor that cannot be used; the message names file and stage."""

    def __init__(self, message: str) -> None:
        super().__init__(message, stage="pipeline")


def load_descriptor(path: str | Path, bindings: dict[str, Any] | None = None) -> Descriptor:
    """Load and validate `path`, expanding includes; `bindings` override its params."""
    return _load(Path(path).resolve(), dict(bindings or {}), ())


def _load(path: Path, bindings: dict[str, Any], chain: tuple[Path, ...]) -> Descriptor:
    if path in chain:
        cycle = " -> ".join(p.name for p in (*chain, path))
        raise DescriptorError(f"{chain[-1]}: include cycle: {cycle}")
    document, lines = _read_yaml(path)
    declared = _params(document.get("params") or {}, path)
    flow = document.get("flow")
    if flow is not None and not isinstance(flow, str):
        raise DescriptorError(f"{path}: 'flow' must be a name, got {flow!r}")
    raw_stages = document.get("stages")
    if not isinstance(raw_stages, list) or not raw_stages:
        raise DescriptorError(f"{path}: 'stages' must be a non-empty list")
    parsed = []
    for number, raw in enumerate(raw_stages, start=1):
        line = f":{lines[number - 1]}" if len(lines) == len(raw_stages) else ""
        origin = f"{path}{line}: stage {number}"
        kind, name, arguments = _parse_stage(raw, origin)
        if kind == "schedule" and name in FAMILIES:  # every knob binds its own slot ...
            knobs = {knob.name: f"${knob.name}" for knob in FAMILIES[name].knobs}
            arguments = {**knobs, **arguments}  # ... but where the stage says otherwise
        parsed.append((kind, name, arguments, origin))
    for kind, name, arguments, _ in parsed:
        if kind == "schedule" and name in FAMILIES:
            for slot in _knob_slots(name, arguments):
                declared.setdefault(slot, None)
    unknown = sorted(set(bindings) - set(declared))
    if unknown:
        where = f"{chain[-1]} (include of {path.name})" if chain else str(path)
        raise DescriptorError(f"{where}: binds unknown param(s) {', '.join(unknown)}")
    # Bound params are fixed by the includer; the others stay slots of the whole pipeline.
    params = {k: v for k, v in declared.items() if k not in bindings}
    stages: list[Stage] = []
    for kind, name, arguments, origin in parsed:
        if kind == "include":
            target = (path.parent / name).resolve()
            if not target.is_file():
                raise DescriptorError(f"{origin}: include {name!r} not found ({target})")
            _check_declared(Stage(kind, name, arguments, origin, path.parent), declared)
            included = _load(target, arguments, (*chain, path))
            stages.extend(_fill(s, bindings, strict=False) for s in included.stages)
            for key, value in included.params.items():
                params.setdefault(key, value)
            continue
        stage = Stage(kind, name, arguments, origin, path.parent)
        _check_declared(stage, declared)
        try:  # the registries' errors name what is known; the stage says where
            if kind == "schedule" and not name.endswith(".mlir"):
                knobs = [knob.name for knob in family_named(name).knobs]
                unknown = sorted(set(arguments) - set(knobs))
                if unknown:
                    raise UsageError(
                        f"schedule {name} has no knob(s) {', '.join(unknown)}; its knobs: "
                        f"{', '.join(knobs)}"
                    )
            elif kind == "step":
                check_step_arguments(name, arguments)
        except UsageError as error:
            raise DescriptorError(f"{origin}: {error.args[0]}") from None
        if kind == "dispatch" and arguments:
            raise DescriptorError(f"{origin}: {kind} {name} takes no arguments")
        if kind == "dispatch" and name not in DISPATCH_BY:
            raise DescriptorError(
                f"{origin}: dispatch {name!r}: a payload is split by {', '.join(DISPATCH_BY)}"
            )
        stages.append(_fill(stage, bindings, strict=False))
    description = str(document.get("description", ""))
    return Descriptor(path, description, flow, params, stages)


def _knob_slots(family: str, arguments: dict[str, Any]) -> list[str]:
    """Slots a `family` schedule stage binds to that family's knobs (`MR=$MR`)."""
    knobs = {knob.name for knob in FAMILIES[family].knobs}
    return [
        value[1:]
        for key, value in arguments.items()
        if key in knobs and isinstance(value, str) and SLOT.fullmatch(value)
    ]


def _check_declared(stage: Stage, declared: dict[str, Any]) -> None:
    missing = sorted(stage.slots() - set(declared))
    if missing:
        raise DescriptorError(
            f"{stage.origin}: unfilled slot(s) {', '.join('$' + m for m in missing)}: "
            "declare them under 'params'"
        )


def _read_yaml(path: Path) -> tuple[dict[str, Any], list[int]]:
    """The document and the line of each item of its `stages` list (1-based)."""
    text = read_text(path, "pipeline")
    try:
        # yaml.safe_load's own steps, keeping the node tree in between for its line marks.
        loader = yaml.SafeLoader(text)
        try:
            root = loader.get_single_node()
            document = loader.construct_document(root) if root is not None else None
        finally:
            loader.dispose()
    except yaml.YAMLError as error:
        raise DescriptorError(yaml_problem(path, error)) from None
    except RecursionError:
        raise DescriptorError(f"{path}: YAML nested too deeply to read") from None
    if not isinstance(document, dict):
        raise DescriptorError(f"{path}: a descriptor is a mapping with a 'stages' list")
    unknown = sorted(set(document) - {"description", "flow", "params", "stages"})
    if unknown:
        raise DescriptorError(f"{path}: unknown key(s) {', '.join(unknown)}")
    return document, _stage_lines(root)


def _stage_lines(root: yaml.Node) -> list[int]:
    """Where each `stages` item starts, read from the YAML node tree (marks keep lines)."""
    if isinstance(root, yaml.MappingNode):
        for key, value in root.value:
            if key.value == "stages" and isinstance(value, yaml.SequenceNode):
                return [item.start_mark.line + 1 for item in value.value]
    return []


def _params(raw: Any, path: Path) -> dict[str, ParamValue]:
    if not isinstance(raw, dict):
        raise DescriptorError(f"{path}: 'params' must be a mapping")
    for key, value in raw.items():
        if value is not None and not isinstance(value, int | str | bool):
            raise DescriptorError(
                f"{path}: param {key} has a bad value type ({type(value).__name__}); "
                "use an integer, a string, a boolean or null"
            )
    return dict(raw)


def _parse_stage(raw: Any, origin: str) -> tuple[str, str, dict[str, Any]]:
    if not isinstance(raw, dict) or len(raw) != 1:
        raise DescriptorError(f"{origin}: a stage is one of {', '.join(STAGE_KINDS)}: VALUE")
    ((kind, text),) = raw.items()
    if kind not in STAGE_KINDS:
        raise DescriptorError(
            f"{origin}: unknown stage {kind!r}; expected one of {', '.join(STAGE_KINDS)}"
        )
    if not isinstance(text, str) or not text.strip():
        raise DescriptorError(f"{origin}: {kind} needs a text value, got {text!r}")
    if kind == "pass":  # upstream pass syntax, options included, is kept verbatim
        return kind, text.strip(), {}
    match = ARGUMENT.match(text)
    if not match:
        raise DescriptorError(f"{origin}: cannot read {kind} {text!r}; expected NAME {{k=v ...}}")
    name, body = match.group(1), match.group(2) or ""
    arguments: dict[str, Any] = {}
    for item in body.replace(",", " ").split():
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise DescriptorError(f"{origin}: argument {item!r} is not key=value")
        arguments[key] = _scalar(value)
    return kind, name, arguments


def _scalar(text: str) -> Any:
    if SLOT.fullmatch(text):
        return text
    try:
        return int(text)
    except ValueError:
        return {"true": True, "false": False}.get(text.lower(), text)


def _fill(stage: Stage, values: dict[str, Any], strict: bool) -> Stage:
    """Replace `$slot`s that have a value in `values`; others stay (or fail if strict)."""
    missing = sorted(n for n in stage.slots() if values.get(n) is None)
    if strict and missing:
        raise DescriptorError(
            f"{stage.origin}: unfilled slot(s) {', '.join('$' + m for m in missing)}: no tuned "
            "config, selector or default provides them"
        )

    def fill(text: str) -> Any:
        whole = SLOT.fullmatch(text)
        if whole and values.get(whole.group(1)) is not None:
            return values[whole.group(1)]  # keeps the value's type (int, bool)
        return SLOT.sub(
            lambda m: str(values[m.group(1)]) if values.get(m.group(1)) is not None else m.group(0),
            text,
        )

    if stage.kind == "pass":
        return Stage(stage.kind, fill(stage.name), {}, stage.origin, stage.base_dir)
    arguments = {k: fill(v) if isinstance(v, str) else v for k, v in stage.arguments.items()}
    return Stage(stage.kind, stage.name, arguments, stage.origin, stage.base_dir)


def resolve_stage(stage: Stage, values: dict[str, Any]) -> Stage:
    """The stage with every slot filled from `values`; an unfilled slot is an error."""
    return _fill(stage, values, strict=True)
