"""Narrow matmul operands (bf16, f16, int8) widened once, before the nest.

A bf16 operand read by the f32 FMA micro-kernel is converted where it is read: every K step
shifts B's row and each of A's broadcasts into f32 lanes, beside the FMAs and on the same
ports (512^3 on an Intel Xeon: 63 GFLOP/s, against 165 for f32; 1024^3 on an AVX2 AMD
Zen 3: 13.7 GFLOP/s, against 63-71 for f32). Where the FMA path takes the matmul (UNIT = 0;
see `widened_type`), the descriptor step `widen-narrow-operands` rewrites it first: each
bf16 operand is copied, converted, into an f32 buffer of its own, and the matmul reads
those, so the nest is the f32 one and its kernel FMAs only (the Zen 3's 1024^3: 59-63
GFLOP/s). The copies read 2 and write 4 bytes per element, once per call: a few percent
of a compute-bound matmul. f16 operands are widened the same way, by analogy (read
unwidened, every K step would convert them beside the FMAs: F16C's vcvtph2ps on x86; not
measured on its own). Where only the packed nest's packing copies read a widened operand,
the step `widen-in-packs` (widen_in_packs.py) drops its copy after the schedule: the
packing copies convert it instead. int8 operands are widened the same way: to int32 for the FMA
path's int32 multiply-adds (the Zen 3's 512^3: 29 -> 34 GOP/s), to int16 for the dot
path's vpmaddwd (dot.py). Every descriptor that schedules matmuls runs the step before
the schedule, which pads the widened operands with zeros of the wide type.

They are copies between buffers (`linalg.copy` on memrefs, viewed as tensors with
`bufferization.to_tensor restrict`), so that the schedule's tile-and-fuse steps, which
pull tensor producers into their tiles, leave them whole: fused, A's copy would run once
per register tile. The schedules tile and vectorize them (`vectorize_widening`).
"""

from __future__ import annotations

from dataclasses import replace

from mlir import ir
from mlir.dialects import bufferization, linalg, memref, transform
from mlir.dialects.transform import structured
from mlir.dialects.transform import vector as tvector

from mlirtune.interfaces.dtype import dtype_named
from mlirtune.interfaces.op import OpInfo
from mlirtune.ir.roots import ROOT_ATTRIBUTE, element_types, loop_sizes
from mlirtune.schedules.builder import ScheduleBuilder
from mlirtune.schedules.contraction.knob_values import PACK_NONE, UNIT_DOT, UNIT_FMA
from mlirtune.schedules.contraction.root import recognise_contraction
from mlirtune.schedules.cpu_model import SKINNY_ROWS

# Marks the copies that widen the operands. They are vectorized a row of WIDENING_ROW
# columns at a time: 512 B of f32, in registers from load to store. (Blocks of 8 such rows
# were loaded whole before their first store: 64 vector registers' worth, spilled, and a
# block of 900 instructions that LLVM's schedulers took half a second to order.)
WIDENED_ATTRIBUTE = "mlirtune.widened"
WIDENING_ROW = 128
# Where the unpacked path widens: operands whose rows come in whole groups of
# WIDENING_GROUP and whose columns in whole rows (see `widened_type`).
WIDENING_GROUP = 8
# The operand types widened, and the accumulator type they are widened to.
WIDENED_TYPES = {("bf16", "bf16"): "f32", ("f16", "f16"): "f32", ("i8", "i8"): "i32"}


def widened_type(op: OpInfo, pack: int, unit: int) -> str | None:
    """The element type the knobs PACK = `pack` and UNIT = `unit` take `op`'s operands widened
    to before the nest, or None. On the FMA path (UNIT = 0), a bf16, f16 or i8 matmul (operands
    stored transposed or not) is widened to its result's type: on the packed path always, on the
    unpacked one where the widening copies tile into whole blocks (on an AVX2 AMD Zen 3, bf16
    256^3 32 -> 63 GFLOP/s and 64^3 30 -> 51, but 100x99x101, whose partial blocks take masked
    copies, 29 -> 12-16). On the pair path (UNIT_DOT), an i8 matmul is widened to i16, the
    operands of vpmaddwd, whatever its shape. On the FMA path, skinny products (M <=
    SKINNY_ROWS) are memory-bound and read each operand value about once: they convert where
    they read (AVX2 Zen 3, 8x4096x4096: bf16 22.3 ms widened, 15.5 not; int8 34.9 and 12.5)."""
    if op.kind != "matmul" or op.op_name != "linalg.matmul":
        return None
    if unit == UNIT_DOT and op.dtypes == ("i8", "i8", "i32"):
        return "i16"
    if op.dims["M"] <= SKINNY_ROWS:
        return None
    wide = WIDENED_TYPES.get(op.dtypes[:2])
    if unit != UNIT_FMA or wide != op.dtypes[-1]:
        return None
    packed = pack != PACK_NONE
    return wide if packed or all(map(_whole_widening_tiles, _operand_shapes(op))) else None


def widened_view(op: OpInfo, pack: int, unit: int) -> OpInfo:
    """`op` as the nest of PACK = `pack` and UNIT = `unit` reads it: where its operands are
    widened before the nest (`widened_type`), in the wide type, whose bytes size the nest's
    blocks and whose lanes its register tile; else `op` itself. Blocks sized for bf16 bytes
    held twice their bytes of f32 (2048^3 bf16 on an Intel Xeon restricted to AVX2: KC=2048
    NC=256 56 GFLOP/s, f32's KC=512 NC=512 72)."""
    wide = widened_type(op, pack, unit)
    return op if wide is None else replace(op, dtypes=(wide, wide, op.dtypes[-1]))


def _operand_shapes(op: OpInfo) -> list[tuple[int, int]]:
    """A's and B's shapes as stored: [M, K] or [K, M], [K, N] or [N, K]."""
    m, n, k = op.dims["M"], op.dims["N"], op.dims["K"]
    a = (k, m) if op.attributes.get("transpose_a") else (m, k)
    b = (n, k) if op.attributes.get("transpose_b") else (k, n)
    return [a, b]


def _whole_widening_tiles(shape: tuple[int, int]) -> bool:
    """Whether a copy of `shape` has whole WIDENING_GROUP-row groups and WIDENING_ROW-column
    rows (a row shorter than WIDENING_ROW is one whole row): the shapes measured faster
    widened, when the copies were vectorized in blocks of that many rows."""
    return shape[0] % WIDENING_GROUP == 0 and (
        shape[1] % WIDENING_ROW == 0 or shape[1] < WIDENING_ROW
    )


def vectorize_widening(s: ScheduleBuilder) -> None:
    """The schedules' part: tile the widening copies into rows of WIDENING_ROW columns and
    vectorize them, masked where a row is partial (the masks folded into the transfers
    of their own loops only: over the function, those patterns and canonicalization turned
    the packing copies back into slice copies, which bufferize into a scalar memref.copy)."""
    copies = s.match(s.root, ["linalg.copy"], "match_widening", attributes=[WIDENED_ATTRIBUTE])
    with s.at("vectorize_widening"):
        each = transform.ForeachOp([], [copies])
        with ir.InsertionPoint(each.body):
            row = [1, WIDENING_ROW]
            tiled = structured.TileUsingForOp(each.bodyTargets[0], sizes=row)
            structured.VectorizeOp(tiled.tiled_linalg_op, vector_sizes=row)
            patterns = transform.ApplyPatternsOp(tiled.loops[0])
            with ir.InsertionPoint(patterns.patterns):
                tvector.apply_patterns_vector_lower_masked_transfers()
            transform.YieldOp([])


def widen_narrow_operands(module: ir.Module, pack: int = PACK_NONE, unit: int = UNIT_FMA) -> None:
    """The descriptor step: rewrite every root matmul of `module` whose operands the
    contraction family's knobs `pack` and `unit` take widened (`widened_type`)."""
    roots: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if ROOT_ATTRIBUTE in op.attributes:
            loops = loop_sizes(op)
            info = recognise_contraction(op, loops, element_types(op)) if loops else None
            wide = None if info is None else widened_type(info, pack, unit)
            if wide is not None:
                roots.append((op, wide))
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    for op, wide in roots:
        with op.context:
            _widen(op, dtype_named(wide).mlir())


def _widen(op: ir.Operation, wide: ir.Type) -> None:
    """Rebuild the matmul `op` on copies of its inputs in the element type `wide`."""
    *inputs, init = op.operands
    with ir.InsertionPoint(op), op.location:
        widened = [_widened(value, wide) for value in inputs]
        # Operands stored transposed keep their layout: the op's indexing maps say it.
        maps = op.attributes.get("indexing_maps")
        layout = [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(maps)] if maps else None
        product = linalg.matmul(*widened, outs=[init], indexing_maps=layout)
    for name in [name for name in op.attributes if name.startswith("mlirtune.")]:
        product.owner.attributes[name] = op.attributes[name]
    op.results[0].replace_all_uses_with(product)
    op.erase()


def _widened(value: ir.Value, element: ir.Type) -> ir.Value:
    """`value` (a bf16, f16 or i8 tensor) copied into a new buffer of `element` (linalg.copy
    extends each value), viewed as a tensor."""
    narrow = ir.RankedTensorType(value.type)
    shape = narrow.shape
    # Read-only: otherwise bufferization copies `value` into a buffer of its own first.
    source_type = ir.MemRefType.get(shape, narrow.element_type)
    source = bufferization.to_buffer(source_type, value, read_only=True)
    buffer = memref.alloc(ir.MemRefType.get(shape, element), [], [])
    copy = linalg.copy(source, outs=[buffer])  # on buffers: an empty result list
    copy.owner.attributes[WIDENED_ATTRIBUTE] = ir.UnitAttr.get()
    tensor_type = ir.RankedTensorType.get(shape, element)
    view = bufferization.to_tensor(tensor_type, buffer, restrict=True)
    view.owner.attributes[WIDENED_ATTRIBUTE] = ir.UnitAttr.get()  # for widen_in_packs.py
    return view
