"""Expand f32 `math.exp` into vector arithmetic: range reduction, a polynomial, an exponent.

LLVM lowers a `math.exp` on a vector to one scalar `expf` call per lane, which makes exp the
whole cost of a softmax. This step rewrites each f32 `math.exp` (scalar or vector) into
arithmetic that stays in vector registers, in the classic Cody-Waite form:
- n = roundeven(x * log2(e)), r = x - n * ln(2) with ln(2) split in two constants, so r lies
  in [-ln(2)/2, ln(2)/2] and is exact to a few ulp;
- exp(r) from a degree-7 polynomial (Cephes' expf coefficients), within about 1 ulp there;
- 2^n built in the exponent field ((n + 127) << 23) and multiplied in, as 2^(n-1) * 2 for
  n > 0 so that n = 128 (x up to ln(FLT_MAX)) stays a finite power.
Above ln(FLT_MAX) the result is +inf; below MIN_LOG, where exp(x) is no normal f32, it is
flushed to 0 (as SIMD math libraries do); a NaN stays NaN.

Registered as the descriptor step `expand-exp` (mlirtune.pipeline.steps); f64 and other
types keep LLVM's lowering.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, math

from mlirtune.ir.constants import element_type, same_shape, splat

LOG2E = 1.44269504088896341
# ln(2) = LN2_HI + LN2_LO, LN2_HI with few mantissa bits so that n * LN2_HI is exact.
LN2_HI, LN2_LO = 0.693359375, -2.12194440e-4
# Cephes expf: exp(r) ~ 1 + r + r^2 * P(r) on [-ln(2)/2, ln(2)/2].
POLYNOMIAL = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
              1.6666665459e-1, 5.0000001201e-1)  # fmt: skip
# exp(x) is a finite, normal f32 between these (MAX_LOG is ln(FLT_MAX)).
MIN_LOG, MAX_LOG = -87.3365447504019, 88.72283935546875
EXPONENT_BIAS, MANTISSA_BITS = 127, 23


def expand_exp(module: ir.Module) -> None:
    """Rewrite every f32 `math.exp` of `module` in place."""
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "math.exp" and element_type(op.results[0].type) == ir.F32Type.get():
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    for op in found:
        with ir.InsertionPoint(op), op.location:
            op.results[0].replace_all_uses_with(_exp(op.operands[0]))
        op.erase()


def _exp(x: ir.Value) -> ir.Value:
    f32 = x.type
    i32 = same_shape(f32, ir.IntegerType.get_signless(32))

    def const(value: float, of: ir.Type = f32) -> ir.Value:
        return splat(value, of)

    clamped = arith.minimumf(arith.maximumf(x, const(MIN_LOG)), const(MAX_LOG))
    n = math.roundeven(arith.mulf(clamped, const(LOG2E)))
    r = arith.subf(clamped, arith.mulf(n, const(LN2_HI)))
    r = arith.subf(r, arith.mulf(n, const(LN2_LO)))
    p = const(POLYNOMIAL[0])
    for coefficient in POLYNOMIAL[1:]:
        p = math.fma(p, r, const(coefficient))
    exp_r = arith.addf(math.fma(p, arith.mulf(r, r), r), const(1.0))
    # 2^n as 2^(n - k) * 2^k, k = 1 for n > 0: n - k stays within the exponent field.
    k = arith.select(arith.cmpf(arith.CmpFPredicate.OGT, n, const(0.0)), const(1.0), const(0.0))
    exponent = arith.addi(arith.fptosi(i32, arith.subf(n, k)), const(EXPONENT_BIAS, i32))
    two_to_n = arith.bitcast(f32, arith.shli(exponent, const(MANTISSA_BITS, i32)))
    result = arith.mulf(arith.mulf(exp_r, two_to_n), arith.addf(k, const(1.0)))
    result = arith.select(
        arith.cmpf(arith.CmpFPredicate.OLT, x, const(MIN_LOG)), const(0.0), result
    )
    result = arith.select(
        arith.cmpf(arith.CmpFPredicate.OGT, x, const(MAX_LOG)), const(float("inf")), result
    )
    return arith.select(arith.cmpf(arith.CmpFPredicate.UNO, x, x), x, result)
