"""Losses of [M, N] inputs reduced to one scalar (PyTorch's default reduction), as KernelBench's
level-1 losses:
- mse:           mean((p - t)^2)
- huber:         F.smooth_l1_loss(p, t), beta 1: mean(|d| < 1 ? d^2 / 2 : |d| - 1/2)
- hinge:         mean(max(1 - p * t, 0)), t in {-1, +1}
- kl_div:        F.kl_div(log p, t, reduction="batchmean") = sum t * log(t / p) / M, with p and
                 t row softmaxes
- cosine:        mean over rows of 1 - cos(p, t), each norm clamped at 1e-8 as PyTorch does
- triplet:       mean over rows of max(||a - p + eps|| - ||a - n + eps|| + 1, 0), eps 1e-6
- cross_entropy: F.cross_entropy(logits, targets): mean of log(sum exp x) - x[target]

The payload is row reductions of [M, N] to [M] statistics (sums of an element-wise term) and
one reduction of those rows to the 0-d output, whose body combines a row's statistics. The
`full_reduction` family (schedules/full_reduction.py) tiles that last reduction by rows, so
one row loop fuses every row reduction and carries the scalar.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from mlir import ir
from mlir.dialects import arith, linalg, math, tensor

from mlirtune.interfaces.dtype import DTYPES
from mlirtune.interfaces.workload import ArgSpec, Complexity, Param
from mlirtune.ir.constants import splat
from mlirtune.ir.maps import generic, projection_map
from mlirtune.workloads.base import FLOAT_DTYPE_PARAM, SEED_PARAM, PayloadWorkload
from mlirtune.workloads.payload import build_payload, filled

KINDS = ("mse", "huber", "cosine", "kl_div", "hinge", "cross_entropy", "triplet")
COSINE_EPS = 1e-8  # F.cosine_similarity's, clamping each norm
TRIPLET_EPS, TRIPLET_MARGIN = 1e-6, 1.0  # nn.TripletMarginLoss's defaults
ROW_REDUCTION = ["parallel", "reduction"]
INT64 = DTYPES["i64"]  # cross_entropy's class ids, as PyTorch's
# Per-element flops of each kind's row terms (a log, exp or divide counts as one).
FLOPS = {
    "mse": 3,
    "huber": 6,
    "cosine": 6,
    "kl_div": 4,
    "hinge": 4,
    "cross_entropy": 6,
    "triplet": 8,
}
INPUTS = {"triplet": ("anchor", "positive", "negative"), "cross_entropy": ("logits", "targets")}

Term = Callable[..., ir.Value]


class Loss(PayloadWorkload):
    """out = loss(inputs) reduced to a scalar (see the module docstring)."""

    name = "loss"
    description = "a loss of [M, N] inputs to one scalar: mse, huber, cosine, kl_div, ..."
    parameters = (
        Param("M", int, 128, "rows (batch)"),
        Param("N", int, 4096, "columns (features per row; classes for cross_entropy)"),
        Param("kind", str, "mse", ", ".join(KINDS), KINDS),
        FLOAT_DTYPE_PARAM,
        SEED_PARAM,
    )

    @property
    def kind(self) -> str:
        return str(self.options["kind"])

    @property
    def shape(self) -> tuple[int, int]:
        return self.options["M"], self.options["N"]

    def arguments(self) -> list[ArgSpec]:
        m, n = self.shape
        if self.kind == "cross_entropy":
            inputs = [ArgSpec("logits", (m, n), self.dtype), ArgSpec("targets", (m,), INT64)]
        else:
            names = INPUTS.get(self.kind, ("predictions", "targets"))
            inputs = [ArgSpec(name, (m, n), self.dtype) for name in names]
        return [*inputs, ArgSpec("out", (), self.dtype, is_output=True)]

    def payload_module(self) -> ir.Module:
        element = self.dtype.mlir()
        m, n = self.shape
        full, row = projection_map(2, [0, 1]), projection_map(2, [0])

        def row_reduction(inputs: Sequence[ir.Value], maps, term: Term, start=0.0) -> ir.Value:
            """[M] of acc = step(acc, term(row elements)); step is max for start=-inf."""
            init = filled(tensor.empty([m], element), element, start)
            combine = arith.maximumf if start == -np.inf else arith.addf
            return generic(
                inputs,
                init,
                [*maps, row],
                ROW_REDUCTION,
                lambda *values: combine(values[-1], term(*values[:-1])),
            )

        def total(rows: Sequence[ir.Value], term: Term, scale: float) -> ir.Value:
            """The 0-d sum over rows of scale * term(row statistics)."""
            init = filled(tensor.empty([], element), element, 0.0)
            over_rows = [projection_map(1, [0])] * len(rows)
            return generic(
                rows,
                init,
                [*over_rows, projection_map(1, [])],
                ["reduction"],
                lambda *values: arith.addf(
                    values[-1], arith.mulf(term(*values[:-1]), splat(scale, values[-1].type))
                ),
            )

        def body(inputs: list[ir.Value], inits: list[ir.Value]) -> list[ir.Value]:
            kind = self.kind
            if kind in ("mse", "huber", "hinge"):
                term = {"mse": _squared_error, "huber": _huber, "hinge": _hinge}[kind]
                sums = row_reduction(inputs, [full, full], term)
                return [total([sums], lambda s: s, 1.0 / (m * n))]
            if kind == "kl_div":
                p, t = inputs
                sums = row_reduction([p, t], [full, full], _kl_term)
                return [total([sums], lambda s: s, 1.0 / m)]
            if kind == "cosine":
                p, t = inputs
                stats = [
                    row_reduction([a, b], [full, full], arith.mulf) for a, b in ((p, t), (p, p))
                ]
                stats.append(row_reduction([t, t], [full, full], arith.mulf))
                return [total(stats, _one_minus_cosine, 1.0 / m)]
            if kind == "triplet":
                anchor, positive, negative = inputs
                distances = [
                    row_reduction([anchor, other], [full, full], _shifted_square)
                    for other in (positive, negative)
                ]
                return [total(distances, _triplet_term, 1.0 / m)]
            logits, targets = inputs
            top = row_reduction([logits], [full], lambda v: v, start=-np.inf)
            exps = row_reduction(
                [logits, top], [full, row], lambda v, t: math.exp(arith.subf(v, t))
            )
            # The target's logit is read in the last op's body (its row loop is tiled plainly,
            # keeping linalg.index right; a column-tiled reduction's index is not offset).
            # A parallel op: the vectorizer turns tensor.extract into a gather only there.
            row_loss = _cross_entropy_term(logits)
            losses = generic(
                [top, exps, targets],
                tensor.empty([m], element),
                [projection_map(1, [0])] * 4,
                ["parallel"],
                lambda *values: row_loss(*values[:-1]),
            )
            return [total([losses], lambda v: v, 1.0 / m)]

        return build_payload(self.arguments(), body)

    def make_inputs(self) -> list[np.ndarray]:
        """Standard normal values, as KernelBench's randn; kl_div's are row softmaxes of them,
        hinge's targets signs, cross_entropy's targets class ids in [0, N)."""
        rng = np.random.default_rng(self.seed)
        m, n = self.shape
        numpy_type = self.dtype.numpy
        if self.kind == "cross_entropy":
            logits = rng.standard_normal((m, n)).astype(numpy_type)
            return [logits, rng.integers(0, n, size=m, dtype=np.int64)]
        count = 3 if self.kind == "triplet" else 2
        arrays = [rng.standard_normal((m, n)) for _ in range(count)]
        if self.kind == "kl_div":
            arrays = [_softmax(a) for a in arrays]
        elif self.kind == "hinge":
            arrays[1] = np.where(arrays[1] >= 0, 1.0, -1.0)
        return [a.astype(numpy_type) for a in arrays]

    def reference(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        cast = [a if a.dtype == np.int64 else a.astype(np.float64) for a in inputs]
        return [np.asarray(_loss(self.kind, cast), dtype=np.float64)]

    def numpy_baseline(self) -> Callable[[], object]:
        inputs, kind = self.inputs, self.kind
        return lambda: _loss(kind, inputs)

    def torch_baseline(self) -> Callable[[], object]:
        import torch

        from mlirtune.bench.baseline import torch_tensor

        functional = torch.nn.functional
        x = [torch_tensor(a) for a in self.inputs]
        kind = self.kind
        if kind == "mse":
            return lambda: functional.mse_loss(x[0], x[1])
        if kind == "huber":
            return lambda: functional.smooth_l1_loss(x[0], x[1])
        if kind == "cosine":
            return lambda: torch.mean(1 - functional.cosine_similarity(x[0], x[1], dim=1))
        if kind == "kl_div":
            return lambda: functional.kl_div(torch.log(x[0]), x[1], reduction="batchmean")
        if kind == "hinge":
            return lambda: torch.mean(torch.clamp(1 - x[0] * x[1], min=0))
        if kind == "cross_entropy":
            return lambda: functional.cross_entropy(x[0], x[1])
        return lambda: functional.triplet_margin_loss(
            x[0], x[1], x[2], margin=TRIPLET_MARGIN, p=2, eps=TRIPLET_EPS
        )

    def reference_scratch_bytes(self) -> int:
        # Every input as float64 and up to four temporaries of one input's size (huber).
        m, n = self.shape
        return 8 * m * n * (len(self.arguments()) - 1 + 4)

    def baseline_bytes(self) -> int:
        # Temporaries of one input's size: huber's |p - t|, its square, ...; kl_div's
        # quotient, log and product peak at eight under tracemalloc (numpy's buffers).
        m, n = self.shape
        return 8 * m * n * self.dtype.itemsize

    def accumulation_length(self) -> int:
        m, n = self.shape
        return m * n

    def get_complexity(self) -> Complexity:
        """The row terms' flops per element, plus a few per row; every input read once."""
        m, n = self.shape
        read = sum(a.nbytes for a in self.arguments() if not a.is_output)
        return Complexity(FLOPS[self.kind] * m * n + 8 * m, read, self.dtype.itemsize)


# --- MLIR bodies (scalars or vectors) -------------------------------------------------------


def _c(value: float, like: ir.Value) -> ir.Value:
    return splat(value, like.type)


def _squared_error(p: ir.Value, t: ir.Value) -> ir.Value:
    d = arith.subf(p, t)
    return arith.mulf(d, d)


def _huber(p: ir.Value, t: ir.Value) -> ir.Value:
    d = math.absf(arith.subf(p, t))
    small = arith.cmpf(arith.CmpFPredicate.OLT, d, _c(1.0, d))
    return arith.select(small, arith.mulf(arith.mulf(d, d), _c(0.5, d)), arith.subf(d, _c(0.5, d)))


def _hinge(p: ir.Value, t: ir.Value) -> ir.Value:
    return arith.maximumf(arith.subf(_c(1.0, p), arith.mulf(p, t)), _c(0.0, p))


def _kl_term(p: ir.Value, t: ir.Value) -> ir.Value:
    return arith.mulf(t, math.log(arith.divf(t, p)))


def _shifted_square(a: ir.Value, b: ir.Value) -> ir.Value:
    d = arith.addf(arith.subf(a, b), _c(TRIPLET_EPS, a))
    return arith.mulf(d, d)


def _one_minus_cosine(dot: ir.Value, pp: ir.Value, tt: ir.Value) -> ir.Value:
    def norm(squares: ir.Value) -> ir.Value:
        return arith.maximumf(math.sqrt(squares), _c(COSINE_EPS, squares))

    return arith.subf(_c(1.0, dot), arith.divf(dot, arith.mulf(norm(pp), norm(tt))))


def _triplet_term(positive: ir.Value, negative: ir.Value) -> ir.Value:
    gap = arith.subf(math.sqrt(positive), math.sqrt(negative))
    return arith.maximumf(arith.addf(gap, _c(TRIPLET_MARGIN, gap)), _c(0.0, gap))


def _cross_entropy_term(logits: ir.Value) -> Term:
    """log(sum exp(x - max)) + max - x[target] of one row. x[target] is read from `logits`
    viewed as 1-D: the vectorizer turns only a 1-D tensor.extract into a gather."""
    logits_type = ir.RankedTensorType(logits.type)
    rows, classes = logits_type.shape
    flat_type = ir.RankedTensorType.get([rows * classes], logits_type.element_type)
    flat = tensor.collapse_shape(flat_type, logits, [[0, 1]])

    def term(top: ir.Value, exps: ir.Value, target: ir.Value) -> ir.Value:
        index = ir.IndexType.get()
        start = arith.muli(linalg.IndexOp(0).result, arith.constant(index, classes))
        picked = tensor.extract(flat, [arith.addi(start, arith.index_cast(index, target))])
        return arith.subf(arith.addf(math.log(exps), top), picked)

    return term


# --- numpy (the reference in float64, the baseline in the inputs' dtype) ---------------------


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _loss(kind: str, inputs: list[np.ndarray]) -> np.floating:
    """The loss in numpy, in the inputs' float dtype."""
    if kind == "cross_entropy":
        logits, targets = inputs
        top = logits.max(axis=1)
        lse = np.log(np.exp(logits - top[:, None]).sum(axis=1)) + top
        return np.mean(lse - logits[np.arange(len(targets)), targets])
    if kind == "triplet":
        anchor, positive, negative = inputs
        near = np.linalg.norm(anchor - positive + TRIPLET_EPS, axis=1)
        far = np.linalg.norm(anchor - negative + TRIPLET_EPS, axis=1)
        return np.mean(np.maximum(near - far + TRIPLET_MARGIN, 0))
    p, t = inputs
    if kind == "mse":
        return np.mean((p - t) ** 2)
    if kind == "huber":
        d = np.abs(p - t)
        return np.mean(np.where(d < 1, 0.5 * d * d, d - 0.5))
    if kind == "hinge":
        return np.mean(np.maximum(1 - p * t, 0))
    if kind == "kl_div":
        return np.sum(t * np.log(t / p)) / p.shape[0]
    norms = np.linalg.norm(p, axis=1), np.linalg.norm(t, axis=1)
    clamped = np.maximum(norms[0], COSINE_EPS) * np.maximum(norms[1], COSINE_EPS)
    return np.mean(1 - (p * t).sum(axis=1) / clamped)
