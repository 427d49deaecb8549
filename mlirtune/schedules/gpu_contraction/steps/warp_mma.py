"""Warp-level contractions on tensor cores: the step `lower-warp-mma`.

The gpu_contraction schedule (knob mma = 1) leaves, inside a `gpu.launch`, one
`vector.contract` per 16 x 8 x 16 tile of a warp: A (16 x 16) and B (16 x 8, K-major rows)
read from shared memory, an f32 accumulator (16 x 8) carried through the K loops and read
from and written to C around them. The vectors are warp-wide values: the warp computes them
together. This step gives each lane its share of them, as the PTX `mma.sync.m16n8k16`
fragments lay them out:

- A and B come from `nvgpu.ldmatrix` (four 8 x 8 matrices of A; two of B, transposed);
- each accumulator becomes the lane's 2 x 2 fragment (rows lane/4 and lane/4 + 8, columns
  2 (lane % 4) and the next), stored to C as two 2-element vectors; it starts from zeros
  where a zero fill of C comes just before (the fill is dropped), else it is loaded;
- each contract becomes one `nvvm.mma.sync`, its PTX input type that of A and B
  (MMA_INPUT_TYPES: bf16 or f16, summed in f32).

Upstream's `convert-vector-to-gpu` does the same for f16 only; this step takes bf16 too.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, gpu, llvm, nvgpu, nvvm, vector

from mlirtune.interfaces.errors import MlirtuneError
from mlirtune.ir.constants import index_constant, is_zero_splat, splat
from mlirtune.ir.inspect import ops_named
from mlirtune.schedules.gpu_contraction.steps.workgroup import in_workgroup

STAGE = "lower-warp-mma"
# Operand shapes of one mma.sync.m16n8k16 at warp level, and a lane's fragments of them.
A_SHAPE, B_SHAPE, C_SHAPE = [16, 16], [16, 8], [16, 8]
A_FRAGMENT, B_FRAGMENT, C_FRAGMENT = [4, 2], [2, 2], [2, 2]
# A lane's two accumulator elements in a row start at an even column of C: 8-byte aligned
# where C's rows have an even length, which the schedule's whole tiles of 8 columns ensure.
ROW_ALIGNMENT = 8
# Ops that may stand between a fill and the accumulator's read of C (no memory writes).
WRITES_NOTHING = ("gpu.barrier", "affine.apply", "vector.transfer_read")


@dataclass(frozen=True)
class MmaInputs:
    """How `nvvm.mma.sync` takes one input element type: the PTX type it names, and the
    form of a register (a pair of elements), as NVVM's verifier wants it: bitcast to i32
    (`as_word`, bf16) or the pair itself (f16, vector<2xf16>)."""

    ptx: nvvm.MMATypes
    as_word: bool


# The input element types (as MLIR prints them) that mma.sync.m16n8k16 multiplies into f32
# sums.
MMA_INPUT_TYPES = {
    "bf16": MmaInputs(nvvm.MMATypes.bf16, as_word=True),
    "f16": MmaInputs(nvvm.MMATypes.f16, as_word=False),
}


def lower_warp_mma(module: ir.Module) -> None:
    for launch in ops_named(module.operation, "gpu.launch"):
        contracts = [c for c in ops_named(launch, "vector.contract") if _is_warp_mma(c)]
        if contracts:
            _lower(launch, contracts)


def _is_warp_mma(contract: ir.Operation) -> bool:
    lhs, rhs, acc = (ir.VectorType(v.type) for v in contract.operands[:3])
    return (
        lhs.shape == A_SHAPE
        and rhs.shape == B_SHAPE
        and acc.shape == C_SHAPE
        and isinstance(acc.element_type, ir.F32Type)
        and str(lhs.element_type) in MMA_INPUT_TYPES
        and rhs.element_type == lhs.element_type
    )


def _lower(launch: ir.Operation, contracts: list[ir.Operation]) -> None:
    body = launch.regions[0].blocks[0]
    with ir.InsertionPoint.at_block_begin(body), launch.location:
        lane = gpu.lane_id()
    operands: dict[ir.Operation, ir.Value] = {}
    for contract in contracts:
        for position, transpose in ((0, False), (1, True)):
            read = _shared_read(contract, position)
            if read not in operands:
                operands[read] = _load_matrix(read, lane, transpose)
    accumulators = _accumulator_web(contracts)
    loads = [v.owner.operation for v in accumulators if _name(v.owner) == "vector.transfer_read"]
    stores = [
        use.owner.operation
        for v in accumulators
        for use in v.uses
        if _name(use.owner) == "vector.transfer_write"
    ]
    fragment = ir.VectorType.get(C_FRAGMENT, ir.F32Type.get())
    for value in accumulators:
        if isinstance(value, ir.BlockArgument) or _name(value.owner) == "scf.for":
            value.set_type(fragment)
    for load in loads:
        load.results[0].replace_all_uses_with(_load_accumulator(load, lane))
        load.erase()
    for contract in contracts:
        lhs, rhs = (operands[_shared_read(contract, p)] for p in (0, 1))
        with ir.InsertionPoint(contract), contract.location:
            mma = _mma_sync(lhs, rhs, contract.operands[2])
        contract.results[0].replace_all_uses_with(mma)
        contract.erase()
    for store in stores:
        _store_accumulator(store, lane)
    for read in operands:
        read.erase()


def _mma_sync(lhs: ir.Value, rhs: ir.Value, accumulator: ir.Value) -> ir.Value:
    """One `nvvm.mma.sync` m16n8k16 (row-major A, column-major B, bf16 or f16 into f32) on
    a lane's fragments. It is built in NVVM directly because `nvgpu.mma.sync` cannot say
    bf16 (its lowering deduces the PTX type from the element type, f16 only). A's and B's
    registers are pairs of their elements, in the form MMA_INPUT_TYPES gives."""
    inputs = MMA_INPUT_TYPES[str(ir.VectorType(lhs.type).element_type)]
    word = ir.VectorType.get([1], ir.IntegerType.get_signless(32))

    def registers(fragment: ir.Value, count: int) -> list[ir.Value]:
        pairs = [vector.extract(fragment, [], [i]) for i in range(count)]
        if not inputs.as_word:
            return pairs
        return [vector.extract(vector.bitcast(word, p), [], [0]) for p in pairs]

    f32 = ir.F32Type.get()
    places = [(i, j) for i in range(C_FRAGMENT[0]) for j in range(C_FRAGMENT[1])]
    sums = [vector.extract(accumulator, [], list(place)) for place in places]
    result = nvvm.mma_sync(
        llvm.StructType.get_literal([f32] * len(places)),
        ir.Attribute.parse("#nvvm.shape<m = 16, n = 8, k = 16>"),
        ir.Attribute.parse("#nvvm.mma_layout<row>"),
        ir.Attribute.parse("#nvvm.mma_layout<col>"),
        registers(lhs, A_FRAGMENT[0]),
        registers(rhs, B_FRAGMENT[0]),
        sums,
        multiplicand_a_ptx_type=inputs.ptx,
        multiplicand_b_ptx_type=inputs.ptx,
    )
    values = [llvm.extractvalue(f32, result, [i]) for i in range(len(places))]
    return vector.from_elements(ir.VectorType.get(C_FRAGMENT, f32), values)


def _name(owner: object) -> str:
    return owner.operation.name if isinstance(owner, ir.OpView | ir.Operation) else ""


def _shared_read(contract: ir.Operation, position: int) -> ir.Operation:
    """The transfer_read of workgroup memory that gives `contract` its operand."""
    owner = contract.operands[position].owner
    if _name(owner) != "vector.transfer_read":
        raise MlirtuneError(
            f"operand {position} of a warp contraction is not read from memory", stage=STAGE
        )
    read = owner.operation
    if not in_workgroup(read.operands[0]):
        raise MlirtuneError(
            f"operand {position} of a warp contraction is not in shared memory", stage=STAGE
        )
    return read


def _indices(transfer: ir.Operation, first: int) -> list[ir.Value]:
    """A transfer's indices: the operands after its vector (first = 1) or memref."""
    rank = ir.MemRefType(transfer.operands[first].type).rank
    permutation = ir.AffineMapAttr(transfer.attributes["permutation_map"]).value
    if permutation != ir.AffineMap.get_minor_identity(rank, 2):
        raise MlirtuneError("a warp contraction's transfer is permuted", stage=STAGE)
    return list(transfer.operands[first + 1 : first + 1 + rank])


def _load_matrix(read: ir.Operation, lane: ir.Value, transpose: bool) -> ir.Value:
    """ldmatrix of A (x4: lane l gives row l % 16 at column 8 (l / 16)) or of B (x2,
    transposed: lanes 0-15 give K rows 0-15; the others' addresses are ignored)."""
    memref = read.operands[0]
    element = ir.MemRefType(memref.type).element_type
    *outer, row, column = _indices(read, 0)
    with ir.InsertionPoint(read), read.location:
        row = arith.addi(row, arith.remui(lane, index_constant(16)))
        if not transpose:
            column = arith.addi(
                column, arith.muli(arith.divui(lane, index_constant(16)), index_constant(8))
            )
        shape, tiles = (B_FRAGMENT, 2) if transpose else (A_FRAGMENT, 4)
        return nvgpu.ldmatrix(
            ir.VectorType.get(shape, element), memref, [*outer, row, column], transpose, tiles
        )


def _fragment_places(transfer: ir.Operation, first: int, lane: ir.Value) -> list[list[ir.Value]]:
    """Where a lane's two accumulator rows start in C: (lane / 4, 2 (lane % 4)) and 8 rows
    below, from the transfer's indices."""
    *outer, row, column = _indices(transfer, first)
    row = arith.addi(row, arith.divui(lane, index_constant(4)))
    column = arith.addi(column, arith.muli(arith.remui(lane, index_constant(4)), index_constant(2)))
    return [[*outer, row, column], [*outer, arith.addi(row, index_constant(8)), column]]


def _load_accumulator(read: ir.Operation, lane: ir.Value) -> ir.Value:
    """The lane's fragment of the C tile `read` reads: zeros where a zero fill of that
    tile comes before it (the fill is then dead, since the accumulator's store overwrites
    the tile: it is erased), else two 2-element loads of C."""
    fragment_type = ir.VectorType.get(C_FRAGMENT, ir.F32Type.get())
    fill = _zero_fill_before(read)
    with ir.InsertionPoint(read), read.location:
        fragment = splat(0.0, fragment_type)
        if fill is not None:
            fill.erase()
            return fragment
        row_type = ir.VectorType.get([C_FRAGMENT[1]], ir.F32Type.get())
        for position, place in enumerate(_fragment_places(read, 0, lane)):
            row = vector.load(row_type, read.operands[0], place, alignment=ROW_ALIGNMENT)
            fragment = vector.insert(row, fragment, [], [position])
    return fragment


def _zero_fill_before(read: ir.Operation) -> ir.Operation | None:
    """The transfer_write of a zero tile to the same memref at the same indices that
    comes before `read` in its block, with nothing between them that writes memory but
    other zero-tile writes (a fill split into tiles)."""
    memref, indices = read.operands[0], _indices(read, 0)
    before = []
    for op in read.block.operations:
        if op.operation == read:
            break
        before.append(op.operation)
    for op in reversed(before):
        if op.name in WRITES_NOTHING or op.name.startswith("arith."):
            continue
        if op.name != "vector.transfer_write" or not is_zero_splat(op.operands[0]):
            return None
        if op.operands[1] == memref and _indices(op, 1) == indices:
            return op
    return None


def _store_accumulator(write: ir.Operation, lane: ir.Value) -> None:
    value, memref = write.operands[0], write.operands[1]
    with ir.InsertionPoint(write), write.location:
        for position, place in enumerate(_fragment_places(write, 1, lane)):
            row = vector.extract(value, [], [position])
            vector.store(row, memref, place, alignment=ROW_ALIGNMENT)
    write.erase()


def _accumulator_web(contracts: list[ir.Operation]) -> list[ir.Value]:
    """Every value an accumulator passes through: the contracts' accumulator operands and
    results, the loops' iter_args, results and inits, and the yields between them, back to
    the reads of C. A use other than a contract, a yield or a write of C is refused."""
    seen: list[ir.Value] = []
    work = [v for c in contracts for v in (c.operands[2], c.results[0])]
    while work:
        value = work.pop()
        if any(value == s for s in seen):
            continue
        seen.append(value)
        work.extend(_loop_links(value))
        for use in value.uses:
            user = use.owner
            name = _name(user)
            if name == "vector.contract" and use.operand_number == 2:
                work.append(user.results[0])
            elif name == "scf.yield":
                loop = user.operation.parent
                work.append(loop.results[use.operand_number])
            elif name == "scf.for":
                work.append(user.regions[0].blocks[0].arguments[use.operand_number - 2])
            elif name != "vector.transfer_write":
                raise MlirtuneError(f"a warp accumulator is used by {name}", stage=STAGE)
    for value in seen:
        if not isinstance(value, ir.BlockArgument):
            name = _name(value.owner)
            if name not in ("vector.contract", "scf.for", "vector.transfer_read"):
                raise MlirtuneError(f"a warp accumulator comes from {name}", stage=STAGE)
    return seen


def _loop_links(value: ir.Value) -> list[ir.Value]:
    """An scf.for iter_arg's init, result and yielded value, or a result's iter_arg."""
    if isinstance(value, ir.BlockArgument):
        loop = value.owner.owner
        if _name(loop) != "scf.for" or value.arg_number == 0:
            raise MlirtuneError("a warp accumulator is a block argument", stage=STAGE)
        i = value.arg_number - 1
        yield_op = list(value.owner.operations)[-1]
        return [loop.operands[3 + i], loop.results[i], yield_op.operands[i]]
    if _name(value.owner) == "scf.for":
        loop = value.owner.operation
        i = value.result_number
        return [loop.regions[0].blocks[0].arguments[i + 1]]
    return []
