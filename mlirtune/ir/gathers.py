"""Gathers: linalg bodies that read a tensor at computed indices (`tensor.extract`), as an
embedding, `index_select` or `gather` imports.

torch-mlir hands the indices in as an input of the op, so each lane of a vector tile holds
an index of its own as far as the vectorizer can tell: a table row read 64 elements at a time
became a 64-lane gather. Read in the body instead, at the loop indices the input's map names,
an index is one scalar per row tile, and a row of the table one contiguous vector load.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import linalg, tensor

from mlirtune.ir.inspect import linalg_index_loop, ops_named
from mlirtune.ir.maps import map_loops
from mlirtune.ir.roots import indexing_maps, loop_sizes


def read_indices_in_bodies(function: ir.Operation) -> int:
    """In each linalg.generic of `function` that gathers, read every input used only as a
    gather's indices through `tensor.extract` in the body (its operand is left unused, for
    canonicalization to drop); returns how many inputs moved."""
    moved = 0
    for op in ops_named(function, "linalg.generic"):
        if not gathers_in(op):
            continue
        block = op.regions[0].blocks[0]
        inputs = len(op.operands) - len(op.results)
        maps = indexing_maps(op)
        for position in range(inputs):
            argument = block.arguments[position]
            dims = map_loops(maps[position])
            if dims is None or not _only_indexes(argument) or not list(argument.uses):
                continue
            with ir.InsertionPoint.at_block_begin(block), op.location:
                indices = [linalg.IndexOp(d).result for d in dims]
                value = tensor.extract(op.operands[position], indices)
            argument.replace_all_uses_with(value)
            moved += 1
    return moved


def reads_rows(function: ir.Operation) -> bool:
    """Whether `function` gathers rows: each gather reads a run of its table's last dim along
    the innermost loop at indices that loop leaves alone (in a tile one row deep, a
    contiguous vector load: the vectorizer's own test), or reads one such index. Other
    gathers may vectorize wrong (a transposed convolution's phase interleave did)."""
    extracts = [op for op in ops_named(function, "tensor.extract") if _in_generic(op)]
    rows = [op for op in extracts if _reads_a_row(op)]
    indices = [op for op in extracts if op not in rows and _reads_an_index(op)]
    return bool(rows) and len(rows) + len(indices) == len(extracts)


def gathers_in(op: ir.Operation) -> bool:
    """Whether the body of the linalg op `op` reads a tensor at computed indices."""
    return any(_in_generic(e) for e in ops_named(op, "tensor.extract"))


def _in_generic(op: ir.Operation) -> bool:
    return op.parent is not None and op.parent.name == "linalg.generic"


def _only_indexes(value: ir.Value) -> bool:
    """Whether every use of `value` is an index cast feeding only gathers' indices."""
    for use in value.uses:
        cast = use.owner
        if cast.name != "arith.index_cast":
            return False
        for index_use in cast.results[0].uses:
            gather = index_use.owner
            if gather.name != "tensor.extract" or index_use.operand_number == 0:
                return False
    return True


def _reads_a_row(extract: ir.Operation) -> bool:
    *leading, last = list(extract.operands)[1:]
    innermost = _innermost(extract.parent)
    return _invariant_indices(extract, leading) and linalg_index_loop(last) == innermost


def _reads_an_index(extract: ir.Operation) -> bool:
    """One element, the same along the innermost loop, used only as a gather's index."""
    indices = list(extract.operands)[1:]
    return _only_indexes(extract.results[0]) and _invariant_indices(extract, indices)


def _innermost(generic: ir.Operation) -> int:
    return len(loop_sizes(generic) or [0]) - 1


def _invariant_indices(extract: ir.Operation, indices: list[ir.Value]) -> bool:
    generic = extract.parent
    return all(_invariant(v, generic, _innermost(generic)) for v in indices)


def _invariant(value: ir.Value, generic: ir.Operation, innermost: int) -> bool:
    """Whether `value` is the same at every step of `generic`'s innermost loop: built from
    values defined outside it, constants and the other loops' indices (no block argument)."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return owner != generic.regions[0].blocks[0]
    loop = linalg_index_loop(value)
    if loop is not None:
        return loop != innermost
    op = owner.operation
    if op.parent != generic:
        return True
    return all(_invariant(v, generic, innermost) for v in op.operands)
