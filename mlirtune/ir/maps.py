"""Affine maps that payload and dispatch builders index tensors with, and the
linalg.generic they build with them."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mlir import ir
from mlir.dialects import linalg


def identity_map(rank: int) -> ir.AffineMap:
    return ir.AffineMap.get_identity(rank)


def projection_map(rank: int, dims: Sequence[int]) -> ir.AffineMap:
    """(d0..d{rank-1}) -> (d{dims[0]}, ...): broadcasts and reductions."""
    return ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(d) for d in dims])


def map_loops(affine_map: ir.AffineMap) -> list[int] | None:
    """The loop each of a map's results is, when each is one plain loop (else None)."""
    results = list(affine_map.results)
    if not all(isinstance(r, ir.AffineDimExpr) for r in results):
        return None
    return [ir.AffineDimExpr(r).position for r in results]


def generic(
    inputs: Sequence[ir.Value],
    init: ir.Value,
    maps: Sequence[ir.AffineMap],
    iterators: Sequence[str],
    body: Callable[..., ir.Value],
) -> ir.Value:
    """A single-result linalg.generic; `body(*input_scalars, out_scalar)` returns the yield."""
    iterator_attrs = [ir.Attribute.parse(f"#linalg.iterator_type<{it}>") for it in iterators]
    op = linalg.GenericOp_(
        list(inputs),
        [init],
        ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
        ir.ArrayAttr.get(iterator_attrs),
    )
    with ir.InsertionPoint(op.regions[0].blocks[0]):
        linalg.YieldOp([body(*op.regions[0].blocks[0].arguments)])
    return op.result
