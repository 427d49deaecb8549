"""Expand the math ops LLVM has no vector form for: f32 `erf`, `log` and `log1p` become
vector arithmetic, and an f64 `erf` becomes one libm call per lane.

LLVM lowers a vector `math.log` to one scalar `logf` call per lane and has no lowering for
`math.erf` at all, so activations such as GELU, softplus and log-softmax would either be
scalar or fail to compile. The f32 forms here stay in vector registers:
- erf(x) from Abramowitz and Stegun 7.1.26, 1 - t * P(t) * exp(-x^2) with t = 1 / (1 + p|x|),
  odd in x, within 1.5e-7 of erf everywhere (before f32 rounding);
- log(x) in the Cephes form: x = m * 2^e with m in [sqrt(1/2), sqrt(2)) taken from the bits,
  log(m) from a degree-9 polynomial in m - 1, e * ln(2) added in two parts; log(0) is -inf,
  a negative x gives NaN, +inf and NaN are kept;
- log1p(y) as log(u) * y / (u - 1) with u = 1 + y, exact for tiny y (where u - 1 is y's
  rounding), and y itself where u rounds to 1.
The `math.exp` an erf leaves is expanded by the `expand-exp` step that runs after this one.

Registered as the descriptor step `expand-math` (mlirtune.pipeline.steps).
"""

from __future__ import annotations

from math import prod as math_prod

from mlir import ir
from mlir.dialects import arith, func, math, vector

from mlirtune.ir.constants import element_type, same_shape, splat

# Abramowitz and Stegun 7.1.26: erf(x) ~ 1 - (a1 t + ... + a5 t^5) exp(-x^2), t = 1/(1 + p x).
ERF_P = 0.3275911
ERF_A = (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592)  # a5 .. a1
# Cephes logf: log(1 + f) ~ f - f^2/2 + f^3 * P(f) for m = 1 + f in [sqrt(1/2), sqrt(2)).
LOG_POLYNOMIAL = (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1,
                  1.4249322787e-1, -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1,
                  3.3333331174e-1)  # fmt: skip
LN2_HI, LN2_LO = 0.693359375, -2.12194440e-4
SQRT_HALF = 0.707106781186547524
MANTISSA_MASK, HALF_EXPONENT = 0x807FFFFF, 0x3F000000  # keep sign and mantissa; exponent of 0.5


def expand_math(module: ir.Module) -> None:
    """Rewrite every f32 `math.erf`, `math.log` and `math.log1p` and every f64 `math.erf`
    of `module` in place."""
    f32, f64 = ir.F32Type.get(), ir.F64Type.get()
    rewrites = {("math.erf", f32): _erf, ("math.log", f32): _log, ("math.log1p", f32): _log1p}
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        element = element_type(op.results[0].type) if len(op.results) == 1 else None
        if (op.name, element) in rewrites or (op.name == "math.erf" and element == f64):
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    for op in found:
        x = op.operands[0]
        with ir.InsertionPoint(op), op.location:
            rewrite = rewrites.get((op.name, element_type(x.type)))
            value = rewrite(x) if rewrite else _per_lane_call(module, "erf", x)
            op.results[0].replace_all_uses_with(value)
        op.erase()


def _select(condition: ir.Value, if_true: ir.Value, if_false: ir.Value) -> ir.Value:
    return arith.select(condition, if_true, if_false)


def _erf(x: ir.Value) -> ir.Value:
    def const(value: float) -> ir.Value:
        return splat(value, x.type)

    magnitude = math.absf(x)
    t = arith.divf(const(1.0), math.fma(const(ERF_P), magnitude, const(1.0)))
    p = const(ERF_A[0])
    for coefficient in ERF_A[1:]:
        p = math.fma(p, t, const(coefficient))
    gaussian = math.exp(arith.negf(arith.mulf(magnitude, magnitude)))
    result = arith.subf(const(1.0), arith.mulf(arith.mulf(p, t), gaussian))
    return math.copysign(result, x)  # erf is odd; NaN stays NaN through the arithmetic


def _log(x: ir.Value) -> ir.Value:
    i32 = same_shape(x.type, ir.IntegerType.get_signless(32))

    def const(value: float, of: ir.Type = x.type) -> ir.Value:
        return splat(value, of)

    bits = arith.bitcast(i32, x)
    # x = m * 2^e with m in [0.5, 1): the exponent field minus 126, the mantissa under 0.5's.
    exponent = arith.subi(arith.shrui(bits, const(23, i32)), const(126, i32))
    e = arith.sitofp(x.type, exponent)
    m = arith.bitcast(
        x.type,
        arith.ori(arith.andi(bits, const(MANTISSA_MASK, i32)), const(HALF_EXPONENT, i32)),
    )
    # Below sqrt(1/2), take m * 2 and e - 1, so that f = m - 1 lies in [-0.29, 0.41).
    small = arith.cmpf(arith.CmpFPredicate.OLT, m, const(SQRT_HALF))
    e = arith.subf(e, _select(small, const(1.0), const(0.0)))
    f = arith.subf(arith.addf(m, _select(small, m, const(0.0))), const(1.0))
    f2 = arith.mulf(f, f)
    p = const(LOG_POLYNOMIAL[0])
    for coefficient in LOG_POLYNOMIAL[1:]:
        p = math.fma(p, f, const(coefficient))
    y = arith.mulf(arith.mulf(p, f), f2)
    y = math.fma(e, const(LN2_LO), y)
    y = math.fma(f2, const(-0.5), y)
    result = math.fma(e, const(LN2_HI), arith.addf(f, y))
    result = _select(
        arith.cmpf(arith.CmpFPredicate.OEQ, x, const(0.0)), const(float("-inf")), result
    )
    result = _select(arith.cmpf(arith.CmpFPredicate.OEQ, x, const(float("inf"))), x, result)
    # Negative x and NaN: NaN (the unordered compare is true for NaN too).
    return _select(arith.cmpf(arith.CmpFPredicate.ULT, x, const(0.0)), const(float("nan")), result)


def _log1p(y: ir.Value) -> ir.Value:
    one = splat(1.0, y.type)
    u = arith.addf(y, one)
    rounded = arith.subf(u, one)
    scaled = arith.divf(arith.mulf(_log(u), y), rounded)
    return _select(arith.cmpf(arith.CmpFPredicate.OEQ, rounded, splat(0.0, y.type)), y, scaled)


def _per_lane_call(module: ir.Module, name: str, x: ir.Value) -> ir.Value:
    """`name(x)` through the C library, one scalar call per lane of a vector `x`."""
    element = element_type(x.type)
    _declare(module, name, element)
    callee = ir.FlatSymbolRefAttr.get(name)
    if not isinstance(x.type, ir.VectorType):
        return func.call([element], callee, [x])
    shape = list(x.type.shape)
    flat_type = ir.VectorType.get([math_prod(shape)], element)
    flat = vector.shape_cast(flat_type, x)
    result = flat
    for lane in range(flat_type.shape[0]):
        scalar = vector.extract(flat, [], [lane])
        result = vector.insert(func.call([element], callee, [scalar]), result, [], [lane])
    return vector.shape_cast(x.type, result)


def _declare(module: ir.Module, name: str, element: ir.Type) -> None:
    """A private `func.func @name(element) -> element` at the top of `module`, once."""
    if name in ir.SymbolTable(module.operation):
        return
    with ir.InsertionPoint.at_block_begin(module.body), ir.Location.unknown():
        declaration = func.FuncOp(name, ([element], [element]), visibility="private")
        declaration.attributes["llvm.readnone"] = ir.UnitAttr.get()
