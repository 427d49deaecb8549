"""Dataclasses from plain data (a JSON file's objects), every field checked against its
annotation: a file edited by hand or written by another program fails here, naming the
field, instead of deep in a computation that meets a string where a number was."""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import TypeVar

from mlirtune.interfaces.errors import UsageError

T = TypeVar("T")


class _Mismatch(Exception):
    """A value that does not fit its annotation, at a field path."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path or 'the document'}: {problem}")


def from_plain(cls: type[T], data: object, source: str, stage: str) -> T:
    """An instance of dataclass `cls` from `data` (a dict), or a UsageError naming
    `source` (the file) and the field that does not fit."""
    try:
        return _value(cls, data, "")
    except _Mismatch as mismatch:
        raise UsageError(f"{source}: {mismatch}", stage=stage) from None


def _value(annotation: object, data: object, path: str) -> object:
    origin, arguments = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        if data is None and type(None) in arguments:
            return None
        options = [option for option in arguments if option is not type(None)]
        for option in options[:-1]:
            try:
                return _value(option, data, path)
            except _Mismatch:
                continue
        return _value(options[-1], data, path)  # the last option's mismatch is reported
    if dataclasses.is_dataclass(annotation):
        return _dataclass(annotation, data, path)
    if origin is list:
        _expect(isinstance(data, list), path, "a list", data)
        return [_value(arguments[0], x, f"{path}[{i}]") for i, x in enumerate(data)]
    if origin is dict:
        _expect(isinstance(data, dict), path, "an object", data)
        return {k: _value(arguments[1], v, _join(path, str(k))) for k, v in data.items()}
    if annotation is float:
        number = isinstance(data, int | float) and not isinstance(data, bool)
        _expect(number and math.isfinite(data), path, "a finite number", data)
        return float(data)
    if annotation is int:
        _expect(isinstance(data, int) and not isinstance(data, bool), path, "an integer", data)
        return data
    _expect(isinstance(annotation, type) and isinstance(data, annotation), path, annotation, data)
    return data


def _dataclass(cls: type, data: object, path: str) -> object:
    _expect(isinstance(data, dict), path, f"an object ({cls.__name__})", data)
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise _Mismatch(path, f"unknown field(s) {', '.join(map(str, unknown))}")
    values = {}
    for name, spec in fields.items():
        if name in data:
            values[name] = _value(hints[name], data[name], _join(path, name))
        elif spec.default is dataclasses.MISSING and spec.default_factory is dataclasses.MISSING:
            raise _Mismatch(path, f"no field {name!r}")
    return cls(**values)


def _expect(ok: bool, path: str, expected: object, data: object) -> None:
    if not ok:
        shown = repr(data) if len(repr(data)) <= 40 else repr(data)[:37] + "..."
        what = getattr(expected, "__name__", expected)
        raise _Mismatch(path, f"expected {what}, not {shown}")


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name
