"""Channel norms written through a channels-last transpose, computed without it.

timm's and torchvision's LayerNorm2d permute an NCHW tensor to NHWC, normalise each pixel's
channels as rows, and permute back. Rows of C (40 in ConvNeXt's first stage) read across a
transpose failed to vectorize in the row family's tiles, and the norm ran as scalar loops.
The same statistics are reductions over the middle axis of the untransposed [N, C, S] view
(S the spatial dims merged), which the axis-reduction family steps through in contiguous
rows. So the element-wise ops and reductions between the transpose and its inverse are
rebuilt on that view, and both transposes go: each value of the chain that holds channels
and pixels is [N, C, S]; the others (a pixel's statistics, [N, H, W, 1]) keep their order
with the spatial dims merged and the unit dims dropped ([N, S]).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mlir import ir
from mlir.dialects import linalg, tensor

from mlirtune.ir.inspect import ops_named
from mlirtune.ir.pointwise import collapsed
from mlirtune.ir.roots import indexing_maps, loop_sizes, product

# Logical dims: the batch, the channels, a spatial dim (SPATIAL + i for the i-th), a kept
# unit dim.
BATCH, CHANNELS, UNIT, SPATIAL = "n", "c", "1", "s"
NEW_ORDER = (BATCH, CHANNELS, SPATIAL)  # the loops of a rebuilt generic, those it has


@dataclass
class Chain:
    """The generics after a channels-last transpose up to its inverses, in program order;
    the logical dims each of their values holds, in its order."""

    rank: int
    generics: list[ir.Operation] = field(default_factory=list)
    exits: list[ir.Operation] = field(default_factory=list)
    layouts: dict[ir.Value, list[str]] = field(default_factory=dict)
    loops: dict[ir.Operation, list[str]] = field(default_factory=dict)


def compute_channels_first(function: ir.Operation) -> int:
    """Rebuild each chain that follows a channels-last transpose; returns how many."""
    rebuilt = 0
    transposes = ops_named(function, "linalg.transpose")  # picked before any is erased
    for transpose in [t for t in transposes if _permutation(t) == _channels_last(_rank(t))]:
        chain = _chain(transpose)
        if chain is not None:
            _rebuild(transpose, chain)
            rebuilt += 1
    return rebuilt


def _permutation(op: ir.Operation) -> list[int]:
    return list(ir.DenseI64ArrayAttr(op.attributes["permutation"]))


def _rank(op: ir.Operation) -> int:
    return ir.ShapedType(op.results[0].type).rank


def _channels_last(rank: int) -> list[int]:
    return [0, *range(2, rank), 1]


def _channels_first(rank: int) -> list[int]:
    return [0, rank - 1, *range(1, rank - 1)]


def _spatial(rank: int) -> list[str]:
    return [f"{SPATIAL}{i}" for i in range(rank - 2)]


def _is_spatial(dim: str) -> bool:
    return dim.startswith(SPATIAL)


def _chain(transpose: ir.Operation) -> Chain | None:
    """The chain after `transpose` (N C spatial... -> N spatial... C), or None where a value
    of it is read by anything but its generics and the inverse transposes, or a generic's
    loops cannot be named."""
    rank = _rank(transpose)
    if rank < 3:
        return None
    chain = Chain(rank)
    chain.layouts[transpose.results[0]] = [BATCH, *_spatial(rank), CHANNELS]
    pending = [transpose.results[0]]
    while pending:
        value = pending.pop()
        for use in value.uses:
            owner = use.owner.operation
            if owner.name == "linalg.transpose" and _permutation(owner) == _channels_first(rank):
                if chain.layouts[value] != chain.layouts[transpose.results[0]]:
                    return None
                chain.exits.append(owner)
                continue
            if owner.name != "linalg.generic":
                return None
            if owner in chain.loops:
                continue
            loops = _name_loops(owner, chain)
            if loops is None:
                return None
            chain.loops[owner] = loops
            for result, output_map in zip(owner.results, _output_maps(owner), strict=True):
                chain.layouts[result] = _layout(output_map, loops)
                pending.append(result)
    block = transpose.parent.regions[0].blocks[0]
    chain.generics = [op.operation for op in block.operations if op.operation in chain.loops]
    return chain if _readable(chain) else None


def _name_loops(op: ir.Operation, chain: Chain) -> list[str] | None:
    """The logical dim of each of `op`'s loops, from the chain values it reads (which must
    agree); None where one is unnamed, named twice, or the spatial dims fall apart."""
    sizes = loop_sizes(op)
    if sizes is None or ops_named(op, "linalg.index"):
        return None
    names: list[str | None] = [None] * len(sizes)
    for operand, affine_map in zip(op.operands, indexing_maps(op), strict=True):
        layout = chain.layouts.get(operand)
        if layout is None:
            continue
        for expr, dim in zip(affine_map.results, layout, strict=True):
            if isinstance(expr, ir.AffineDimExpr):
                loop = ir.AffineDimExpr(expr).position
                if names[loop] not in (None, dim):
                    return None
                names[loop] = dim
    named = [
        UNIT if name is None and size == 1 else name
        for name, size in zip(names, sizes, strict=True)
    ]
    dims = [name for name in named if name != UNIT]
    if None in dims or len(set(dims)) != len(dims):
        return None
    return [name or UNIT for name in named]


def _layout(affine_map: ir.AffineMap, loops: list[str]) -> list[str]:
    return [
        loops[ir.AffineDimExpr(e).position] if isinstance(e, ir.AffineDimExpr) else UNIT
        for e in affine_map.results
    ]


def _output_maps(op: ir.Operation) -> list[ir.AffineMap]:
    return indexing_maps(op)[len(op.operands) - len(op.results) :]


def _readable(chain: Chain) -> bool:
    """Every value of the chain is read by its generics and exits alone, as its producer
    wrote it; every operand map is plain loops and zeros, its spatial dims whole and in
    order."""
    members = set(chain.generics) | set(chain.exits)
    for op in chain.generics:
        for result in op.results:
            if any(use.owner.operation not in members for use in result.uses):
                return False
        for affine_map in indexing_maps(op):
            for expr in affine_map.results:
                constant = isinstance(expr, ir.AffineConstantExpr)
                if not isinstance(expr, ir.AffineDimExpr) and not (
                    constant and ir.AffineConstantExpr(expr).value == 0
                ):
                    return False
        for operand, affine_map in zip(op.operands, indexing_maps(op), strict=True):
            layout = _layout(affine_map, chain.loops[op])
            known = chain.layouts.get(operand, layout)  # read as its producer wrote it
            if known != layout or not _mergeable(operand, layout, chain):
                return False
    return True


def _mergeable(value: ir.Value, layout: list[str], chain: Chain) -> bool:
    """Whether `value`, read with `layout`, has a new layout: its spatial dims whole, in
    order and together; channels and pixels together only in the chain's own values or a
    fresh output."""
    positions = [i for i, d in enumerate(layout) if _is_spatial(d)]
    if not positions:
        return True
    spatial = [layout[i] for i in positions]
    if spatial != _spatial(chain.rank) or positions != list(range(positions[0], positions[-1] + 1)):
        return False
    if CHANNELS not in layout:
        return True
    full = layout == [BATCH, *_spatial(chain.rank), CHANNELS]
    owner = value.owner
    fresh = isinstance(owner, ir.OpView) and owner.operation.name == "tensor.empty"
    return full and (value in chain.layouts or fresh)


def _new_layout(layout: list[str]) -> list[str]:
    """A value's logical dims after the rebuild: [n, c, s] where it holds channels and
    pixels, else its own order with the spatial dims merged and no unit dims."""
    if CHANNELS in layout and any(_is_spatial(d) for d in layout):
        return [d for d in NEW_ORDER if d == SPATIAL or d in layout]
    return [_group_dim([layout[i] for i in group]) for group in _merged_groups(layout)]


def _group_dim(dims: list[str]) -> str:
    """The dim a merged group stands for: the spatial one, else its one real dim."""
    if any(_is_spatial(d) for d in dims):
        return SPATIAL
    real = [d for d in dims if d != UNIT]
    return real[0] if real else UNIT


def _merged_groups(layout: list[str]) -> list[list[int]]:
    """The reassociation that merges a layout's spatial dims into one and its unit dims into
    a neighbour (a layout of unit dims alone stays one group)."""
    groups: list[list[int]] = []
    units: list[int] = []
    for i, dim in enumerate(layout):
        if dim == UNIT:
            (groups[-1] if groups else units).append(i)
        elif _is_spatial(dim) and groups and _is_spatial(layout[groups[-1][0]]):
            groups[-1].append(i)
        else:
            groups.append([*units, i])
            units = []
    return groups or [units]


def _rebuild(transpose: ir.Operation, chain: Chain) -> None:
    source = transpose.operands[0]
    replaced: dict[ir.Value, ir.Value] = {}
    with ir.InsertionPoint(transpose), transpose.location:
        replaced[transpose.results[0]] = _collapsed(source, [[0], [1], list(range(2, chain.rank))])
    for op in chain.generics:
        _rebuild_generic(op, chain, replaced)
    for exit_op in chain.exits:
        result_type = ir.RankedTensorType(exit_op.results[0].type)
        with ir.InsertionPoint(exit_op), exit_op.location:
            expanded = tensor.expand_shape(
                result_type,
                replaced[exit_op.operands[0]],
                [[0], [1], list(range(2, chain.rank))],
                [],
                result_type.shape,
            )
        exit_op.results[0].replace_all_uses_with(expanded)
        exit_op.erase()
    for op in reversed(chain.generics):
        op.erase()
    if not list(transpose.results[0].uses):
        transpose.erase()


def _collapsed(value: ir.Value, groups: list[list[int]]) -> ir.Value:
    """`value` collapsed by `groups`, or itself where no group merges dims."""
    return value if all(len(group) == 1 for group in groups) else collapsed(value, groups)


def _rebuild_generic(op: ir.Operation, chain: Chain, replaced: dict[ir.Value, ir.Value]) -> None:
    """`op` on the new loops (those of NEW_ORDER it has), reading and writing each value in
    its new layout; its body moves over whole."""
    loops = chain.loops[op]
    logical = [SPATIAL if _is_spatial(d) else d for d in loops]
    new_loops = [d for d in NEW_ORDER if d in logical]
    inputs = len(op.operands) - len(op.results)
    operands, maps = [], []
    with ir.InsertionPoint(op), op.location:
        for operand, affine_map in zip(op.operands, indexing_maps(op), strict=True):
            layout = _layout(affine_map, loops)
            new_layout = _new_layout(layout)
            exprs = [
                ir.AffineConstantExpr.get(0)
                if d == UNIT
                else ir.AffineDimExpr.get(new_loops.index(d))
                for d in new_layout
            ]
            maps.append(ir.AffineMap.get(len(new_loops), 0, exprs))
            operands.append(_operand(operand, layout, new_layout, replaced))
        iterators = ir.ArrayAttr(op.attributes["iterator_types"])
        new_iterators = [iterators[logical.index(d)] for d in new_loops]
        rebuilt = linalg.GenericOp_(
            operands[:inputs],
            operands[inputs:],
            ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
            ir.ArrayAttr.get(new_iterators),
        )
    old_block, new_block = op.regions[0].blocks[0], rebuilt.regions[0].blocks[0]
    for old_argument, new_argument in zip(old_block.arguments, new_block.arguments, strict=True):
        old_argument.replace_all_uses_with(new_argument)
    for nested in list(old_block.operations):
        new_block.append(nested)
    for old_result, new_result in zip(op.results, rebuilt.results, strict=True):
        replaced[old_result] = new_result


def _operand(
    value: ir.Value,
    layout: list[str],
    new_layout: list[str],
    replaced: dict[ir.Value, ir.Value],
) -> ir.Value:
    """`value` in its new layout: the chain's rebuilt value, a fresh empty tensor for an
    output of channels and pixels, or `value` with its spatial dims merged."""
    if value in replaced:
        return replaced[value]
    shaped = ir.ShapedType(value.type)
    if new_layout[:2] == [BATCH, CHANNELS] and layout != new_layout:  # a fresh output
        sizes = {d: s for d, s in zip(layout, shaped.shape, strict=True)}
        spatial = product(s for d, s in sizes.items() if _is_spatial(d))
        shape = [sizes[BATCH], sizes[CHANNELS], spatial]
        return tensor.empty(shape, shaped.element_type)
    return _collapsed(value, _merged_groups(layout))
