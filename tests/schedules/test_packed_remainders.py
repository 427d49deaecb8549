"""The packed contraction path (PACK=1/2) on shapes no block divides: partial cache blocks
and register tiles are padded to full ones, so odd and prime shapes keep the packed nest."""

from __future__ import annotations

import pytest
from mlir import ir

from mlirtune.engine import MlirJitEngine
from mlirtune.interfaces.op import OpInfo
from mlirtune.schedules.contraction.blocking import padded_block
from mlirtune.schedules.contraction.packed_tails import column_tail, row_tail
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.workloads import Matmul, Mlp
from tests.cpu_classes import cpu
from tests.schedules.test_packed_contraction_path import scheduled

pytestmark = pytest.mark.jit

SMALL = {"MC": 16, "NC": 32, "KC": 16, "MR": 8, "NR": 16}


@pytest.fixture(scope="module")
def engine() -> MlirJitEngine:
    return MlirJitEngine(use_specs=False)


@pytest.mark.parametrize("pack", [1, 2])
@pytest.mark.parametrize(
    ("shape", "dtype", "transpose"),
    [
        ((67, 45, 53), "f32", "none"),  # every block and register tile partial
        ((130, 97, 131), "f32", "none"),  # primes
        ((64, 64, 53), "f32", "none"),  # K blocks only
        ((67, 64, 64), "f32", "none"),  # M blocks only
        ((64, 45, 64), "f32", "none"),  # N blocks only
        ((67, 45, 53), "f32", "b"),  # packing absorbs B's transpose
        ((67, 45, 53), "f64", "none"),
    ],
)
def test_partial_blocks_verify(engine, shape, dtype, transpose, pack):
    m, n, k = shape
    workload = Matmul(M=m, N=n, K=k, dtype=dtype, transpose=transpose)
    parameters = {**SMALL, "PACK": pack}
    if dtype == "f64":
        parameters["NR"] = 8  # whole f64 vectors
    result = engine.execute(workload, parameters)
    assert result.verification.ok, result.verification.summary()
    assert result.parameters["PACK"] == pack


def test_a_row_block_spanning_m_of_five_row_tiles_verifies(engine):
    """M = 105 = 3 x 5 x 7: 5 x 64 register tiles, one row block, A read in place."""
    workload = Matmul(M=105, N=200, K=70)
    parameters = {"MC": 105, "NC": 64, "KC": 32, "MR": 5, "NR": 64, "PACK": 1}
    result = engine.execute(workload, parameters)
    assert result.verification.ok, result.verification.summary()


@pytest.mark.parametrize("pack", [1, 2])
@pytest.mark.parametrize(
    ("workload", "blocks"),
    [
        # whole blocks (MC and NC span M and N), register tiles partial in M (64 by 6) or
        # in N (45 by 16): their fill and epilogue tiles take masked vectors
        (Matmul(M=64, N=64, K=64), {"MC": 64, "NC": 64, "KC": 32, "MR": 6, "NR": 64}),
        (Matmul(M=64, N=45, K=40), {"MC": 64, "NC": 64}),
        (Mlp(M=60, N=45, K=40), {"MC": 64, "NC": 64}),
        (Mlp(M=64, N=45, K=53), {"MC": 32, "NC": 32}),  # columns under an epilogue
    ],
    ids=["rows", "columns", "mlp", "mlp-columns"],
)
def test_whole_blocks_of_partial_register_tiles_verify(engine, workload, blocks, pack):
    parameters = {**SMALL, **blocks, "PACK": pack}
    assert engine.execute(workload, parameters).verification.ok


def test_selector_packs_a_non_dividing_shape_past_l2():
    # B (K x N, 604 KiB) past half of a 1 MiB L2, and A stored [K, M], which is packed: its
    # partial blocks are padded (PACK=2), its partial panel copied once per row of register
    # tiles. Read in place, A's partial panels would be padded per register tile, so a
    # plain A keeps such a shape unpacked. The caches are pinned, so the selector chooses
    # alike on every host.
    target = HostCPU(l1d_bytes=32 << 10, l1d_ways=8, l2_bytes=1 << 20, l2_ways=8)
    engine = MlirJitEngine(target=target, use_specs=False)
    workload = Matmul(M=1501, N=389, K=397, transpose="a")
    plan = engine.plan(workload)
    assert plan.values["PACK"] == 2, plan.values
    assert engine.execute(workload).verification.ok
    assert engine.plan(Matmul(M=1501, N=389, K=397)).values["PACK"] == 0


def test_padded_block_evens_out_the_blocks():
    assert padded_block(2949, 512, 1) == 492  # six blocks, the last 489
    assert padded_block(8205, 384, 8) == 376
    assert padded_block(100, 512, 8) == 100  # one block spanning the loop


@pytest.mark.parametrize("kind", ["matmul", "mlp"])
def test_selector_packs_an_odd_shape_in_whole_blocks(engine, kind):
    """Whole blocks of M's 1000 rows and of the columns of N's whole register tiles (the
    packed nest splits off the rest, or peels it off an MLP's epilogue: unpacked, MLP
    1000x999x1001 ran at 0.50x numpy's three ops on an Intel Xeon), K's remainder in the
    first K block: nothing is padded, whether A is packed or read in place."""
    workload = (Mlp if kind == "mlp" else Matmul)(M=1000, N=999, K=1001)
    plan = engine.plan(workload).values
    assert plan["PACK"] > 0 and 1000 % plan["MC"] == 0 and 0 < 999 - plan["NC"] < plan["NR"]
    assert engine.execute(workload).verification.ok


def test_column_tail_leaves_tiles_that_share_out_evenly():
    """On several threads the packed nest's whole register tiles must share out evenly over
    them (its column blocks are one scf.forall): where they do not, the tail grows by the
    tiles past the last whole group of one per thread."""
    op = _matmul(1000, 1000, 1000)
    assert column_tail(op, mr=8, nr=32) == 8  # 31 whole tiles
    assert column_tail(op, mr=8, nr=32, threads=2) == 40  # 30 of them, 15 a thread
    assert column_tail(_matmul(1000, 1032, 1000), mr=8, nr=32, threads=2) == 8  # 32 tiles
    assert column_tail(op, mr=8, nr=16, threads=2) == 8  # 62 tiles


@pytest.mark.parametrize("cpu_class", ["amx", "avx2"])
@pytest.mark.parametrize("kind", ["matmul", "mlp"])
def test_selector_packs_an_odd_n_on_two_threads(kind, cpu_class):
    """1000^3 on two threads: whole column blocks, an even number of them, over the columns
    of the whole tiles the threads share evenly (30 of the 31 32-wide tiles of AVX-512, the
    62 16-wide ones of AVX2); the rest are split or peeled off (unpacked for want of even
    blocks, the matmul ran at 0.21x numpy's two threads on an Intel Xeon). On AVX2, the
    MLP's one-piece column tail failed to schedule: its fill, fused into the contraction's
    tiles, left the fill's own handle empty."""
    threaded = MlirJitEngine(target=cpu(cpu_class, threads=2), use_specs=False)
    workload = (Mlp if kind == "mlp" else Matmul)(M=1000, N=1000, K=1000)
    values = threaded.plan(workload).values
    columns = 1000 - column_tail(_matmul(1000, 1000, 1000), values["MR"], values["NR"], 2)
    assert values["PACK"] > 0 and columns % values["NC"] == 0, values
    assert (columns // values["NC"]) % 2 == 0, values
    if threaded.target.runs_here():
        assert threaded.execute(workload).verification.ok
    else:
        threaded.lower_payload(workload)


@pytest.mark.parametrize("kind", ["matmul", "mlp"])
@pytest.mark.parametrize("pack", [1, 2])
@pytest.mark.parametrize("kc", [16, 40])
def test_a_wide_column_tail_is_split_into_pieces_that_verify(engine, pack, kc, kind):
    """29 columns past N's last 32-wide register tile: split off as 16, 8 and 5 columns,
    widths LLVM keeps in whole vectors (29 at once it splits into slow odd pieces); under
    an MLP's epilogue, peeled off its column loop, with K in blocks or in one (where the
    epilogue takes the accumulators in registers)."""
    parameters = {"MC": 32, "NC": 32, "KC": kc, "MR": 2, "NR": 32, "PACK": pack}
    workload = (Mlp if kind == "mlp" else Matmul)(M=64, N=61, K=40)
    assert column_tail(_matmul(64, 61, 40, epilogue=int(kind == "mlp")), mr=2, nr=32) == 29
    assert engine.execute(workload, parameters).verification.ok


@pytest.mark.parametrize("kind", ["matmul", "mlp"])
@pytest.mark.parametrize("pack", [1, 2])
@pytest.mark.parametrize(("m", "tail"), [(67, 3), (65, 9)])
def test_a_row_tail_is_split_off_and_verifies(engine, m, tail, pack, kind):
    """Rows past M's last whole 8-row tile run in a nest of their own, so the packed nest's
    tiles stay whole; a single row is taken with one tile's rows (9: 65 = 7 x 8 + 9). Under
    an MLP's bias and ReLU the tail's nest takes the epilogue too."""
    epilogue = {"epilogue": 1} if kind == "mlp" else {}
    assert row_tail(_matmul(m, 64, 64, **epilogue), mr=8, nr=16, kc=16) == tail
    workload = (Mlp if kind == "mlp" else Matmul)(M=m, N=64, K=64)
    result = engine.execute(workload, {**SMALL, "PACK": pack})
    assert result.verification.ok


def _matmul(m: int, n: int, k: int, **attributes: int) -> OpInfo:
    return OpInfo("matmul", {"M": m, "N": n, "K": k}, ("f32",) * 3, attributes=attributes)


def test_no_row_tail_where_it_is_not_split():
    op = _matmul(67, 64, 64)
    assert row_tail(op, mr=8, nr=16, kc=64) == 0  # K is one block
    assert row_tail(op, mr=8, nr=24, kc=16) == 0  # partial column tiles
    assert row_tail(_matmul(67, 64, 64, transpose_a=1), mr=8, nr=16, kc=16) == 0


@pytest.mark.parametrize("cpu_class", ["avx2", "avx512", "amx"])
def test_selector_packs_a_linear_layer_with_k_in_one_block(cpu_class):
    """A Linear layer's weight is stored [N, K]: its rows past the last whole register tile
    are split off even where K is one block (ViT's 197 tokens), so that the selector packs
    it on every class (unpacked, each K step read B a row apart: 0.6x numpy)."""
    assert row_tail(_matmul(197, 768, 192, transpose_b=1), mr=5, nr=64, kc=192) == 2
    workload = Matmul(M=197, N=256, K=192, transpose="b", bias=True)
    values = MlirJitEngine(target=cpu(cpu_class), use_specs=False).plan(workload).values
    assert values["PACK"] > 0, values


@pytest.mark.parametrize("cpu_class", ["avx2", "avx512", "amx"])
@pytest.mark.parametrize("n", [192, 576])
def test_selector_packs_a_linear_layer_on_two_threads(cpu_class, n):
    """On two threads the register tile is one whose whole column tiles the threads share
    evenly: ViT's 192 and 576 columns make three and nine 64-wide tiles, for which no
    packed blocks exist, and the unpacked nest ran at 0.47x numpy's two threads (8 x 32
    packed: 1.9x, on an AMD Zen 5)."""
    threaded = MlirJitEngine(target=cpu(cpu_class, threads=2), use_specs=False)
    workload = Matmul(M=197, N=n, K=768, transpose="b")
    values = threaded.plan(workload).values
    assert values["PACK"] > 0 and (n // values["NC"]) % 2 == 0, values
    if threaded.target.runs_here():
        assert threaded.execute(workload).verification.ok


@pytest.mark.parametrize("bias", [False, True])
def test_a_linear_layers_row_tail_verifies(engine, bias):
    workload = Matmul(M=197, N=256, K=192, transpose="b", bias=bias)
    assert engine.execute(workload).verification.ok


@pytest.mark.parametrize("pack", [1, 2])
@pytest.mark.parametrize(("shape", "main"), [((67, 64), [64, 64]), ((64, 79), [64, 64])])
def test_mlp_tails_on_two_threads_verify(pack, shape, main):
    """On two threads the column blocks are one scf.forall, which does not peel: the tail
    rows or columns are peeled off first, and the column blocks' forall spans only the
    main 64 x 64 of C (a column tail's pieces have foralls of their own)."""
    threaded = MlirJitEngine(target=HostCPU(threads=2), use_specs=False)
    workload = Mlp(M=shape[0], N=shape[1], K=64)
    parameters = {**SMALL, "PACK": pack}

    def forall_shape(op: ir.Operation) -> list[int] | None:
        if op.name != "scf.forall":
            return None
        return list(ir.RankedTensorType(op.results[0].type).shape)

    forall_shapes = scheduled(threaded, workload, parameters, forall_shape)
    assert main in forall_shapes and list(shape) not in forall_shapes
    assert threaded.execute(workload, parameters).verification.ok


@pytest.mark.parametrize(("kind", "threads"), [("matmul", 1), ("mlp", 1), ("mlp", 2)])
def test_selector_packs_a_prime_m_with_a_row_tail(engine, kind, threads):
    """M = 1021 is prime: no register tile divides it, so the selector takes the packed nest
    with a short row tail split off, in whole blocks of the other rows (unpacked, 1021^3 f32
    ran at 0.68x OpenBLAS; packed 0.82x, on an AMD Zen 3), under an MLP's epilogue too, on
    one thread or several (an MLP 509x4096x1024 on two, unpacked: 0.22x numpy's three ops)."""
    geometry = {"l1d_bytes": 32 << 10, "l1d_ways": 8, "l2_bytes": 1 << 20, "l2_ways": 8}
    target = HostCPU(**geometry, threads=threads)
    pinned = MlirJitEngine(target=target, use_specs=False)
    workload = (Mlp if kind == "mlp" else Matmul)(M=1021, N=1024, K=1024)
    values = pinned.plan(workload).values
    epilogue = {"epilogue": 1} if kind == "mlp" else {}
    op = _matmul(1021, 1024, 1024, **epilogue)
    tail = row_tail(op, values["MR"], values["NR"], values["KC"])
    assert values["PACK"] > 0 and 0 < tail <= 0.02 * 1021, values
    assert (1021 - tail) % values["MC"] == 0
    assert pinned.execute(workload).verification.ok
