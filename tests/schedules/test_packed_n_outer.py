"""The packed nest's N-outer order (ORDER=2, PACK=2): register tiles walk N by NR outer and
M by MR inner, and A is packed a whole MC x KC block at a time."""

from __future__ import annotations

import pytest

from mlirtune.engine import MlirJitEngine
from mlirtune.interfaces.errors import MlirtuneError
from mlirtune.interfaces.op import OpInfo
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.tune.space_for import space_for
from mlirtune.workloads import Matmul, Mlp
from tests.schedules.test_packed_contraction_path import BLOCKS, packing_buffers

pytestmark = pytest.mark.jit

N_OUTER = {**BLOCKS, "PACK": 2, "ORDER": 2}


@pytest.fixture(scope="module")
def engine() -> MlirJitEngine:
    return MlirJitEngine(use_specs=False)


def test_a_is_packed_per_block_not_per_row_of_tiles(engine):
    workload = Matmul(M=64, N=128, K=96)
    # A: a [MC/MR, MR, KC] buffer once per MC x KC block, where M outer copies a [MR, KC]
    # panel per row of register tiles; B's [NC/NR, KC, NR] panels either way. Each twice:
    # one nest for the first K block, one for the later ones.
    b_panels, a_block = [2, 32, 32], [4, 8, 32]
    m_outer = packing_buffers(engine, workload, {**N_OUTER, "ORDER": 1})
    n_outer = packing_buffers(engine, workload, N_OUTER)
    assert [b for b in m_outer if len(b) == 3] == [b_panels] * 2
    assert [b for b in n_outer if len(b) == 3] == [b_panels, a_block] * 2


@pytest.mark.parametrize(
    ("workload", "changes"),
    [
        (Matmul(M=64, N=128, K=96), {}),
        (Matmul(M=64, N=128, K=96, dtype="bf16"), {}),
        (Mlp(M=64, N=128, K=32), {}),  # one K block: the epilogue in registers
        (Mlp(M=64, N=128, K=96), {}),  # three: the epilogue reads C back
        (Matmul(M=64, N=45, K=53), {"NC": 32, "KC": 16, "NR": 16}),  # N's tail, K's remainder
        (Matmul(M=100, N=99, K=101, transpose="a"), {"MC": 40, "MR": 4}),  # partial blocks
        (Matmul(M=67, N=128, K=61, transpose="b"), {"MR": 4, "NR": 16}),  # M's row tail
    ],
    ids=["f32", "bf16", "mlp-one-k-block", "mlp", "tails", "odd-a-km", "row-tail-b-nk"],
)
def test_n_outer_kernels_verify(engine, workload, changes):
    assert engine.execute(workload, {**N_OUTER, **changes}).verification.ok


def test_n_outer_needs_a_packed_per_block(engine):
    workload = Matmul(M=64, N=128, K=96)
    with pytest.raises(MlirtuneError, match="pack_unrolls_nothing"):
        engine.execute(workload, {**N_OUTER, "PACK": 1})


def test_the_search_space_holds_both_orders_with_a_packed():
    op = OpInfo("matmul", {"M": 1024, "N": 1024, "K": 1024}, ("f32", "f32", "f32"))
    space = space_for(op, "contraction", HostCPU())
    packed = [c for c in space.enumerate() if c["PACK"] > 0]
    assert {c["ORDER"] for c in packed if c["PACK"] == 2} == {1, 2}
    assert {c["ORDER"] for c in packed if c["PACK"] == 1} == {1}
