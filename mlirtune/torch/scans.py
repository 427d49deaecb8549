"""Cumulative sums and products as loops of vector steps.

torch-mlir lowers `cumsum` and `cumprod` to `tm_tensor.scan`, an op of its own dialect with
no lowering to linalg. Each one becomes a loop nest here, on tensors, whose innermost loop
walks the scanned dim carrying the running sums (or products) in a vector register:

- along any dim but the last, the vectors run along the last dim (`_scan_columns`);
- along the last dim, tiles of rows are read as vectors and transposed in registers, so
  that each vector holds the tile's rows at one position (`_scan_rows`);
- a single row is scanned one value at a time.

Each step combines values in the order torch's sequential loop does, so a NaN or an
infinity changes the elements after it and none before, and the running values have the
precision torch's CPU kernels give them (`_accumulator`): the results are eager's.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from mlir import ir
from mlir.dialects import arith, scf, tensor, vector

from mlirtune.ir.constants import index_constant, splat
from mlirtune.ir.inspect import ops_named
from mlirtune.ir.roots import SCAN_ATTRIBUTE

SCAN_OP = "tm_tensor.scan"
# Lanes of one vector, in bits: an AVX2 register, which LLVM splits on narrower hosts.
VECTOR_BITS = 256
# Vectors combined per step: independent chains, enough to hide a combine's latency (3-4
# cycles) on two vector pipes.
CHAINS = 4
# Per combiner in the scan's body: its builder and its identity, the running value's start
# (-0.0, not 0.0, so that a sum of negative zeros stays negative, as torch's does).
COMBINERS: dict[str, tuple[Callable[[ir.Value, ir.Value], ir.Value], float]] = {
    "arith.addf": (arith.addf, -0.0),
    "arith.mulf": (arith.mulf, 1.0),
    "arith.addi": (arith.addi, 0),
    "arith.muli": (arith.muli, 1),
}


def lower_scans(function: ir.Operation) -> int:
    """Replace each inclusive scan in `function` whose combiner is a sum or a product and
    whose running total (second result) nobody reads; returns how many. Others stay, and
    are reported as ops with no lowering."""
    found = [(op, _combiner(op)) for op in ops_named(function, SCAN_OP)]
    scans = [(op, combiner) for op, combiner in found if combiner is not None]
    for op, combiner in scans:
        dim = ir.IntegerAttr(op.attributes["dimension"]).value
        with ir.InsertionPoint(op), op.location:
            result = _scan(op.operands[0], dim, combiner)
        op.results[0].replace_all_uses_with(result)
        op.erase()
    return len(scans)


def _combiner(op: ir.Operation) -> str | None:
    """The name of the scan's combiner when `op` is an inclusive scan of one input by one
    of COMBINERS on its two block arguments, with its running total unread."""
    if len(op.operands) != 3 or len(op.results) != 2 or list(op.results[1].uses):
        return None
    if "inclusive" not in op.attributes or not ir.BoolAttr(op.attributes["inclusive"]).value:
        return None
    block = op.regions[0].blocks[0]
    body = [nested.operation for nested in block.operations]
    if len(body) != 2 or body[0].name not in COMBINERS:
        return None
    if set(body[0].operands) != set(block.arguments) or list(body[1].operands) != [
        body[0].results[0]
    ]:
        return None
    return body[0].name


def _scan(source: ir.Value, dim: int, combiner: str) -> ir.Value:
    """`source` scanned along `dim`, in the layout of the module's docstring."""
    shape = ir.RankedTensorType(source.type).shape
    if shape[dim] == 1:  # a scan of one value is that value
        return source
    if math.prod(shape) == shape[dim]:  # one row, as a column [N, 1]
        column = _scan_columns(_reshaped(source, [shape[dim], 1]), 0, combiner)
        return _reshaped(column, shape)
    if dim != len(shape) - 1:
        return _scan_columns(source, dim, combiner)
    return _scan_rows(source, combiner)


def _element(value: ir.Value) -> ir.Type:
    return ir.RankedTensorType(value.type).element_type


def _scan_columns(source: ir.Value, dim: int, combiner: str) -> ir.Value:
    """The loop nest of a scan along `dim`, which is not the last dim: a loop per other dim
    but the last, one over chunks of the last dim CHAINS vectors wide (then one over the
    narrower rest), and innermost the scan's own loop over `dim`."""
    shape = ir.RankedTensorType(source.type).shape
    last = shape[-1]
    width = min(CHAINS * _lanes(_element(source)), last)
    outer = [d for d in range(len(shape) - 1) if d != dim]
    bounds = [(0, shape[d], 1) for d in outer]
    output = tensor.empty(shape, _element(source))
    full = last - last % width
    for start, stop, step in ((0, full, width), (full, last, last - full)):
        if start == stop:
            continue

        def body(ivs: list[ir.Value], output: ir.Value, width: int = step) -> ir.Value:
            *at, column = ivs
            at = dict(zip(outer, at, strict=True))
            return _scan_column_chunk(source, output, dim, at, column, width, combiner)

        output = _loops([*bounds, (start, stop, step)], output, body)
    return output


def _scan_rows(source: ir.Value, combiner: str) -> ir.Value:
    """The loop nest of a scan along the last dim, in tiles of `lanes` rows (along the dim
    before it) by `lanes` values: a loop per dim before the rows, one over row tiles (and
    a shorter tail tile), and innermost the scan's own loop over column tiles (and a
    narrower tail tile), carrying one running vector whose lanes are the tile's rows."""
    shape = ir.RankedTensorType(source.type).shape
    rows, columns = shape[-2], shape[-1]
    lanes = _lanes(_element(source))
    _, identity = COMBINERS[combiner]
    running = ir.VectorType.get([lanes], _accumulator(_element(source)))
    bounds = [(0, size, 1) for size in shape[:-2]]
    full_columns, tail_columns = columns - columns % lanes, columns % lanes

    def row_tiles(height: int) -> Callable[[list[ir.Value], ir.Value], ir.Value]:
        def body(ivs: list[ir.Value], output: ir.Value) -> ir.Value:
            tile = _RowTile(source, combiner, ivs, height)
            total = splat(identity, running)
            if full_columns:
                steps = (index_constant(0), index_constant(full_columns), index_constant(lanes))
                loop = _marked(scf.ForOp(*steps, [output, total]))
                with ir.InsertionPoint(loop.body):
                    written, total = loop.inner_iter_args
                    written, total = tile.scan(written, total, loop.induction_variable, lanes)
                    scf.YieldOp([written, total])
                output, total = loop.results
            if tail_columns:
                output, _ = tile.scan(output, total, index_constant(full_columns), tail_columns)
            return output

        return body

    output = tensor.empty(shape, _element(source))
    full_rows = rows - rows % lanes
    if full_rows:
        output = _loops([*bounds, (0, full_rows, lanes)], output, row_tiles(lanes))
    if rows % lanes:
        output = _loops([*bounds, (full_rows, rows, lanes)], output, row_tiles(rows % lanes))
    return output


class _RowTile:
    """One tile of `height` rows at the row loops' indices `ivs`: its rows read as vectors,
    transposed in registers (`_transposed`) so that each vector holds the rows' values at
    one position, those combined in order into the running vector, the results transposed
    back and written."""

    def __init__(self, source: ir.Value, combiner: str, ivs: list[ir.Value], height: int):
        self.source, self.combine = source, COMBINERS[combiner][0]
        *self.outer, self.first_row = ivs
        self.height = height
        self.element = _element(source)
        self.lanes = _lanes(self.element)

    def scan(
        self, output: ir.Value, total: ir.Value, column: ir.Value, width: int
    ) -> tuple[ir.Value, ir.Value]:
        """The tile's `width` values from `column` scanned into `output`; the output and
        the running vector after them."""
        lanes, element = self.lanes, self.element
        vector_type = ir.VectorType.get([lanes], element)
        rank = len(ir.RankedTensorType(self.source.type).shape)
        last = ir.AffineMap.get_minor_identity(rank, 1)
        indices = [
            [*self.outer, arith.addi(self.first_row, index_constant(i)), column]
            for i in range(self.height)
        ]
        narrow = ir.VectorType.get([width], element)
        rows = []
        for at in indices:
            row = vector.transfer_read(narrow, self.source, at, last, splat(0, element), [True])
            if width < lanes:
                row = vector.insert_strided_slice(row, splat(0, vector_type), [0], [1])
            rows.append(row)
        rows += [splat(0, vector_type)] * (lanes - self.height)
        results = []
        for values in _transposed(rows)[:width]:
            total, result = _step(self.combine, total, values)
            results.append(result)
        results += [splat(0, vector_type)] * (lanes - width)
        for at, row in zip(indices, _transposed(results), strict=False):
            if width < lanes:
                row = vector.extract_strided_slice(narrow, row, [0], [width], [1])
            output = vector.transfer_write(output.type, row, output, at, last, [True])
        return output, total


def _transposed(rows: list[ir.Value]) -> list[ir.Value]:
    """The transpose of a square of vectors (a power of two of them), by log2 rounds of
    interleaving row i with row i + n/2: shuffles of two vectors, which LLVM selects the
    host's permutes for."""
    n = len(rows)
    low = [j // 2 + (n if j % 2 else 0) for j in range(n)]
    high = [n // 2 + index for index in low]
    for _ in range(n.bit_length() - 1):
        pairs = [(rows[i], rows[i + n // 2]) for i in range(n // 2)]
        rows = [vector.shuffle(a, b, mask) for a, b in pairs for mask in (low, high)]
    return rows


def _lanes(element: ir.Type) -> int:
    """Values of `element` in one VECTOR_BITS vector."""
    return max(1, VECTOR_BITS // element.width)


def _loops(
    bounds: list[tuple[int, int, int]],
    carried: ir.Value,
    body: Callable[[list[ir.Value], ir.Value], ir.Value],
) -> ir.Value:
    """Nested `scf.for` loops over `bounds` (start, stop, step), outermost first, carrying
    one tensor; `body` takes the induction variables and the carried tensor."""
    if not bounds:
        return body([], carried)
    start, stop, step = (index_constant(v) for v in bounds[0])
    loop = _marked(scf.ForOp(start, stop, step, [carried]))
    with ir.InsertionPoint(loop.body):
        inner = _loops(
            bounds[1:],
            loop.inner_iter_args[0],
            lambda ivs, value: body([loop.induction_variable, *ivs], value),
        )
        scf.YieldOp([inner])
    return loop.results[0]


def _scan_column_chunk(
    source: ir.Value,
    output: ir.Value,
    dim: int,
    at: dict[int, ir.Value],
    column: ir.Value,
    width: int,
    combiner: str,
) -> ir.Value:
    """The scan's own loop for one chunk of `width` values of the last dim from `column`,
    at the other dims' indices `at`: read a vector, combine it into the running one, write
    that."""
    shape = ir.RankedTensorType(source.type).shape
    element = _element(source)
    combine, identity = COMBINERS[combiner]
    running = ir.VectorType.get([width], _accumulator(element))
    stored = ir.VectorType.get([width], element)
    last = ir.AffineMap.get_minor_identity(len(shape), 1)
    steps = (index_constant(0), index_constant(shape[dim]), index_constant(1))
    loop = _marked(scf.ForOp(*steps, [output, splat(identity, running)]))
    with ir.InsertionPoint(loop.body):
        written, total = loop.inner_iter_args
        at = {**at, dim: loop.induction_variable}
        indices = [at.get(d, column) for d in range(len(shape))]
        values = vector.transfer_read(stored, source, indices, last, splat(0, element), [True])
        total, result = _step(combine, total, values)
        written = vector.transfer_write(output.type, result, written, indices, last, [True])
        scf.YieldOp([written, total])
    return loop.results[0]  # the tensor first: a dispatch's output is its last op's first


def _step(
    combine: Callable[[ir.Value, ir.Value], ir.Value], total: ir.Value, values: ir.Value
) -> tuple[ir.Value, ir.Value]:
    """The running vector `total` with `values` combined into it (widened to its type),
    and that as `values`' type, to be stored."""
    widened = total.type != values.type
    total = combine(total, arith.extf(total.type, values) if widened else values)
    return total, arith.truncf(values.type, total) if widened else total


def _accumulator(element: ir.Type) -> ir.Type:
    """The type a scan of `element` values runs in: f64 for f32 and f32 for 16-bit floats,
    as torch's CPU kernels accumulate (a sum of 1024 values in f32 strayed from eager's by
    70 times the tolerance); integers and f64 as they are."""
    if isinstance(element, ir.F32Type):
        return ir.F64Type.get()
    if isinstance(element, ir.FloatType) and element.width < 32:
        return ir.F32Type.get()
    return element


def _marked(loop: scf.ForOp) -> scf.ForOp:
    """`loop`, marked as a scan's: every loop of the nest is, since canonicalization folds
    the loops of one step away, and a dispatch is formed from those left outermost."""
    loop.operation.attributes[SCAN_ATTRIBUTE] = ir.UnitAttr.get()
    return loop


def _reshaped(value: ir.Value, shape: list[int]) -> ir.Value:
    """`value` in another static shape of as many elements, through its 1-D view."""
    element = _element(value)
    rank = len(ir.RankedTensorType(value.type).shape)
    flat = ir.RankedTensorType.get([math.prod(shape)], element)
    if rank > 1:
        value = tensor.collapse_shape(flat, value, [list(range(rank))])
    if len(shape) == 1:
        return value
    result = ir.RankedTensorType.get(shape, element)
    return tensor.expand_shape(result, value, [list(range(len(shape)))], [], shape)
