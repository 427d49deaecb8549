"""The child process that reads and writes IREE's IR, through IREE's own bindings.

    python spec_tool.py roots [--spec SPEC] CONFIG.mlir...
                                                  the root op of each dispatch, as JSON
    python spec_tool.py spec ENTRIES.json OUT.mlir [EARLIER.mlir]
                                                  a tuning spec for the entries (and
                                                  the other matchers of EARLIER)
    python spec_tool.py tuned-on SPEC.mlir        the CPU class and IREE SPEC was tuned
                                                  on, as JSON

`roots` reads the executable configurations `iree-compile` dumped with tuner attributes
(`--iree-codegen-add-tuner-attributes`): per dispatch, its root op, loop sizes, element types
and, for a contraction, which loops are batch, M, N and K.

`spec` writes a transform library IREE applies (`--iree-codegen-tuning-spec-path`): for
each entry, a matcher of its dispatch's root op (the op itself, cloned into a
`transform.iree.match.cast_compatible_dag_from_root` over values of its operand types) and
the `#iree_codegen.compilation_info` it annotates the op with; `@__kernel_config` runs them
all in one `transform.foreach_match`.

This file imports nothing of mlirtune: this project's MLIR bindings may not load beside
IREE's (see mlirtune/iree/__init__.py).
"""

from __future__ import annotations

import json
import sys

from iree.compiler import ir
from iree.compiler.dialects import iree_codegen, linalg, transform
from iree.compiler.dialects import preprocessing_transform as iree_transform

ENTRY_POINT = "__kernel_config"
APPLY = "apply_op_config"
MATCHER_PREFIX = "match_"  # and the dispatch's name: one matcher per dispatch
TUNED_ON = "mlirtune.tuned_on"  # the module's stamp: CPU class, CPU and IREE it was tuned on


def roots(paths: list[str], spec_path: str | None = None) -> list[dict]:
    """Per configuration file, its dispatch's root op (None where it has none); with the
    spec the configurations were compiled with, whether the root took a config of it."""
    found = []
    with ir.Context() as context:
        configs = _spec_configs(spec_path, context) if spec_path else []
        for path in paths:
            with open(path) as file:
                module = ir.Module.parse(file.read(), context)
            ops = iree_codegen.get_tuner_root_ops(module)
            if ops:
                found.append({**_describe(path, ops[0]), "matched": False})
                continue
            # IREE marks no root where a spec configured the dispatch: the op whose config
            # is one the spec sets is it.
            configured = _configured_by(module, configs)
            if configured is not None:
                found.append({**_describe(path, configured), "matched": True})
            else:
                found.append({"file": path, "root": None})
    return found


def _configured_by(module: ir.Module, configs: list[ir.Attribute]) -> ir.Operation | None:
    """The first op of `module` whose lowering_config is one of `configs`."""
    hits: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if "lowering_config" in op.attributes:
            config = op.attributes["lowering_config"]
            if any(config == c for c in configs):
                hits.append(op)
                return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return hits[0] if hits else None


def _spec_configs(path: str, context: ir.Context) -> list[ir.Attribute]:
    """The lowering configs a spec's matchers set (their compilation_info constants)."""
    with open(path) as file:
        module = ir.Module.parse(file.read(), context)
    configs = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "transform.param.constant":
            value = op.attributes["value"]
            if iree_codegen.CompilationInfoAttr.isinstance(value):
                configs.append(iree_codegen.CompilationInfoAttr(value).lowering_config)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return configs


def _describe(path: str, op: ir.Operation) -> dict:
    """Name, loops, element types and contraction roles of a root op."""
    maps = [ir.AffineMapAttr(m).value for m in linalg.get_indexing_maps(op)]
    operands = [v.type for v in op.operands if isinstance(v.type, ir.ShapedType)]
    loops = [0] * maps[0].n_dims
    for shaped, affine_map in zip(operands, maps, strict=False):
        for axis, expr in enumerate(affine_map.results):
            if isinstance(expr, ir.AffineDimExpr):
                loops[expr.position] = shaped.shape[axis]
    kind, roles = _roles(op)
    return {
        "file": path,
        "dispatch": _function_of(op).attributes["sym_name"].value,
        "root": op.name,
        "loops": loops,
        "dtypes": [str(shaped.element_type) for shaped in operands],
        "kind": kind,
        "roles": roles,
    }


def _roles(op: ir.Operation) -> tuple[str | None, dict[str, list[int]] | None]:
    """The op's kind and its loops by the role the knobs give them: m and n (parallel,
    the innermost of each tiled), k (reduction, the innermost stepped by vectors), batch
    (parallel, tiles of one). A convolution's output pixels are m, its output channels n,
    its filter window and input channels k (the channels innermost)."""
    if linalg.isa_contraction_op(op):
        dims = linalg.infer_contraction_dimensions(op)
        return "contraction", {
            "batch": list(dims.batch),
            "m": list(dims.m),
            "n": list(dims.n),
            "k": list(dims.k),
        }
    if linalg.isa_convolution_op(op):
        dims = linalg.infer_convolution_dimensions(op)
        return "convolution", {
            "batch": list(dims.batch) + list(dims.depth),
            "m": list(dims.output_image),
            "n": list(dims.output_channel),
            "k": list(dims.filter_loop) + list(dims.input_channel),
        }
    return None, None


def _function_of(op: ir.Operation) -> ir.Operation:
    parent = op.parent
    while parent.name != "func.func":
        parent = parent.parent
    return parent


def spec(
    entries: list[dict], output: str, merged: str | None = None, tuned_on: dict | None = None
) -> None:
    """Write the tuning spec of `entries` ({"file", "lowering_config", "translation_info"},
    the file one `roots` read) to `output`, verified, stamped with `tuned_on` (the CPU
    class and IREE it was tuned on, strings). With `merged` (an earlier spec of this tool,
    tuned on the same class), its matchers are kept, except those of the dispatches
    `entries` set again."""
    tuned_on = tuned_on or {}
    with ir.Context() as context, ir.Location.unknown():
        module = ir.Module.create()
        module.operation.attributes["transform.with_named_sequence"] = ir.UnitAttr.get()
        module.operation.attributes[TUNED_ON] = ir.DictAttr.get(
            {key: ir.StringAttr.get(value) for key, value in tuned_on.items()}
        )
        any_op, any_param = transform.AnyOpType.get(), transform.AnyParamType.get()
        with ir.InsertionPoint(module.body):
            _apply_sequence(any_op, any_param)
            matchers = [_matcher(entry, context, any_op, any_param) for entry in entries]
            if merged:
                matchers += _kept_matchers(merged, context, set(matchers), tuned_on)
            # foreach_match consumes the payload's handle; without matchers it is only read
            effect = "transform.consumed" if matchers else "transform.readonly"
            entry_point = transform.NamedSequenceOp(
                ENTRY_POINT, [any_op], [any_op], arg_attrs=[{effect: ir.UnitAttr.get()}]
            )
            entry_point.operation.attributes["iree_codegen.tuning_spec_entrypoint"] = (
                ir.UnitAttr.get()
            )
            with ir.InsertionPoint(entry_point.body):
                updated = entry_point.bodyTarget  # no matchers: a spec that changes nothing
                if matchers:
                    updated = transform.ForeachMatchOp(
                        any_op,
                        [],
                        entry_point.bodyTarget,
                        [],
                        matchers,
                        [APPLY] * len(matchers),
                    ).updated
                transform.YieldOp([updated])
        module.operation.verify()
        with open(output, "w") as file:
            file.write(str(module))


def _tuned_on(module: ir.Module) -> dict[str, str]:
    """The `tuned_on` stamp of a spec ({} where it has none)."""
    if TUNED_ON not in module.operation.attributes:
        return {}
    stamp = ir.DictAttr(module.operation.attributes[TUNED_ON])
    return {stamp[i].name: ir.StringAttr(stamp[i].attr).value for i in range(len(stamp))}


def _kept_matchers(
    path: str, context: ir.Context, replaced: set[str], tuned_on: dict[str, str]
) -> list[str]:
    """Clone the matchers of the spec at `path` not named in `replaced` to the insertion
    point; their names. A spec stamped with another CPU class than `tuned_on`'s is refused."""
    with open(path) as file:
        earlier = ir.Module.parse(file.read(), context)
    names = [
        ir.StringAttr(op.attributes["sym_name"]).value
        for op in earlier.body.operations
        if "iree_codegen.tuning_spec_entrypoint" in op.attributes
    ]
    if names != [ENTRY_POINT]:  # refused, not overwritten: it may be another library
        raise SystemExit(f"error: {path} is no IREE tuning spec written by mlirtune")
    earlier_class = _tuned_on(earlier).get("class")
    if earlier_class and earlier_class != tuned_on.get("class"):
        raise SystemExit(
            f"error: {path} was tuned on CPU class {earlier_class}, this host is "
            f"{tuned_on.get('class')}: write this host's spec to another file"
        )
    kept = []
    for op in earlier.body.operations:
        name = ir.StringAttr(op.attributes["sym_name"]).value if "sym_name" in op.attributes else ""
        if name.startswith(MATCHER_PREFIX) and name not in replaced:
            op.clone()
            kept.append(name)
    return kept


def _apply_sequence(any_op: ir.Type, any_param: ir.Type) -> None:
    """@apply_op_config(op, info): annotate the matched op with its compilation_info."""
    readonly = {"transform.readonly": ir.UnitAttr.get()}
    apply = transform.NamedSequenceOp(
        APPLY, [any_op, any_param], [], arg_attrs=[readonly, readonly]
    )
    with ir.InsertionPoint(apply.body):
        op, info = apply.bodyTarget, apply.bodyExtraArgs[0]
        transform.AnnotateOp(op, "compilation_info", param=info)
        transform.YieldOp([])


def _matcher(entry: dict, context: ir.Context, any_op: ir.Type, any_param: ir.Type) -> str:
    """A matcher of the entry's root op yielding (op, its compilation_info); its name."""
    with open(entry["file"]) as file:
        source = ir.Module.parse(file.read(), context)
    root = iree_codegen.get_tuner_root_ops(source)[0]
    name = MATCHER_PREFIX + _function_of(root).attributes["sym_name"].value
    matcher = transform.NamedSequenceOp(
        name,
        [any_op],
        [any_op, any_param],
        arg_attrs=[{"transform.readonly": ir.UnitAttr.get()}],
    )
    with ir.InsertionPoint(matcher.body):
        value = transform.AnyValueType.get()
        match = iree_transform.MatchCastCompatibleDagFromRootOp(value, value, matcher.bodyTarget)
        operand_types = [v.type for v in root.operands]
        block = match.region.blocks.append(*operand_types)
        with ir.InsertionPoint(block):
            copy = root.clone()
            for position, argument in enumerate(block.arguments):
                copy.operands[position] = argument
            for attribute in ("lowering_config", "root_op"):
                if attribute in copy.attributes:
                    del copy.attributes[attribute]
            transform.YieldOp([])  # the region's implicit terminator
        info = iree_codegen.CompilationInfoAttr.get(
            ir.Attribute.parse(entry["lowering_config"]),
            ir.Attribute.parse(entry["translation_info"]),
        )
        constant = transform.ParamConstantOp(any_param, info)
        transform.YieldOp([matcher.bodyTarget, constant.param])
    return name


def main(arguments: list[str]) -> int:
    if arguments[:2] == ["roots", "--spec"] and len(arguments) > 2:
        json.dump(roots(arguments[3:], arguments[2]), sys.stdout)
        return 0
    if arguments[:1] == ["roots"]:
        json.dump(roots(arguments[1:]), sys.stdout)
        return 0
    if arguments[:1] == ["spec"] and len(arguments) in (3, 4):
        with open(arguments[1]) as file:
            listed = json.load(file)
        merged = arguments[3] if len(arguments) == 4 else None
        spec(listed["entries"], arguments[2], merged, listed["tuned_on"])
        return 0
    if arguments[:1] == ["tuned-on"] and len(arguments) == 2:
        with ir.Context() as context, open(arguments[1]) as file:
            json.dump(_tuned_on(ir.Module.parse(file.read(), context)), sys.stdout)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
