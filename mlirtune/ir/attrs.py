"""JSON-like Python values to MLIR attributes and back, e.g. for metadata carried in IR.

Dicts become dictionary attributes, lists array attributes, ints i64, floats f64, bools
`true`/`false` and strings string attributes, so the metadata stays readable in printed IR.
"""

from __future__ import annotations

from typing import Any

from mlir import ir


def to_attribute(value: Any) -> ir.Attribute:
    """The attribute for `value` (in the current context)."""
    if isinstance(value, bool):
        return ir.BoolAttr.get(value)
    if isinstance(value, int):
        return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)
    if isinstance(value, float):
        return ir.FloatAttr.get_f64(value)
    if isinstance(value, str):
        return ir.StringAttr.get(value)
    if isinstance(value, dict):
        return ir.DictAttr.get({str(k): to_attribute(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return ir.ArrayAttr.get([to_attribute(v) for v in value])
    raise TypeError(f"cannot store {type(value).__name__} value {value!r} as an attribute")


def from_attribute(attr: ir.Attribute) -> Any:
    """The Python value of an attribute built by `to_attribute` (others print as text)."""
    if isinstance(attr, ir.BoolAttr):
        return attr.value
    if isinstance(attr, ir.IntegerAttr):
        return attr.value
    if isinstance(attr, ir.FloatAttr):
        return attr.value
    if isinstance(attr, ir.StringAttr):
        return attr.value
    if isinstance(attr, ir.DictAttr):
        return {named.name: from_attribute(named.attr) for named in attr}
    if isinstance(attr, ir.ArrayAttr):
        return [from_attribute(a) for a in attr]
    return str(attr)
