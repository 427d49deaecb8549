"""Constants and types shaped like a value: a scalar, or a vector of it."""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith


def element_type(value_type: ir.Type) -> ir.Type:
    """The element type of a vector type, or the type itself."""
    return value_type.element_type if isinstance(value_type, ir.VectorType) else value_type


def splat(value: float, of: ir.Type) -> ir.Value:
    """A constant of type `of` (a float or integer scalar, or a vector of them) holding
    `value` in every lane."""
    element = element_type(of)
    attr = (
        ir.FloatAttr.get(element, value)
        if isinstance(element, ir.FloatType)
        else ir.IntegerAttr.get(element, int(value))
    )
    if isinstance(of, ir.VectorType):
        attr = ir.DenseElementsAttr.get_splat(of, attr)
    return arith.ConstantOp(of, attr).result


def index_constant(value: int) -> ir.Value:
    """An `index` constant."""
    return arith.constant(ir.IndexType.get(), value)


def same_shape(value_type: ir.Type, element: ir.Type) -> ir.Type:
    """`element`, or a vector of it shaped like `value_type` when that is a vector."""
    if isinstance(value_type, ir.VectorType):
        return ir.VectorType.get(value_type.shape, element)
    return element


def constant_int(value: ir.Value) -> int | None:
    """The value of an integer or index `arith.constant`, or None for anything else."""
    owner = value.owner
    if not isinstance(owner, ir.OpView) or owner.operation.name != "arith.constant":
        return None
    attribute = owner.attributes["value"]
    return ir.IntegerAttr(attribute).value if isinstance(attribute, ir.IntegerAttr) else None


def all_zero(indices: list[ir.Value]) -> bool:
    """Whether every one of `indices` is the constant 0 (a transfer or tile at a buffer's
    origin)."""
    return all(constant_int(index) == 0 for index in indices)


def is_zero_splat(value: ir.Value) -> bool:
    """Whether `value` is an `arith.constant` splat of zeros (float or integer)."""
    owner = value.owner
    if not isinstance(owner, ir.OpView) or owner.operation.name != "arith.constant":
        return False
    attribute = owner.attributes["value"]
    if not isinstance(attribute, ir.DenseElementsAttr) or not attribute.is_splat:
        return False
    element = attribute.get_splat_value()
    if isinstance(element, ir.FloatAttr):
        return element.value == 0.0
    return isinstance(element, ir.IntegerAttr) and element.value == 0
