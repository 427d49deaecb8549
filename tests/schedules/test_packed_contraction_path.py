"""The contraction family's packed path (PACK=1/2): a Goto/BLIS nest whose B (and A) panels
are packed once per cache block, and its limits."""

from __future__ import annotations

import resource
import subprocess
import sys
from collections.abc import Callable

import pytest
from mlir import ir

from mlirtune.api import engine_for
from mlirtune.engine import MlirJitEngine
from mlirtune.interfaces.errors import MlirtuneError
from mlirtune.interfaces.op import OpInfo
from mlirtune.schedules.contraction.knob_values import UNIT_FMA
from mlirtune.schedules.contraction.packed_host import prefetch_level
from mlirtune.schedules.contraction.steps.widen_in_packs import widen_in_packs
from mlirtune.targets.host_cpu import HostCPU, detect_features
from mlirtune.workloads import BatchMatmul, Matmul, Mlp

pytestmark = pytest.mark.jit

# The FMA path (UNIT=0) on every host: bf16 matmuls would take dot products or AMX tiles.
BLOCKS = {"MC": 32, "NC": 64, "KC": 32, "MR": 8, "NR": 32, "UNIT": UNIT_FMA}


@pytest.fixture(scope="module")
def engine() -> MlirJitEngine:
    return MlirJitEngine(use_specs=False)


def scheduled(
    engine: MlirJitEngine, workload, parameters, pick: Callable, then: Callable | None = None
) -> list:
    """`pick(op)` for every op of the payload after its schedule (and after the step
    `then`, applied to a copy), in walk order, where it is not None (taken during the walk:
    the ops change in the later stages)."""
    picked: list = []

    def collect(op: ir.Operation) -> ir.WalkResult:
        value = pick(op)
        if value is not None:
            picked.append(value)
        return ir.WalkResult.ADVANCE

    def observe(stage: str, module: ir.Module) -> None:
        if stage.startswith("schedule"):
            if then is not None:
                module = ir.Module.parse(str(module))
                then(module)
            module.operation.walk(collect)

    engine.lower_payload(workload, parameters, observer=observe)
    return picked


def packing_buffers(engine: MlirJitEngine, workload, parameters) -> list[list[int]]:
    """Shapes of the tensors the schedule creates: the packed panel buffers."""

    def empty(op: ir.Operation) -> list[int] | None:
        if op.name != "tensor.empty":
            return None
        return list(ir.RankedTensorType(op.results[0].type).shape)

    return scheduled(engine, workload, parameters, empty)


@pytest.mark.parametrize("pack", [1, 2])
@pytest.mark.parametrize(
    "workload",
    [
        Matmul(M=64, N=128, K=96),
        Matmul(M=64, N=128, K=96, dtype="f64"),
        Matmul(M=64, N=128, K=96, dtype="bf16"),
        Mlp(M=64, N=128, K=64),  # bias and ReLU after the packed nest
        Matmul(M=32, N=64, K=32),  # one block in every loop: nothing left to hoist
        Matmul(M=96, N=32, K=32),  # NC == NR: B has no panels to pack, A still does
    ],
    ids=["f32", "f64", "bf16", "mlp", "one-block", "one-panel"],
)
def test_packed_kernels_verify(engine, workload, pack):
    parameters = {**BLOCKS, "PACK": pack}
    if workload.options["N"] == 32:
        parameters["NC"] = 32
    if workload.options["dtype"] == "f64":
        parameters["NR"] = 16  # whole f64 vectors
    assert engine.execute(workload, parameters).verification.ok


@pytest.mark.parametrize("pack", [1, 2])
@pytest.mark.parametrize(
    "workload",
    [Matmul(M=48, N=128, K=96), Matmul(M=53, N=128, K=96), Mlp(M=48, N=128, K=64)],
    ids=["f32", "prime-m", "mlp"],
)
def test_six_row_register_tiles_verify(engine, workload, pack):
    # 6 x 64 (24 accumulators on AVX-512), in K blocks that read C back, with a 5-row tail
    # split off a prime M, and under an epilogue.
    parameters = {**BLOCKS, "MC": 24, "NC": 128, "MR": 6, "NR": 64, "PACK": pack}
    assert engine.execute(workload, parameters).verification.ok


# The 2-byte float operands the FMA path widens to f32.
HALF_PRECISION = ("bf16", "f16")


def widening_row_conversion(narrow: str) -> tuple[str, str]:
    """The types of one row's conversion in a widening copy of `narrow` operands."""
    return f"vector<1x128x{narrow}>", "vector<1x128xf32>"


@pytest.mark.parametrize("narrow", HALF_PRECISION)
@pytest.mark.parametrize(
    ("options", "pack", "widened"),
    [
        ({"M": 64, "N": 128, "K": 96}, 1, 1),  # A, read in place
        ({"M": 64, "N": 128, "K": 96}, 2, 0),
        # Partial panels, read through slices: widened before the nest.
        ({"M": 100, "N": 99, "K": 101}, 1, 2),
        ({"M": 64, "N": 128, "K": 96, "transpose": "b"}, 1, 1),  # a Linear's weight
        ({"M": 100, "N": 99, "K": 101, "transpose": "ab"}, 2, 2),
        ({"M": 64, "N": 128, "K": 96}, 0, 2),  # unpacked: whole widening tiles
    ],
    ids=["pack-b", "pack-ab", "odd", "b-n-by-k", "odd-transposed", "unpacked"],
)
def test_half_precision_operands_are_converted_once_before_the_micro_kernel(
    engine, options, pack, widened, narrow
):
    """Each bf16 (f16) operand is converted to f32 once: by the copies that pack it, where
    only they read it (widen_in_packs.py), else a vectorized row at a time before the nest
    (widen.py). The micro-kernel FMAs f32 and converts nothing."""
    workload = Matmul(**options, dtype=narrow)
    parameters = {**BLOCKS, "PACK": pack}
    row_conversion = widening_row_conversion(narrow)

    def conversion(op: ir.Operation) -> tuple[str, str] | None:
        if op.name != "arith.extf":
            return None
        return str(op.operands[0].type), str(op.results[0].type)

    conversions = scheduled(engine, workload, parameters, conversion, then=widen_in_packs)
    rows = [c for c in conversions if c == row_conversion]
    assert len(rows) == widened
    # The packing copies' conversions, where an operand is not widened first.
    packed = [c for c in conversions if c != row_conversion]
    assert bool(packed) == (widened < 2)
    assert scheduled(engine, workload, parameters, conversion) == [row_conversion] * 2

    def fma_type(op: ir.Operation) -> str | None:
        return str(op.results[0].type.element_type) if op.name == "vector.fma" else None

    fma_types = scheduled(engine, workload, parameters, fma_type)
    assert fma_types and set(fma_types) == {"f32"}
    result = engine.execute(workload, parameters)
    assert result.verification.ok, result.verification.summary()


@pytest.mark.parametrize("narrow", HALF_PRECISION)
def test_unpacked_operands_with_partial_widening_tiles_are_converted_as_they_are_loaded(
    engine, narrow
):
    """100 rows are no whole 8-row widening tiles: masked copies cost more than converting
    in the micro-kernel, so nothing is widened and the kernel converts its loads."""
    workload = Matmul(M=100, N=99, K=101, dtype=narrow)
    parameters = {**BLOCKS, "PACK": 0}
    widened = scheduled(engine, workload, parameters, lambda op: op.name == "linalg.copy" or None)
    conversions = scheduled(
        engine, workload, parameters, lambda op: op.name == "arith.extf" or None
    )
    assert widened == [] and conversions
    assert engine.execute(workload, parameters).verification.ok


def bias_addends(engine: MlirJitEngine, workload, parameters) -> list[list[str]]:
    """For each bias addition the schedule leaves (the micro-kernel's are FMAs), the ops
    that define its operands."""

    def addends(op: ir.Operation) -> list[str] | None:
        if op.name != "arith.addf":
            return None
        return sorted(operand.owner.name for operand in op.operands)

    return scheduled(engine, workload, parameters, addends)


@pytest.mark.parametrize("threads", [1, 2])
def test_an_epilogue_on_one_k_block_takes_the_accumulators_in_registers(threads):
    """K in one block (K == KC): the bias is added to the K loop's accumulators, and C is
    stored once. In three K blocks, the epilogue reads C back after the last one."""
    engine = engine_for(HostCPU(threads=threads), use_specs=False)
    parameters = {**BLOCKS, "PACK": 1}
    one_block, three_blocks = Mlp(M=64, N=128, K=32), Mlp(M=64, N=128, K=96)
    in_registers = bias_addends(engine, one_block, parameters)
    read_back = bias_addends(engine, three_blocks, parameters)
    assert in_registers and all("scf.for" in owners for owners in in_registers)
    assert read_back and all("scf.for" not in owners for owners in read_back)
    for workload in (one_block, three_blocks):
        assert engine.execute(workload, parameters).verification.ok


def test_b_panels_are_packed_per_block_and_a_panels_with_pack_2(engine):
    workload = Matmul(M=64, N=128, K=96)
    # B: [NC/NR, KC, NR] once per KC x NC block; A: one [MR, KC] micro-panel per row of
    # register tiles. Each buffer twice: one nest for the first K block, one for the later
    # ones.
    b_panels, a_panel = [2, 32, 32], [8, 32]
    for pack, expected in ((0, []), (1, [b_panels] * 2), (2, [b_panels, a_panel] * 2)):
        buffers = packing_buffers(engine, workload, {**BLOCKS, "PACK": pack})
        assert [b for b in buffers if b in (b_panels, a_panel)] == expected


def slice_copy(op: ir.Operation) -> str | None:
    """The op, where it inserts an extract_slice's result as it is: a copy left unvectorized."""
    source = op.operands[0].owner if op.name == "tensor.insert_slice" else None
    return op.name if getattr(source, "name", None) == "tensor.extract_slice" else None


@pytest.mark.parametrize(
    "workload",
    [Matmul(M=64, N=45, K=53), Matmul(M=64, N=45, K=53, transpose="b")],
    ids=["matmul", "transposed-b"],
)
def test_remainders_leave_the_packed_nest_static(engine, workload):
    # The 13 columns past N's last 16-wide register tile get a nest of their own, and the
    # first K block takes K's remainder (53 = 5 + 3 x 16): B's panels are whole, and no
    # register tile is padded. (Under an epilogue, the columns stay padded: see
    # test_packed_remainders.py.)
    parameters = {"MC": 32, "NC": 32, "KC": 16, "MR": 8, "NR": 16, "PACK": 1}
    assert [b for b in packing_buffers(engine, workload, parameters) if len(b) == 3] == [
        [2, 5, 16],
        [2, 16, 16],
    ]
    pads = scheduled(engine, workload, parameters, lambda op: op.name == "tensor.pad" or None)
    assert pads == []
    # ...and every packing copy is vectorized: a copy left as a slice of a slice bufferizes
    # into a generic memref.copy, several times slower.
    assert scheduled(engine, workload, parameters, slice_copy) == []
    assert engine.execute(workload, parameters).verification.ok
    assert engine.execute(workload, {**parameters, "PACK": 2}).verification.ok


def accumulator_inits(engine: MlirJitEngine, workload, parameters) -> list[str]:
    """For each micro-kernel K loop (an scf.for carrying a vector) of the scheduled IR, the
    op its accumulators start from."""

    def init(op: ir.Operation) -> str | None:
        carries_vector = any(isinstance(r.type, ir.VectorType) for r in op.results)
        return op.operands[3].owner.name if op.name == "scf.for" and carries_vector else None

    return scheduled(engine, workload, parameters, init)


@pytest.mark.parametrize(
    ("k", "inits"), [(32, ["arith.constant"]), (96, ["arith.constant", "vector.transfer_read"])]
)
def test_the_first_k_block_starts_from_zero_and_only_later_blocks_read_c(engine, k, inits):
    # The fill is fused into the first K block's register tiles: no pass writes zeros to C
    # for the micro-kernel to read back.
    workload = Matmul(M=64, N=128, K=k)
    assert accumulator_inits(engine, workload, {**BLOCKS, "PACK": 1}) == inits
    assert engine.execute(workload, {**BLOCKS, "PACK": 1}).verification.ok


def test_the_selector_packs_operands_past_l2_and_they_verify(engine):
    # B is 8 MiB, past any current core's L2; 96 rows divide into register tiles of 6 or 8
    # (AVX2 or AVX-512), so the packed blocks are whole on any x86-64 host; C's 96-row
    # panel stays in L2 beside B's block, and A is read in place (PACK=1).
    workload = Matmul(M=96, N=2048, K=1024)
    plan = engine.plan(workload)
    assert plan.values["PACK"] == 1 and plan.sources["PACK"] == "selector"
    assert engine.execute(workload).verification.ok


@pytest.mark.parametrize(
    ("k", "dtype", "nr", "prefetch"),
    [
        (512, "f32", 16, 0),  # A's f32 rows half a 4 KiB page apart
        (1024, "f32", 16, 2),  # a page apart, B's panel rows one 64-byte line: both
        (2048, "f32", 16, 2),
        (512, "f32", 64, 2),  # panel rows of four lines (AVX-512): B's rows at any K
        (2048, "f32", 64, 2),
        (2048, "bf16", 16, 0),  # 4 KiB rows of bf16
        (4096, "bf16", 16, 1),
    ],
)
def test_the_selector_prefetches_a_past_a_page_and_b_rows_ahead(k, dtype, nr, prefetch):
    op = OpInfo("matmul", {"M": 96, "N": 2048, "K": k}, (dtype, dtype, "f32"))
    assert prefetch_level(op, nr) == prefetch


@pytest.mark.parametrize(("k", "prefetch"), [(1024, 0), (2048, 1)])
def test_under_an_epilogue_one_line_b_rows_are_not_prefetched_ahead(engine, k, prefetch):
    dims = {"M": 96, "N": 2048, "K": k}
    op = OpInfo("matmul", dims, ("f32",) * 3, attributes={"epilogue": 1})
    assert prefetch_level(op, 16) == prefetch
    assert prefetch_level(op, 64) == 2  # rows of four lines: ahead, epilogue or not
    plan = engine.plan(Mlp(**dims))  # on any host: its register tile's rows decide
    assert plan.values["PREFETCH"] == prefetch_level(op, plan.values["NR"])


def test_the_selectors_prefetches_verify(engine):
    # A's f32 rows two pages apart: prefetched on any host (B's rows too, where one line).
    workload = Matmul(M=96, N=2048, K=2048)
    plan = engine.plan(workload)
    assert plan.values["PACK"] == 1 and plan.values["PREFETCH"] > 0, plan.values
    assert engine.execute(workload).verification.ok


@pytest.mark.parametrize(
    "workload", [Matmul(M=1, N=256, K=64), Matmul(M=4, N=96, K=40), Matmul(M=64, N=1, K=64)]
)
def test_skinny_products_verify(engine, workload):
    assert engine.execute(workload).verification.ok


@pytest.mark.parametrize(
    "workload",
    ["matmul M=1 N=256 K=64", "matmul M=5 N=64 K=96", "mlp M=3 N=64 K=64"],
    ids=["matvec", "rows", "mlp"],
)
@pytest.mark.parametrize("pack", [1, 2])
def test_one_row_register_tiles_verify_within_bounded_memory(workload, pack):
    # Canonicalizing beside the vector lowering looped without end on MR=1 tiles, past
    # 14 GB; in a child process whose address space is capped, so a return of that loop
    # fails here instead of exhausting the machine.
    cap = 4 << 30
    knobs = {**BLOCKS, "MC": 8, "MR": 1, "PACK": pack, "PREFETCH": 0}
    command = [sys.executable, "-m", "mlirtune", "run", *workload.split(), "--no-specs"]
    command += [f"--param={name}={value}" for name, value in knobs.items()]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=600,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (cap, cap)),
    )
    assert done.returncode == 0, done.stderr
    assert "verification passed" in done.stdout


@pytest.mark.parametrize(
    "workload, parameters, constraint",
    [
        (Matmul(M=64, N=64, K=32), {**BLOCKS, "MR": 6, "PACK": 1}, "pack_needs_whole_panels"),
        (BatchMatmul(B=2, M=32, N=64, K=32), {**BLOCKS, "PACK": 2}, "pack_needs_matmul"),
    ],
)
def test_a_combination_the_packed_path_cannot_take_names_the_constraint(
    engine, workload, parameters, constraint
):
    with pytest.raises(MlirtuneError, match=constraint):
        engine.execute(workload, parameters)


def test_prime_shapes_stay_on_the_peeled_path(engine):
    workload = Matmul(M=97, N=101, K=103)
    assert engine.plan(workload).values["PACK"] == 0
    assert engine.execute(workload).verification.ok


# A host whose small caches put these small operands past L2, so the selector packs them
# where whole blocks exist, whatever the machine running the tests.
SMALL_CACHES = HostCPU(
    l1d_bytes=8 << 10, l1d_ways=8, l2_bytes=64 << 10, l2_ways=8, l3_bytes=1 << 20
)


@pytest.mark.parametrize(
    ("workload", "pack"),
    [
        # Square-ish: whole blocks, B packed (K of 264 keeps A's rows off one L1 set,
        # where AVX2 hosts would walk N outer: packed_order.py).
        (Matmul(M=128, N=256, K=264), 1),
        (Mlp(M=128, N=256, K=256), 1),  # bias and ReLU after the packed nest
        (Matmul(M=100, N=99, K=101), 1),  # odd: N's tail split off, K's in the first block
        (Matmul(M=100, N=99, K=101, transpose="a"), 2),  # A [K, M] packed too
        (Matmul(M=97, N=89, K=83), 0),  # prime
        (Matmul(M=1, N=256, K=512), 0),  # skinny: a row vector times B
        (Matmul(M=256, N=1, K=512), 0),  # one column
        (BatchMatmul(B=4, M=64, N=256, K=128), 0),  # batched: the unpacked nest per batch
    ],
    ids=["square", "mlp", "odd", "odd-a-km", "prime", "m1", "n1", "batch"],
)
def test_selected_kernels_verify_on_every_shape_class(workload, pack):
    engine = engine_for(SMALL_CACHES, use_specs=False)
    plan = engine.plan(workload)
    assert plan.values["PACK"] == pack
    assert engine.execute(workload).verification.ok


def transpose_shapes(engine: MlirJitEngine, workload, parameters) -> list[list[int]]:
    """Source shapes of the vector transposes the schedule leaves."""

    def shape(op: ir.Operation) -> list[int] | None:
        return (
            list(ir.VectorType(op.operands[0].type).shape)
            if op.name == "vector.transpose"
            else None
        )

    return scheduled(engine, workload, parameters, shape)


@pytest.mark.parametrize(("isa", "side"), [("avx512", 16), ("avx2", 8)])
def test_transposed_b_is_packed_in_register_squares(isa, side):
    # B stored [N, K] is transposed into its panels in squares of one register's f32 lanes,
    # which the schedule lowers to shuffles: no [NR, K rows] transpose is left to go
    # element by element.
    target = HostCPU(isa=isa)
    engine = MlirJitEngine(target=target, use_specs=False)
    workload = Matmul(M=64, N=64, K=64, transpose="b")
    parameters = {**BLOCKS, "PACK": 1}
    shapes = transpose_shapes(engine, workload, parameters)
    assert [BLOCKS["NR"], 8] not in shapes and [side, side] not in shapes
    assert scheduled(engine, workload, parameters, lambda op: op.name == "vector.shuffle" or None)
    if isa == "avx2" or detect_features().isa == "avx512":
        assert engine.execute(workload, parameters).verification.ok


def test_transposed_b_squares_need_every_k_block_whole():
    # K = 53 = 5 + 3 x 16: the first K block is packed a row at a time, so no block is
    # packed in squares (mixed with those, the shuffle lowering ran out of memory).
    engine = MlirJitEngine(target=HostCPU(isa="avx512"), use_specs=False)
    workload = Matmul(M=64, N=48, K=53, transpose="b")
    parameters = {"MC": 32, "NC": 48, "KC": 16, "MR": 8, "NR": 16, "PACK": 1}
    assert [16, 16] not in transpose_shapes(engine, workload, parameters)
    if detect_features().isa == "avx512":
        assert engine.execute(workload, parameters).verification.ok
