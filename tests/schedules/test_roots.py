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


CONV_3D = """
func.func @payload(%x: tensor<1x4x6x8x18xf32>, %w: tensor<8x4x3x3x3xf32>,
                   %y: tensor<1x8x4x6x16xf32>) -> tensor<1x8x4x6x16xf32> {
  %0 = linalg.conv_3d_ncdhw_fcdhw {dilations = dense<1> : vector<3xi64>,
                                   strides = dense<1> : vector<3xi64>}
       ins(%x, %w : tensor<1x4x6x8x18xf32>, tensor<8x4x3x3x3xf32>)
       outs(%y : tensor<1x8x4x6x16xf32>) -> tensor<1x8x4x6x16xf32>
  return %0 : tensor<1x8x4x6x16xf32>
}
"""

GLOBAL_POOL = """
#in = affine_map<(n, c, h, w) -> (n, c, h, w)>
#out = affine_map<(n, c, h, w) -> (n, c, 0, 0)>
func.func @payload(%x: tensor<2x8x7x7xf32>, %y: tensor<2x8x1x1xf32>) -> tensor<2x8x1x1xf32> {
  %0 = linalg.generic {indexing_maps = [#in, #out],
                       iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
       ins(%x : tensor<2x8x7x7xf32>) outs(%y : tensor<2x8x1x1xf32>) {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<2x8x1x1xf32>
  return %0 : tensor<2x8x1x1xf32>
}
"""


@pytest.mark.parametrize(
    ("payload", "attributes"),
    [
        # Output row w (loop 4) the vector loop; output rows h (3, which the filter does not
        # read) and filters f (1, which the input does not read) the outer product.
        (CONV_3D, {"vector_loop": 4, "reuse_loop": 3, "reuse2_loop": 1, "windowed": 1}),
        # Two reduced loops are no row reduction's; the input's rows (w, loop 3) are
        # summed a vector a step, channels and images the register tile's reuse loops.
        (GLOBAL_POOL, {"vector_loop": 3, "reuse_loop": 1, "reuse2_loop": 0, "windowed": 0}),
    ],
)
def test_ops_no_other_family_schedules_are_generic_roots(payload, attributes):
    """A 3-D conv's loops are no matmul's (it was taken for one, spatial loops unnamed),
    and a reduction over two loops no row reduction (it aborted in tile-and-fuse)."""
    with ir.Context(), ir.Location.unknown():
        ((_, info),) = find_roots(ir.Module.parse(payload))
    assert info.kind == "generic"
    assert {k: info.attributes[k] for k in attributes} == attributes


def doubling_steps(steps: int) -> str:
    """`steps` element-wise products of a row with itself shifted (a slice padded back
    with ones), each step reading the last one's result twice."""
    lines = ["#id = affine_map<(i, j) -> (i, j)>"]
    lines.append("func.func @payload(%x0: tensor<4x64xf32>) -> tensor<4x64xf32> {")
    lines.append("  %one = arith.constant 1.0 : f32")
    lines.append("  %empty = tensor.empty() : tensor<4x64xf32>")
    for step in range(steps):
        shift, x, next_x = 2**step, f"%x{step}", f"%x{step + 1}"
        lines += [
            f"  %s{step} = tensor.extract_slice {x}[0, 0] [4, {64 - shift}] [1, 1]"
            f" : tensor<4x64xf32> to tensor<4x{64 - shift}xf32>",
            f"  %p{step} = tensor.pad %s{step} low[0, {shift}] high[0, 0] {{",
            "  ^bb0(%i: index, %j: index):",
            "    tensor.yield %one : f32",
            f"  }} : tensor<4x{64 - shift}xf32> to tensor<4x64xf32>",
            f"  {next_x} = linalg.generic {{indexing_maps = [#id, #id, #id],"
            ' iterator_types = ["parallel", "parallel"]}'
            f" ins({x}, %p{step} : tensor<4x64xf32>, tensor<4x64xf32>)"
            " outs(%empty : tensor<4x64xf32>) {",
            "  ^bb0(%a: f32, %b: f32, %c: f32):",
            "    %m = arith.mulf %a, %b : f32",
            "    linalg.yield %m : f32",
            "  } -> tensor<4x64xf32>",
        ]
    lines += [f"  return %x{steps} : tensor<4x64xf32>", "}"]
    return "\n".join(lines)


@pytest.mark.parametrize(("steps", "roots"), [(2, 1), (4, 1), (5, 5), (6, 6)])
def test_a_chain_that_fusion_would_recompute_many_times_is_split(steps, roots):
    """Fused into the last op's tiles, step k of a doubling is computed 2^(n-k) times (a
    cumulative product of 10 steps compiled past the time limit): past FUSED_COPIES_LIMIT
    copies per op, every op read twice is a root of its own, and the payload is split."""
    with ir.Context(), ir.Location.unknown():
        found = find_roots(ir.Module.parse(doubling_steps(steps)))
    assert len(found) == roots
    assert all(info.kind == "elementwise" for _, info in found)
