"""Affine maps that payload and dispatch builders index tensors with."""

from __future__ import annotations

from collections.abc import Sequence

from mlir import ir


def identity_map(rank: int) -> ir.AffineMap:
    return ir.AffineMap.get_identity(rank)


def projection_map(rank: int, dims: Sequence[int]) -> ir.AffineMap:
    """(d0..d{rank-1}) -> (d{dims[0]}, ...): broadcasts and reductions."""
    return ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(d) for d in dims])
