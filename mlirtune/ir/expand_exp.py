"""Expand f32 `math.exp` into vector arithmetic: range reduction, a polynomial, an exponent.

LLVM lowers a `math.exp` on a vector to one scalar `expf` call per lane, which makes exp the
whole cost of a softmax. This step rewrites each f32 `math.exp` (scalar or vector) into
arithmetic that stays in vector registers, in the classic Cody-Waite form:
- n = roundeven(x * log2(e)), r = x - n * ln(2) by two FMAs with ln(2) split in two
  constants, so r lies in [-ln(2)/2, ln(2)/2] and is exact to a few ulp;
- exp(r) from a degree-7 polynomial (Cephes' expf coefficients) in Horner form, within about
  1 ulp there;
- the result is exp(r) * 2^n. With `isa="avx512"` that is one `llvm.ldexp`, which LLVM
  lowers to vscalefps: overflow to +inf comes out of the instruction, so x only needs
  clamping to where it is reached. Elsewhere LLVM would call `ldexpf` per lane, so 2^n is
  built in the exponent field ((n + 127) << 23) and multiplied in, as 2^(n-1) * 2 for
  n > 0 so that n = 128 stays a finite power; above ln(FLT_MAX) the result is +inf.
Below MIN_LOG (no normal f32) the result is flushed to 0 on both paths, as SIMD math
libraries do: a subnormal result, and every product and sum that reads it, takes a
microcode assist of a hundred cycles or more. A causal softmax, whose masked scores are
-inf, ran 3.3x slower with vscalefps' gradual underflow (32 x 128 x 128 f32 on an Intel
Xeon, 2.6 ms against 0.8 ms).
A NaN stays NaN on both paths.

Registered as the descriptor step `expand-exp` (mlirtune.pipeline.steps), which the host
pipeline runs with the target's ISA; f64 and other types keep LLVM's lowering.
"""

from __future__ import annotations

import itertools

from mlir import ir
from mlir.dialects import arith, llvm, math, ub, vector

from mlirtune.ir.constants import element_type, same_shape, splat

LOG2E = 1.44269504088896341
# ln(2) = LN2_HI + LN2_LO, LN2_HI with few mantissa bits so that n * LN2_HI is exact.
LN2_HI, LN2_LO = 0.693359375, -2.12194440e-4
# Cephes expf: exp(r) ~ 1 + r + r^2 * P(r) on [-ln(2)/2, ln(2)/2].
POLYNOMIAL = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
              1.6666665459e-1, 5.0000001201e-1)  # fmt: skip
# exp(x) is a finite, normal f32 between these (MAX_LOG is ln(FLT_MAX)).
MIN_LOG, MAX_LOG = -87.3365447504019, 88.72283935546875
# With ldexp: exp(x) overflows above LDEXP_HIGH.
LDEXP_HIGH = 89.0
EXPONENT_BIAS, MANTISSA_BITS = 127, 23


def expand_exp(module: ir.Module, isa: str = "generic") -> None:
    """Rewrite every f32 `math.exp` of `module` in place, for code generated for `isa`
    (a HostCPU ISA level: "avx512", "avx2", ...)."""
    expansion = _exp_by_ldexp if isa == "avx512" else _exp_by_exponent_bits
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "math.exp" and element_type(op.results[0].type) == ir.F32Type.get():
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    for op in found:
        with ir.InsertionPoint(op), op.location:
            op.results[0].replace_all_uses_with(expansion(op.operands[0]))
        op.erase()


def _reduced(x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """n and exp(r) for exp(x) = exp(r) * 2^n, x finite."""
    n = math.roundeven(arith.mulf(x, splat(LOG2E, x.type)))
    r = math.fma(n, splat(-LN2_HI, x.type), x)
    r = math.fma(n, splat(-LN2_LO, x.type), r)
    # exp(r) = 1 + r * (1 + r * P(r)), P from the highest coefficient down.
    p = splat(POLYNOMIAL[0], x.type)
    for coefficient in (*POLYNOMIAL[1:], 1.0, 1.0):
        p = math.fma(p, r, splat(coefficient, x.type))
    return n, p


def _keep_nan(x: ir.Value, result: ir.Value) -> ir.Value:
    return arith.select(arith.cmpf(arith.CmpFPredicate.UNO, x, x), x, result)


def _exp_by_ldexp(x: ir.Value) -> ir.Value:
    # maxnumf/minnumf drop a NaN, so n stays an integer the conversion can take.
    clamped = arith.minnumf(arith.maxnumf(x, splat(MIN_LOG, x.type)), splat(LDEXP_HIGH, x.type))
    n, exp_r = _reduced(clamped)
    i32 = same_shape(x.type, ir.IntegerType.get_signless(32))
    return _keep_nan(x, _flush_below_normal(x, _ldexp(exp_r, arith.fptosi(i32, n))))


def _flush_below_normal(x: ir.Value, result: ir.Value) -> ir.Value:
    """0 where exp(x) has no normal f32 (x < MIN_LOG), else `result`."""
    below = arith.cmpf(arith.CmpFPredicate.OLT, x, splat(MIN_LOG, x.type))
    return arith.select(below, splat(0.0, x.type), result)


def _ldexp(x: ir.Value, exponent: ir.Value) -> ir.Value:
    """x * 2^exponent through LLVM's ldexp intrinsic, which takes a scalar or a 1-D vector:
    an n-D vector goes row by row."""
    if not isinstance(x.type, ir.VectorType):
        return llvm.call_intrinsic(x.type, "llvm.ldexp.f32.i32", [x, exponent], [], [])
    if x.type.rank == 1:
        lanes = x.type.shape[0]
        name = f"llvm.ldexp.v{lanes}f32.v{lanes}i32"
        return llvm.call_intrinsic(x.type, name, [x, exponent], [], [])
    result = ub.poison(x.type)
    for row in itertools.product(*map(range, x.type.shape[:-1])):
        scaled = _ldexp(vector.extract(x, [], list(row)), vector.extract(exponent, [], list(row)))
        result = vector.insert(scaled, result, [], list(row))
    return result


def _exp_by_exponent_bits(x: ir.Value) -> ir.Value:
    f32 = x.type
    i32 = same_shape(f32, ir.IntegerType.get_signless(32))

    def const(value: float, of: ir.Type = f32) -> ir.Value:
        return splat(value, of)

    clamped = arith.minimumf(arith.maximumf(x, const(MIN_LOG)), const(MAX_LOG))
    n, exp_r = _reduced(clamped)
    # 2^n as 2^(n - k) * 2^k, k = 1 for n > 0: n - k stays within the exponent field.
    k = arith.select(arith.cmpf(arith.CmpFPredicate.OGT, n, const(0.0)), const(1.0), const(0.0))
    exponent = arith.addi(arith.fptosi(i32, arith.subf(n, k)), const(EXPONENT_BIAS, i32))
    two_to_n = arith.bitcast(f32, arith.shli(exponent, const(MANTISSA_BITS, i32)))
    result = arith.mulf(arith.mulf(exp_r, two_to_n), arith.addf(k, const(1.0)))
    result = _flush_below_normal(x, result)
    result = arith.select(
        arith.cmpf(arith.CmpFPredicate.OGT, x, const(MAX_LOG)), const(float("inf")), result
    )
    return _keep_nan(x, result)
