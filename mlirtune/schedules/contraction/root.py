"""The contraction family's root ops: a linalg op with one M, one N and any K loops (and at
most one batch loop), as linalg's contraction inference reads it."""

from __future__ import annotations

from mlir import ir
from mlir.dialects import linalg

from mlirtune.interfaces.op import OpInfo
from mlirtune.ir.roots import is_windowed, product


def recognise_contraction(
    op: ir.Operation, loops: list[int], dtypes: tuple[str, ...]
) -> OpInfo | None:
    """A matmul (with its operands' layout, and whether element-wise consumers follow it)
    or a batch matmul; None for anything else (a convolution read through windows, whose
    spatial loops no contraction dim names)."""
    if is_windowed(op):
        return None
    contraction = linalg.infer_contraction_dimensions(op)
    if contraction is None or len(contraction.m) != 1 or len(contraction.n) != 1:
        return None
    dims = {"M": loops[contraction.m[0]], "N": loops[contraction.n[0]]}
    dims["K"] = product(loops[k] for k in contraction.k)
    if len(contraction.batch) == 1:
        return OpInfo("batch_matmul", {"B": loops[contraction.batch[0]], **dims}, dtypes, op.name)
    if contraction.batch:
        return None
    attrs = _layout(op, contraction)
    uses = [use.owner.name for result in op.results for use in result.uses]
    if "tensor.expand_shape" in uses:
        attrs["reshaped_output"] = 1  # a pointwise conv's (mlirtune.ir.pointwise)
    if "linalg.generic" in uses:
        attrs["epilogue"] = 1  # element-wise consumers (bias, ReLU) fused after it
    return OpInfo("matmul", dims, dtypes, op.name, attrs)


def contraction_flops(op: OpInfo) -> int:
    """2 FLOPs per multiply-add."""
    d = op.dims
    return 2 * d.get("B", 1) * d["M"] * d["N"] * d["K"]


def _layout(op: ir.Operation, contraction) -> dict[str, int]:
    """Operands of a matmul stored transposed: `transpose_a` for A as [K, M] (its inner dim
    is an M loop), `transpose_b` for B as [N, K] (its inner dim a K loop); empty for the
    plain layout, so a plain matmul's description is unchanged."""
    maps = [ir.AffineMapAttr(a).value for a in linalg.get_indexing_maps(op)]
    inner = [m.results[-1] for m in maps[:2]]
    layout = {}
    if isinstance(inner[0], ir.AffineDimExpr) and inner[0].position in contraction.m:
        layout["transpose_a"] = 1
    if isinstance(inner[1], ir.AffineDimExpr) and inner[1].position in contraction.k:
        layout["transpose_b"] = 1
    return layout
