"""Finding a payload's root ops: every static linalg op is offered to the families that own
root kinds (registry.ROOT_OWNERS), in order, and the first that recognises it describes it;
a payload of element-wise ops alone has its last op as the root of the chain (and, where
fusing the chain into its tiles would recompute it many times over, each op read twice)."""

from __future__ import annotations

from mlir import ir

from mlirtune.interfaces.op import OpInfo
from mlirtune.ir.roots import ROOT_ATTRIBUTE, element_types, is_static, loop_sizes
from mlirtune.schedules.elementwise import chain_root
from mlirtune.schedules.registry import KIND_OWNER, ROOT_OWNERS

NOT_ROOTS = frozenset({"linalg.fill", "linalg.yield"})


def describe(op: ir.Operation) -> OpInfo | None:
    """The description of a root op, None for anything else (fills, copies, element-wise
    consumers)."""
    if not op.name.startswith("linalg.") or op.name in NOT_ROOTS or not is_static(op):
        return None
    loops = loop_sizes(op)
    if loops is None:
        return None
    dtypes = element_types(op)
    for family in ROOT_OWNERS:
        if family.claims and op.name.startswith(family.claims):
            return family.recognise(op, loops, dtypes)
    for family in ROOT_OWNERS:
        info = None if family.claims else family.recognise(op, loops, dtypes)
        if info is not None:
            return info
    return None


def find_roots(module: ir.Module) -> list[tuple[ir.Operation, OpInfo]]:
    """Every root op in the module with its description, in program order."""
    roots: list[tuple[ir.Operation, OpInfo]] = []
    functions = [op for op in module.body.operations if op.operation.name == "func.func"]

    def visit(op: ir.Operation) -> ir.WalkResult:
        info = describe(op)
        if info is not None:
            roots.append((op, info))
        return ir.WalkResult.ADVANCE

    for function in functions:
        function.operation.walk(visit)
    convs = [info for _, info in roots if info.kind == "conv2d"]
    if len(convs) > 1:  # e.g. a strided transposed conv's phases, scheduled as one
        for info in convs:
            info.attributes["convs"] = len(convs)
    if not roots:
        # Element-wise ops with loops (a scalar's, such as a logsumexp's last steps over a
        # whole-tensor result, has none to tile and is lowered as it is).
        chain: list[ir.Operation] = []
        for function in functions:
            function.operation.walk(
                lambda op: (
                    chain.append(op) or ir.WalkResult.ADVANCE
                    if op.name == "linalg.generic" and is_static(op) and loop_sizes(op)
                    else ir.WalkResult.ADVANCE
                )
            )
        if chain:
            roots += [(op, chain_root(op)) for op in chain_roots(chain)]
    return roots


# How many copies of its ops a chain's tile-and-fuse may make before the chain is split:
# the elementwise schedule fuses a producer once per path from it to the last op, so a
# value read both as it is and shifted (a slice padded back), step after step, is
# recomputed 2, 4, 8... times (a cumulative product by doubling compiled for minutes).
FUSED_COPIES_LIMIT = 4


def chain_roots(chain: list[ir.Operation]) -> list[ir.Operation]:
    """The roots of an element-wise chain: its last op, whose tiles the others are fused
    into; where that fusion would copy the chain's ops more than FUSED_COPIES_LIMIT times
    over, also every op read at more than one point, so the payload is split into
    dispatches (multi_root) and those values are stored once."""
    last = chain[-1]
    # Paths from each op of the function's body to `last`, users (later ops) first.
    paths: dict[ir.Operation, int] = {}
    for op in reversed(list(last.parent.regions[0].blocks[0].operations)):
        op = op.operation
        users = [_top_level(use.owner.operation) for r in op.results for use in r.uses]
        paths[op] = 1 if op == last else sum(paths.get(user, 0) for user in users)
    copies = sum(paths.get(op, 1) for op in chain)
    if copies <= FUSED_COPIES_LIMIT * len(chain):
        return [last]
    shared = [op for op in chain[:-1] if sum(len(list(r.uses)) for r in op.results) > 1]
    return [*shared, last]


def _top_level(op: ir.Operation) -> ir.Operation:
    """`op`, or the op of the function's body whose regions hold it."""
    while op.parent is not None and op.parent.name != "func.func":
        op = op.parent
    return op


def annotate_roots(module: ir.Module) -> list[OpInfo]:
    """Mark each root op with `mlirtune.root`; returns their descriptions."""
    infos = []
    for op, info in find_roots(module):
        op.attributes[ROOT_ATTRIBUTE] = ir.StringAttr.get(info.kind)
        infos.append(info)
    return infos


def root_flops(op: OpInfo) -> int:
    """A root op's FLOPs, as the family owning its kind counts them."""
    return KIND_OWNER[op.kind].root_flops(op)


def summed_terms(op: OpInfo) -> int:
    """Terms each output element of a root op sums (scales verification tolerances)."""
    return KIND_OWNER[op.kind].summed_terms(op)
