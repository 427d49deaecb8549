"""Root-op inspection and annotation through the bindings."""

import pytest
from mlir import ir

from mlirtune.ir.roots import ROOT_ATTRIBUTE
from mlirtune.schedules.roots import annotate_roots, find_roots
from mlirtune.workloads import BatchMatmul, Conv2d, Matmul, Mlp, Softmax


@pytest.mark.parametrize(
    ("workload", "kind", "dims"),
    [
        (Matmul(M=8, N=16, K=4), "matmul", {"M": 8, "N": 16, "K": 4}),
        (Mlp(M=8, N=16, K=4), "matmul", {"M": 8, "N": 16, "K": 4}),
        (BatchMatmul(B=2, M=8, N=16, K=4), "batch_matmul", {"B": 2, "M": 8, "N": 16, "K": 4}),
        (
            Conv2d(H=10, W=12, C=3, F=5, stride=2),
            "conv2d",
            {"N": 1, "OH": 4, "OW": 5, "F": 5, "KH": 3, "KW": 3, "C": 3},
        ),
    ],
)
def test_roots_are_found_and_annotated_once(workload, kind, dims):
    with ir.Context(), ir.Location.unknown():
        module = workload.payload_module()
        infos = annotate_roots(module)
        assert [i.kind for i in infos] == [kind]
        assert infos[0].dims == dims
        ((op, _),) = find_roots(module)
        assert ir.StringAttr(op.attributes[ROOT_ATTRIBUTE]).value == kind
        # Only the root carries the annotation: fills and epilogues do not.
        annotated = []
        module.operation.walk(
            lambda o: (
                annotated.append(o.name) or ir.WalkResult.ADVANCE
                if ROOT_ATTRIBUTE in o.attributes
                else ir.WalkResult.ADVANCE
            )
        )
        assert len(annotated) == 1


def test_conv_root_records_stride_and_dilation():
    info = Conv2d(H=20, W=20, C=2, F=4, stride=2, dilation=2).root
    assert info.attributes == {"stride": 2, "dilation": 2}
    assert info.dtypes == ("f32", "f32", "f32")


def test_workload_root_is_cached():
    workload = Matmul(M=4, N=4, K=4)
    assert workload.root is workload.root


def test_reduction_roots_count_the_transcendentals_around_them():
    # The row max is softmax's root; the exp beside it is what bounds its tile.
    assert Softmax(M=8, N=32).root.attributes == {"transcendentals": 1}
    assert Softmax(M=8, N=32, log=True).root.attributes == {"transcendentals": 2}
