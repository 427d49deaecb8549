"""Build a spec entry's matcher and action as transform named sequences, through the bindings.

A matcher recognises one root op structurally with upstream match ops: its op name, its
loop sizes, the element bit width of every operand, the multiply-add body of contractions
and convolutions (float or integer), which loops are M/N/K, and a convolution's strides and
dilations. The action annotates the matched op with the entry's config (`mlirtune.config`,
a dictionary of integers) for the pipeline's parameterised schedules to read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import linalg, transform

from mlirtune.ir.roots import loop_sizes

CONFIG_ATTRIBUTE = "mlirtune.config"
SOURCE_ATTRIBUTE = "mlirtune.spec"  # "<library>:<entry>", set by a merged library's actions


@dataclass(frozen=True)
class OpSignature:
    """What an entry's matcher checks about its root op."""

    op_name: str
    loops: tuple[int, ...]
    input_bits: tuple[int, ...]
    init_bits: tuple[int, ...]
    is_float: bool
    contraction: tuple[int, int, int] | None = None  # loop positions of M, N, K
    strides: tuple[int, ...] = ()
    dilations: tuple[int, ...] = ()


def signature_of(op: ir.Operation) -> OpSignature:
    """The signature of a static linalg root op (see `mlirtune.ir.roots`)."""
    view = op.opview
    inputs, inits = list(view.inputs), list(view.outputs)
    element = ir.ShapedType((inputs or inits)[0].type).element_type  # an iota has no inputs
    contraction, strides, dilations = None, (), ()
    conv = linalg.infer_convolution_dimensions(op)
    if conv is not None:
        strides, dilations = tuple(conv.strides), tuple(conv.dilations)
    else:
        dims = linalg.infer_contraction_dimensions(op)
        if dims is not None and len(dims.m) == len(dims.n) == len(dims.k) == 1:
            contraction = (dims.m[0], dims.n[0], dims.k[0])
    return OpSignature(
        op_name=op.name,
        loops=tuple(loop_sizes(op) or ()),
        input_bits=tuple(_bit_width(v) for v in inputs),
        init_bits=tuple(_bit_width(v) for v in inits),
        is_float=isinstance(element, ir.FloatType),
        contraction=contraction,
        strides=strides,
        dilations=dilations,
    )


def _bit_width(value: ir.Value) -> int:
    return ir.ShapedType(value.type).element_type.width


# --- building ----------------------------------------------------------------------------

_ANY_OP = "!transform.any_op"
_PARAM = "!transform.param<i64>"


def build_matcher(name: str, signature: OpSignature) -> transform.NamedSequenceOp:
    """`@name(%op) -> %op`, succeeding only on ops with `signature` (at the insertion point)."""
    any_op = transform.AnyOpType.get()
    sequence = transform.NamedSequenceOp(
        name, [any_op], [any_op], arg_attrs=[{"transform.readonly": ir.UnitAttr.get()}]
    )
    with ir.InsertionPoint(sequence.body):
        target = sequence.bodyTarget
        transform.MatchOperationNameOp(target, [signature.op_name])
        # The operand counts first: a later check of input 0 on an op that has none (an
        # iota, say) is an assertion in MLIR, not a failed match.
        for measure in (_operand_counts, _structured_checks):
            for found, expected in measure(target, signature):
                transform.MatchParamCmpIOp(
                    found, _constants(expected), transform.MatchCmpIPredicate.eq
                )
        transform.YieldOp([target])
    return sequence


def _operand_counts(
    target: ir.Value, signature: OpSignature
) -> list[tuple[ir.Value, Sequence[int]]]:
    """The op's numbers of inputs and inits, measured in a region of their own, paired with
    the signature's."""
    counts = ("num_inputs", len(signature.input_bits)), ("num_inits", len(signature.init_bits))
    param = ir.Type.parse(_PARAM)
    found = _structured_region(
        target,
        len(counts),
        lambda op: [
            _create(f"transform.match.structured.{name}", [op], [param]) for name, _ in counts
        ],
    )
    return [(value, [count]) for value, (_, count) in zip(found, counts, strict=True)]


def _structured_region(
    target: ir.Value, count: int, measure: Callable[[ir.Value], list[ir.Value]]
) -> list[ir.Value]:
    """A `transform.match.structured` region on `target` that yields the `count` params
    `measure` builds from its block's op handle; those params, as the region's results."""
    param = ir.Type.parse(_PARAM)
    region_op = ir.Operation.create(
        "transform.match.structured", results=[param] * count, operands=[target], regions=1
    )
    block = region_op.regions[0].blocks.append(ir.Type.parse(_ANY_OP))
    with ir.InsertionPoint(block):
        measured = measure(block.arguments[0])
        ir.Operation.create("transform.match.structured.yield", operands=measured)
    return list(region_op.results)


def _structured_checks(
    target: ir.Value, signature: OpSignature
) -> list[tuple[ir.Value, Sequence[int]]]:
    """A `transform.match.structured` region that yields each measured property; returns
    (measured param, expected values) pairs for the comparisons after it."""
    expected: list[Sequence[int]] = [signature.loops]
    n_inputs = len(signature.input_bits)
    expected += [[bits] for bits in signature.input_bits + signature.init_bits]
    if signature.contraction:
        expected += [[position] for position in signature.contraction]
    if signature.strides:
        expected += [signature.strides, signature.dilations]
    param = ir.Type.parse(_PARAM)

    def measure(op: ir.Value) -> list[ir.Value]:
        all_dims = {"is_all": ir.UnitAttr.get(), "raw_dim_list": ir.DenseI64ArrayAttr.get([])}
        measured = [_create("transform.match.structured.dim", [op], [param], all_dims)]
        for index in range(len(signature.input_bits) + len(signature.init_bits)):
            kind = "input" if index < n_inputs else "init"
            position = index if index < n_inputs else index - n_inputs
            value = _create(
                f"transform.match.structured.{kind}",
                [op],
                [transform.AnyValueType.get()],
                {"raw_position_list": ir.DenseI64ArrayAttr.get([position])},
            )
            measured.append(
                _create("transform.match.structured.elemental_bitwidth", [value], [param])
            )
        if signature.contraction or signature.strides:
            kind = "f" if signature.is_float else "i"
            body = [ir.StringAttr.get(f"arith.{op_name}{kind}") for op_name in ("mul", "add")]
            _create(
                "transform.match.structured.body", [op], [], {"contraction": ir.ArrayAttr.get(body)}
            )
        if signature.contraction:
            _, m, n, k = _create_many(
                "transform.match.structured.classify_contraction_dims", [op], [param] * 4
            )
            measured += [m, n, k]
        if signature.strides:
            conv = _create_many(
                "transform.match.structured.classify_convolution_dims", [op], [param] * 8
            )
            measured += [conv[6], conv[7]]
        return measured

    return list(zip(_structured_region(target, len(expected), measure), expected, strict=True))


def _create(name: str, operands, results, attributes=None) -> ir.Value | None:
    """Create a match op that has no Python builder; its first result, if any."""
    values = _create_many(name, operands, results, attributes)
    return values[0] if values else None


def _create_many(name: str, operands, results, attributes=None) -> list[ir.Value]:
    op = ir.Operation.create(name, results=results, operands=operands, attributes=attributes)
    return list(op.results)


def _constants(values: Sequence[int]) -> ir.Value:
    """A param holding `values` in order (one constant, or merged constants)."""
    param = ir.Type.parse(_PARAM)
    i64 = ir.IntegerType.get_signless(64)
    handles = [transform.ParamConstantOp(param, ir.IntegerAttr.get(i64, v)).result for v in values]
    if len(handles) == 1:
        return handles[0]
    return transform.MergeHandlesOp(handles).result


def build_action(name: str, config: dict[str, int]) -> transform.NamedSequenceOp:
    """`@name(%op)` annotating `%op` with `mlirtune.config = {config}`."""
    return _annotating_sequence(name, CONFIG_ATTRIBUTE, _config_attribute(config))


def build_tagged_action(name: str, action: str, label: str) -> transform.NamedSequenceOp:
    """`@name(%op)`: run `@action` on `%op`, then annotate it with `mlirtune.spec = label`
    (a merged library wraps each entry's action so the op says which entry configured it)."""
    sequence = _annotating_sequence(name, SOURCE_ATTRIBUTE, ir.StringAttr.get(label))
    with ir.InsertionPoint.at_block_begin(sequence.body):
        transform.IncludeOp(
            [],
            ir.FlatSymbolRefAttr.get(action),
            transform.FailurePropagationMode.Propagate,
            [sequence.bodyTarget],
        )
    return sequence


def _annotating_sequence(name: str, attribute: str, value: ir.Attribute):
    any_op = transform.AnyOpType.get()
    sequence = transform.NamedSequenceOp(
        name, [any_op], [], arg_attrs=[{"transform.readonly": ir.UnitAttr.get()}]
    )
    with ir.InsertionPoint(sequence.body):
        constant = transform.ParamConstantOp(transform.AnyParamType.get(), value).result
        transform.AnnotateOp(sequence.bodyTarget, attribute, param=constant)
        transform.YieldOp([])
    return sequence


def _config_attribute(config: dict[str, int]) -> ir.DictAttr:
    i64 = ir.IntegerType.get_signless(64)
    return ir.DictAttr.get({k: ir.IntegerAttr.get(i64, int(v)) for k, v in config.items()})


def read_config(attribute: ir.Attribute) -> dict[str, int]:
    """The config dictionary an action annotated an op with; ValueError if it is not one."""
    if not isinstance(attribute, ir.DictAttr):
        raise ValueError(f"expected a dictionary of integers, got {attribute}")
    config = {}
    for named in attribute:
        if not isinstance(named.attr, ir.IntegerAttr):
            raise ValueError(f"{named.name} = {named.attr} is not an integer")
        config[named.name] = named.attr.value
    return config
