"""Contractions of int16 pairs into AVX2 `vpmaddwd`: the int8 dot path's micro-kernel.

The contraction family's int8 dot path (schedules/contraction/dot.py) packs K by pairs and
leaves, per register-tile row and vector of columns, one contraction over a pair of A's
values and B's VNNI rows:

    C[n] += A[0] * B[n, 0] + A[1] * B[n, 1]        n < 8, int16 operands, int32 C

(unit dims aside). `vpmaddwd` computes exactly that for 8 lanes, each pair's two products
summed into one int32 lane, where A's pair is broadcast to every lane as one 32-bit value.
No upstream pattern emits it (x86vector's pair patterns take bf16, and int8 only with
AVX-VNNI-INT8), so this step rewrites each such `vector.contract` into the LLVM intrinsic
and an add. LLVM otherwise lowers it to sign extensions, 32-bit multiplies and shuffles.

Registered as the descriptor step `pair-products` (mlirtune.pipeline.steps). Contractions
of any other form are left alone.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, llvm, vector

# The AVX2 intrinsic: 16 int16 lanes of each operand, 8 int32 sums of adjacent products.
PMADDWD = "llvm.x86.avx2.pmadd.wd"
PAIR_LANES = 8


def pair_products(module: ir.Module) -> None:
    """Rewrite every int16-pair `vector.contract` of `module` (see the module docstring)."""
    contracts: list[ir.OpView] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "vector.contract" and _is_pair_contract(op.opview):
            contracts.append(op.opview)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    for contract in contracts:
        _rewrite(contract)


def _is_pair_contract(contract: ir.OpView) -> bool:
    """Whether `contract` sums A's pair times B's pair per lane: an add contraction of an
    int16 A of 2 values and B of 8 x 2 into 8 int32 lanes, its indexing maps (unit dims
    dropped) A -> (p), B -> (n, p), C -> (n)."""
    if contract.kind != ir.Attribute.parse("#vector.kind<add>"):
        return False
    lhs, rhs = ir.VectorType(contract.lhs.type), ir.VectorType(contract.rhs.type)
    i16, i32 = ir.IntegerType.get_signless(16), ir.IntegerType.get_signless(32)
    if contract.acc.type != ir.VectorType.get([PAIR_LANES], i32):
        return False
    if (lhs.element_type, rhs.element_type) != (i16, i16):
        return False
    maps = [ir.AffineMapAttr(m).value for m in contract.indexing_maps]
    a_dims = _sized_dims(maps[0], lhs.shape)
    b_dims = _sized_dims(maps[1], rhs.shape)
    c_dims = _sized_dims(maps[2], [PAIR_LANES])
    if None in (a_dims, b_dims, c_dims) or len(a_dims) != 1 or len(b_dims) != 2:
        return False
    (pair, a_size), (lane, b_lanes), (b_pair, b_size) = a_dims[0], b_dims[0], b_dims[1]
    return (
        c_dims == [(lane, PAIR_LANES)]
        and pair == b_pair
        and a_size == b_size == 2
        and b_lanes == PAIR_LANES
    )


def _sized_dims(indexing: ir.AffineMap, shape: list[int]) -> list[tuple[int, int]] | None:
    """The (loop dim, size) pairs an operand's map reads, unit dims dropped; None where a
    result is not a plain loop dim."""
    dims = []
    for expr, size in zip(indexing.results, shape, strict=True):
        if not isinstance(expr, ir.AffineDimExpr):
            return None
        if size != 1:
            dims.append((expr.position, size))
    return dims


def _rewrite(contract: ir.OpView) -> None:
    """Replace `contract` with acc + vpmaddwd(broadcast A pair, B's 8 x 2 values)."""
    i16, i32 = ir.IntegerType.get_signless(16), ir.IntegerType.get_signless(32)
    halves = ir.VectorType.get([2 * PAIR_LANES], i16)
    with ir.InsertionPoint(contract), contract.location:
        pair = vector.shape_cast(ir.VectorType.get([2], i16), contract.lhs)
        word = vector.bitcast(ir.VectorType.get([1], i32), pair)
        words = vector.broadcast(ir.VectorType.get([PAIR_LANES], i32), word)
        a = vector.bitcast(halves, words)
        b = vector.shape_cast(halves, contract.rhs)
        products = llvm.call_intrinsic(
            ir.VectorType.get([PAIR_LANES], i32), PMADDWD, [a, b], [], []
        )
        total = arith.addi(contract.acc, products)
    contract.result.replace_all_uses_with(total)
    contract.operation.erase()
