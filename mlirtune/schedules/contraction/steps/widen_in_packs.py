"""Narrow operands converted by the packing copies that read them, not widened first.

The descriptor step `widen-narrow-operands` (widen.py) copies each bf16 (int8) operand of
a matmul the FMA path takes into an f32 (int32) buffer before the nest. Where the packed
nest (packed.py) then packs that operand, the copy is a pass of its own that the packing
reads again: a bf16 B of 2048 x 2048 is read as 8 MiB, written as 16 MiB into a buffer
the call allocates (and faults in), then read as 16 MiB by the packing copies.

This step, run after the schedule, has those copies read the narrow operand and convert
each vector as they load it, into the same f32 panels, so the micro-kernel is unchanged.
It rewrites a widened operand only where every read of its widened buffer is a copy: a
`vector.transfer_read` whose vector is only stored (`vector.transfer_write`), or moved
(transposed, for B stored [N, K]) and stored. An operand the micro-kernel reads in place (A,
broadcast from its rows) keeps its widened copy: converted there, each K step's
conversions shared the FMAs' ports (widen.py). The widening nest and its buffer are then
erased. A widening nest of another shape than `vectorize_widening` makes (a row of
converted vectors per iteration) is left alone.

Registered as the descriptor step `widen-in-packs` (mlirtune.pipeline.steps).
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir

from mlirtune.ir.constants import splat
from mlirtune.ir.inspect import defining_op, op_attributes, ops_named
from mlirtune.schedules.contraction.steps.widen import WIDENED_ATTRIBUTE

# What a copy read's vector may go through before it is stored: the moves of B's squares,
# transposed (lowered to shuffles by the schedule). At most MOVES_SEEN of them are followed:
# one read of B's 16 x 16 squares on AVX-512 (a 96-deep K block) reaches 8,944 ops, and a
# limit of 4,096 left B stored [N, K] widened by a pass of its own on AVX-512 hosts.
MOVES = {
    "vector.extract",
    "vector.insert",
    "vector.shuffle",
    "vector.transpose",
    "vector.shape_cast",
    "vector.to_elements",
    "vector.from_elements",
}
MOVES_SEEN = 1 << 16
# AVX2's 8 x 8 transpose is lowered with these instructions as inline assembly.
MOVING_INSTRUCTIONS = {"vblendps", "vshufps", "vunpcklps", "vunpckhps", "vperm2f128"}


@dataclass(frozen=True)
class _Widening:
    """One widened operand: its narrow buffer, the op that converts its elements, and
    the ops of the widening pass (the buffer's allocation and the loops that fill it)."""

    narrow: ir.Value
    convert: str  # arith.extf, arith.extsi
    nest: list[ir.Operation]


def widen_in_packs(module: ir.Module) -> None:
    """Rewrite, in place, every widened operand of `module` that only packing copies read."""
    for view in ops_named(module.operation, "bufferization.to_tensor"):
        if WIDENED_ATTRIBUTE not in view.attributes:
            continue
        reads = [use.owner for use in view.results[0].uses]
        widening = _widening(view.operands[0])
        if widening is None or not reads or not all(map(_is_copy_read, reads)):
            continue
        for read in reads:
            _read_narrow(read, widening)
        view.erase()
        for op in widening.nest:
            op.erase()


def _is_copy_read(op: ir.Operation) -> bool:
    """Whether `op` is a transfer_read whose vector is only moved (rearranged, as B's
    transposed squares are) and stored: no arithmetic reads it."""
    if op.name != "vector.transfer_read":
        return False
    pending, seen = [op.results[0]], 0
    while pending:
        users = [use.owner for use in pending.pop().uses]
        if not users or seen > MOVES_SEEN:
            return False
        for user in users:
            seen += 1
            if user.name in MOVES or _is_moving_assembly(user):
                pending += list(user.results)
            elif user.name != "vector.transfer_write":
                return False
    return True


def _is_moving_assembly(op: ir.Operation) -> bool:
    """Whether `op` is inline assembly of one of MOVING_INSTRUCTIONS."""
    if op.name != "llvm.inline_asm":
        return False
    mnemonic, *_ = ir.StringAttr(op.attributes["asm_string"]).value.split()
    return mnemonic in MOVING_INSTRUCTIONS


def _widening(buffer: ir.Value) -> _Widening | None:
    """The widening pass that fills `buffer`, where it is `vectorize_widening`'s: loops
    whose every store into the buffer (or a subview of it) is a converted load of one
    narrow buffer of the same shape."""
    alloc = defining_op(buffer)
    if alloc is None or alloc.name != "memref.alloc":
        return None
    narrow, convert = None, None
    nest: list[ir.Operation] = []
    for user in _users_through_subviews(buffer):
        if user.name == "bufferization.to_tensor":
            continue
        if user.name != "vector.transfer_write":
            return None
        converted = defining_op(user.operands[0])
        loaded = None if converted is None else defining_op(converted.operands[0])
        if loaded is None or loaded.name != "vector.transfer_read":
            return None
        source = _base(loaded.operands[0])
        if narrow is not None and (source != narrow or converted.name != convert):
            return None
        narrow, convert = source, converted.name
        outermost = _ancestor_beside(user, alloc)
        if outermost is None:
            return None
        if outermost not in nest:
            nest.append(outermost)
    if narrow is None or ir.MemRefType(narrow.type).shape != ir.MemRefType(buffer.type).shape:
        return None
    return _Widening(narrow, convert, [*nest, alloc])


def _users_through_subviews(buffer: ir.Value) -> list[ir.Operation]:
    """The ops that use `buffer`, or a subview of it (the subviews not included)."""
    users: list[ir.Operation] = []
    for use in buffer.uses:
        op = use.owner
        users += _users_through_subviews(op.results[0]) if op.name == "memref.subview" else [op]
    return users


def _base(view: ir.Value) -> ir.Value:
    """The buffer `view` is a subview (of a subview ...) of, or `view` itself."""
    op = defining_op(view)
    while op is not None and op.name == "memref.subview":
        view = op.operands[0]
        op = defining_op(view)
    return view


def _ancestor_beside(op: ir.Operation, anchor: ir.Operation) -> ir.Operation | None:
    """The ancestor of `op` (or `op`) that `anchor`'s parent holds, or None."""
    scope = anchor.parent.operation
    while op.parent is not None and op.parent.operation != scope:
        op = op.parent.operation
    return op if op.parent is not None else None


def _read_narrow(read: ir.Operation, widening: _Widening) -> None:
    """Replace the copy read `read` of the widened buffer by the same read of the narrow
    buffer (its padding the narrow zero), converted."""
    wide = ir.VectorType(read.results[0].type)
    narrow_element = ir.MemRefType(widening.narrow.type).element_type
    with read.location, ir.InsertionPoint(read):
        padding = splat(0, narrow_element)
        operands = [widening.narrow, *read.operands[1:]]
        operands[_padding_index(read)] = padding
        narrow_read = ir.Operation.create(
            "vector.transfer_read",
            results=[ir.VectorType.get(wide.shape, narrow_element)],
            operands=operands,
            attributes=op_attributes(read),
        )
        converted = ir.Operation.create(
            widening.convert, results=[wide], operands=[narrow_read.results[0]]
        )
    read.results[0].replace_all_uses_with(converted.results[0])
    read.erase()


def _padding_index(read: ir.Operation) -> int:
    """The operand index of a transfer_read's padding value: after the source and one
    index per dim of the source."""
    return 1 + ir.ShapedType(read.operands[0].type).rank
