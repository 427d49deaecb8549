"""Grouping a payload's ops into dispatches and outlining each into a function.

Ops are taken in program order. A contraction or convolution opens a dispatch; a matmul's
(and a generic root's) also takes the element-wise ops that consume its result alone
(bias, activation, residual add), and a convolution's the zero padding it reads. A row
reduction opens one that takes the reductions and element-wise ops that follow it on its
values (a softmax, a layer norm). A scan's loops make one of their own. Other ops gather
in element-wise dispatches. An op only joins the dispatch opened last, so dispatches stay
in program order, and one whose values are read outside it at more than one point is
split, so each has one output.

Constants, empty tensors, fills of them, reshapes of inputs and convolutions' bias
broadcasts are not dispatched: each dispatch that reads one gets its own copy (free.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mlir import ir
from mlir.dialects import bufferization, func, memref
from mlir.passmanager import PassManager

from mlirtune.dispatch.collapse import store_through_views
from mlirtune.dispatch.free import SOURCE, is_free
from mlirtune.dispatch.prepare import collapse_after_fusion, prepare_for_dispatch
from mlirtune.dispatch.rows import is_elementwise, leaves_the_rows, regroups_rows
from mlirtune.ir.context import run_passes
from mlirtune.ir.inspect import defining_op, find_function
from mlirtune.ir.roots import SCAN_ATTRIBUTE, reads_aligned
from mlirtune.schedules.convolution.epilogue import takes_epilogue
from mlirtune.schedules.roots import describe

# Root kinds whose schedules fuse element-wise consumers into their output tiles (so do
# NCHW and depthwise convolutions', `_tiles_epilogue`).
TAKES_CONSUMERS = ("matmul", "batch_matmul", "generic")
# Root kinds whose schedules materialise the padding they read, once.
TAKES_PADDING = ("conv2d", "depthwise", "pooling", "generic")
# Rewrites a kind's schedule needs: reductions without their kept unit dims (a softmax's
# [rows, 1] maxima), element-wise runs with transposes as generics.
PER_KIND_PASSES = {
    "reduction": "func.func(linalg-fold-unit-extent-dims, canonicalize, cse)",
    "elementwise": "func.func(linalg-generalize-named-ops)",
}
# Ops a reduction or element-wise dispatch does not take: its schedule cannot fuse its
# producers through them into the root's tiles (a ViT's class token concatenated to the
# patches), nor tile them as its last op (a class token's row sliced from a layer norm).
OPENS_A_DISPATCH = {
    "elementwise": ("tensor.concat",),
    "reduction": ("tensor.concat", "tensor.extract_slice"),
}
SINK = "bufferization.materialize_in_destination"


@dataclass
class Group:
    """Ops of one dispatch in program order; `kind` names the pipeline that schedules it:
    a root kind, "reduction" or "elementwise"."""

    kind: str
    ops: list[ir.Operation] = field(default_factory=list)

    @property
    def tail(self) -> ir.Value:
        return self.ops[-1].results[0]


@dataclass(frozen=True)
class Dispatch:
    """An outlined dispatch: its function's name and the kind that picks its pipeline."""

    function: str
    kind: str


def group_ops(function: ir.Operation) -> list[Group] | None:
    """The function's compute ops grouped into dispatches; None when it cannot be split
    (an op whose results are read outside its dispatch more than once)."""
    groups: list[Group] = []
    group_of: dict[ir.Operation, Group] = {}
    for op in _earliest_first(function):
        info = describe(op)
        kind = info.kind if info is not None else None
        if SCAN_ATTRIBUTE in op.attributes:
            kind = "scan"
        open_group = groups[-1] if groups else None
        reads_open = open_group is not None and any(
            group_of.get(defining_op(v)) is open_group for v in op.operands
        )
        if reads_open and _takes_padding(open_group, op, kind):
            open_group.ops.append(op)  # the convolution's schedule tiles its padding too
            open_group.kind = kind
        elif reads_open and _accepts(open_group, op, kind):
            open_group.ops.append(op)
            if open_group.kind == "elementwise" and kind == "reduction":
                open_group.kind = "reduction"
        else:
            groups.append(Group(kind or "elementwise", [op]))
        group_of[op] = groups[-1]
    return _one_output_each(groups)


def _earliest_first(function: ir.Operation) -> list[ir.Operation]:
    """The function's compute ops, each moved up to just after the last op it reads (so
    ops on inputs alone, such as a batchnorm's per-channel factors, do not come between a
    contraction and the epilogue that reads both)."""
    order: list[ir.Operation] = []
    for op in function.regions[0].blocks[0].operations:
        op = op.operation
        if is_free(op) or op.name in (SOURCE, SINK, "func.return"):
            continue
        producers = {p for v in _operands_within(op) for p in _computing(v)}
        last = max((i for i, earlier in enumerate(order) if earlier in producers), default=-1)
        order.insert(last + 1, op)
    return order


def _computing(value: ir.Value) -> list[ir.Operation]:
    """The op that computes `value`, or where a free op does, the ops computing its
    operands (a convolution's input read through views of another dispatch's result)."""
    producer = defining_op(value)
    if producer is None or not is_free(producer):
        return [producer] if producer is not None else []
    return [p for operand in producer.operands for p in _computing(operand)]


def _takes_padding(group: Group, op: ir.Operation, kind: str | None) -> bool:
    """Whether convolution `op` reads the zero padding that `group` holds alone."""
    (pad,) = group.ops if len(group.ops) == 1 else (None,)
    return (
        kind in TAKES_PADDING
        and pad is not None
        and pad.name == "tensor.pad"
        and len(list(pad.results[0].uses)) == 1
    )


def _accepts(group: Group, op: ir.Operation, kind: str | None) -> bool:
    """Whether `op` (of root kind `kind`, or None) may join the open `group`."""
    if group.kind in TAKES_CONSUMERS or _tiles_epilogue(group):
        # Element-wise, on the root's result alone, with nobody else reading it.
        return (
            is_elementwise(op)
            and all(v == group.tail for v in op.operands if defining_op(v) in group.ops)
            and len(list(group.tail.uses)) == 1
            and ir.ShapedType(op.results[0].type).shape == ir.ShapedType(group.tail.type).shape
            and (group.kind in TAKES_CONSUMERS or reads_aligned(op, group.tail))
        )
    if group.kind == "scan":  # the loops of one scan: its full chunks, then its tail
        return kind == "scan"
    if group.kind in ("reduction", "elementwise"):
        # A zero padding stays apart: the convolution that reads it takes it. So does a
        # reshape of rows that regroups real dims (a group norm's [N, G, C/G*H*W] rows
        # back to [N, C, H, W]): the ops after it cannot be tiled by those rows.
        return (
            (kind is None or kind == "reduction")
            and op.name != "tensor.pad"
            and op.name not in OPENS_A_DISPATCH[group.kind]
            and not (group.kind == "reduction" and regroups_rows(op))
            and not leaves_the_rows(group.ops, op, kind)
        )
    return False


def _tiles_epilogue(group: Group) -> bool:
    """Whether `group` is a convolution alone (its padding aside) whose schedule tiles an
    element-wise epilogue with its output (mlirtune.schedules.convolution.epilogue)."""
    if group.kind not in ("conv2d", "depthwise"):
        return False
    convs = [info for info in map(describe, group.ops) if info and info.kind == group.kind]
    return len(convs) == 1 and takes_epilogue(convs[0])


def _one_output_each(groups: list[Group]) -> list[Group] | None:
    """Split every group after each op (but its last) whose result is read outside it,
    until none is: a split can leave a value read by a later piece of its own group (an
    arange that three views read, two of them in later pieces)."""
    while True:
        split = _split_after_escaping_values(groups)
        if split is None or len(split) == len(groups):
            return split
        groups = split


def _split_after_escaping_values(groups: list[Group]) -> list[Group] | None:
    split: list[Group] = []
    for group in groups:
        members = set(group.ops)
        current = Group(group.kind)
        for op in group.ops:
            current.ops.append(op)
            escaping = [r for r in op.results if _read_outside(r, members)]
            if len(escaping) > 1 or (escaping and escaping[0] != op.results[0]):
                return None  # a dispatch has one output, its tail's first result
            if escaping and op is not group.ops[-1]:
                split.append(current)
                current = Group(group.kind)
        split.append(current)
    return split


def _read_outside(value: ir.Value, members: set[ir.Operation]) -> bool:
    return any(_enclosing(use.owner.operation, members) not in members for use in value.uses)


def _enclosing(op: ir.Operation, members: set[ir.Operation]) -> ir.Operation:
    """`op`, or the member op whose region holds it (a use inside a linalg body)."""
    while op not in members and op.parent is not None and op.parent.name != "func.func":
        op = op.parent
    return op


def outline(function: ir.Operation, groups: list[Group]) -> list[Dispatch]:
    """Move each group into a private function `dispatch_<i>_<kind>(inputs..., output)` on
    memrefs, and make `function` allocate the intermediate buffers and call them in turn."""
    body = function.regions[0].blocks[0]
    # Values the payload reads and writes as memrefs: its inputs, and the outputs a sink
    # writes (a group whose tail is an output writes that argument directly).
    buffers: dict[ir.Value, ir.Value] = {}
    outputs: dict[ir.Value, ir.Value] = {}
    for op in body.operations:
        op = op.operation
        if op.name == SOURCE:
            buffers[op.results[0]] = op.operands[0]
        elif op.name == SINK:
            outputs[op.operands[0]] = op.operands[1]
    computed = {g.tail for g in groups}
    if any(value not in computed for value in outputs):
        raise ValueError("an output is not computed by any dispatch")
    inputs = [_inputs(group) for group in groups]
    available = set(buffers)
    for index, (group, reads) in enumerate(zip(groups, inputs, strict=True)):
        unknown = [v for v in reads if v not in available]
        if unknown:  # checked before anything is rewritten
            raise ValueError(f"dispatch {index} reads a tensor no dispatch computes")
        available.add(group.tail)
    dispatches = []
    *old, terminator = [op.operation for op in body.operations]
    for index, (group, reads) in enumerate(zip(groups, inputs, strict=True)):
        name = f"dispatch_{index}_{group.kind}"
        with ir.InsertionPoint(terminator), group.ops[0].location:
            output = outputs.get(group.tail)
            if output is None:
                # Freed after its last use by the lowering (buffer-deallocation-pipeline).
                output = memref.alloc(_memref_type(group.tail.type), [], [], alignment=64)
            callee = _build_function(function, name, group, reads)
            func.CallOp(callee, [buffers[v] for v in reads] + [output])
        buffers[group.tail] = output
        dispatches.append(Dispatch(name, group.kind))
    for op in reversed(old):
        op.erase()
    return dispatches


def _inputs(group: Group) -> list[ir.Value]:
    """Tensor values the group reads from outside: payload inputs (through free views)
    and other groups' results, in first-use order."""
    members = set(group.ops)
    found: list[ir.Value] = []

    def visit(value: ir.Value) -> None:
        producer = defining_op(value)
        if producer is not None and producer in members:
            return
        if _defined_inside(value, members):  # a loop's own values (a scan's)
            return
        if producer is not None and is_free(producer):
            for operand in producer.operands:
                visit(operand)
            return
        if isinstance(value.type, ir.ShapedType) and value not in found:
            found.append(value)

    for op in group.ops:
        for value in _operands_within(op):
            visit(value)
    return found


def _operands_within(op: ir.Operation) -> list[ir.Value]:
    """Operands of `op` and of the ops nested in its regions."""
    values: list[ir.Value] = []

    def visit(nested: ir.Operation) -> ir.WalkResult:
        values.extend(nested.operands)
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    return values


def _memref_type(tensor: ir.Type) -> ir.MemRefType:
    shaped = ir.ShapedType(tensor)
    return ir.MemRefType.get(shaped.shape, shaped.element_type)


def _build_function(
    payload: ir.Operation,
    name: str,
    group: Group,
    inputs: list[ir.Value],
) -> func.FuncOp:
    """The dispatch function, inserted before the payload: every input viewed as a tensor,
    the free ops it reads and the group's ops copied in, its tail written to the output."""
    types = [_memref_type(v.type) for v in inputs] + [_memref_type(group.tail.type)]
    with ir.InsertionPoint(payload):
        function = func.FuncOp(name, (types, []), visibility="private")
    block = function.add_entry_block()
    mapping: dict[ir.Value, ir.Value] = {}
    with ir.InsertionPoint(block):
        for value, argument in zip(inputs, list(block.arguments)[:-1], strict=True):
            mapping[value] = bufferization.to_tensor(value.type, argument, restrict=True)
        for op in group.ops:
            _copy(op, mapping)
        bufferization.materialize_in_destination(
            None, mapping[group.tail], block.arguments[-1], restrict=True, writable=True
        )
        func.ReturnOp([])
    return function


def _copy(op: ir.Operation, mapping: dict[ir.Value, ir.Value]) -> None:
    """Clone `op` at the insertion point, its operands (nested ones too) remapped; free
    producers not yet copied are copied first."""
    for value in _operands_within(op):
        producer = defining_op(value)
        copied = value in mapping or producer is None or _inside(producer, op)
        if not copied and is_free(producer):
            _copy(producer, mapping)
    clone = op.clone()
    for original, copied in zip(_nested(op), _nested(clone), strict=True):
        for index, operand in enumerate(original.operands):
            if operand in mapping:
                copied.operands[index] = mapping[operand]
    for original, copied in zip(op.results, clone.results, strict=True):
        mapping[original] = copied


def _defined_inside(value: ir.Value, members: set[ir.Operation]) -> bool:
    """Whether `value` is defined in the regions of one of `members`: a block argument of
    one of their blocks, or the result of an op nested in them."""
    owner = value.owner
    op = owner.owner if isinstance(owner, ir.Block) else owner.operation.parent
    return op is not None and _enclosing(op.operation, members) in members


def _inside(op: ir.Operation, container: ir.Operation) -> bool:
    parent = op.parent
    while parent is not None:
        if parent == container:
            return True
        parent = parent.parent
    return False


def _nested(op: ir.Operation) -> list[ir.Operation]:
    ops: list[ir.Operation] = []
    op.walk(lambda nested: ops.append(nested) or ir.WalkResult.ADVANCE)
    return ops


def split_into_dispatches(module: ir.Module, entry: str) -> tuple[list[Dispatch], list[str]]:
    """Split `entry` of `module` into dispatch functions in place, with element-wise ops
    fused inside each; ([], notes) when the payload cannot be split (it is then left
    whole, with the clean-ups of mlirtune.dispatch.prepare applied)."""
    function = find_function(module, entry).operation
    notes = prepare_for_dispatch(function)
    groups = group_ops(function)
    if not groups:
        return [], notes
    try:
        dispatches = outline(function, groups)
    except ValueError as reason:
        return [], [*notes, f"not split into dispatches: {reason}"]
    run_passes(
        module,
        "builtin.module(func.func(linalg-fuse-elementwise-ops), canonicalize, cse)",
        stage="dispatch",
    )
    for dispatch in dispatches:
        function = find_function(module, dispatch.function).operation
        collapsed = collapse_after_fusion(function)
        if dispatch.kind in PER_KIND_PASSES:
            PassManager.parse(PER_KIND_PASSES[dispatch.kind]).run(function)
        # After the kind's passes, which may reshape the stored result (unit dims folded).
        if store_through_views(function) or collapsed:
            PassManager.parse("func.func(canonicalize, cse)").run(function)
    return dispatches, notes
