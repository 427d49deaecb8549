"""Finding a payload's root ops: every static linalg op is offered to the families that own
root kinds (registry.ROOT_OWNERS), in order, and the first that recognises it describes it;
a payload of element-wise ops alone has its last op as the root of the chain."""

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
        chain: list[ir.Operation] = []
        for function in functions:
            function.operation.walk(
                lambda op: (
                    chain.append(op) or ir.WalkResult.ADVANCE
                    if op.name == "linalg.generic" and is_static(op)
                    else ir.WalkResult.ADVANCE
                )
            )
        if chain:
            roots.append((chain[-1], chain_root(chain[-1])))
    return roots


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
