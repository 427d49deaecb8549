"""The convolution family's NCHW path for convolutions strided along W (nchw_strided.py):
the selector's pixel-row x channel-vector tiles, their constraints, results against the
float64 reference on partial channel blocks and pixel tiles, padding, dilation and
threads, and a schedule that leaves no scalar loops. Nothing is timed."""

from __future__ import annotations

import os

import pytest
from mlir import ir

from mlirtune.api import engine_for
from mlirtune.schedules.convolution import CONVOLUTION
from mlirtune.schedules.convolution.nchw_strided import IMAGES_OUTER_PIXELS
from mlirtune.schedules.convolution.nchw_tiles import NCHW_ACCUMULATORS, NCHW_ROWS
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.workloads.conv2d import Conv2d
from mlirtune.workloads.conv_transpose import ConvTranspose
from tests.cpu_classes import cpu
from tests.targets.test_targets_host import AVX512

TARGET = HostCPU(AVX512)
# KernelBench 76 (a dilated, strided conv1d), scaled down.
CONV1D = {"layout": "nchw", "N": 2, "C": 3, "F": 64, "H": 1, "W": 70, "KH": 1, "KW": 3}
STRIDED = {**CONV1D, "stride": "1,3", "dilation": "1,4"}


def test_strided_convs_take_pixel_rows_of_channel_vectors():
    op = Conv2d(**STRIDED).root
    config = CONVOLUTION.select(op, TARGET)
    assert config == {
        "OW_TILE": 8,
        "F_TILE": 16,
        "C_TILE": 1,
        "OH_TILE": 1,
        "FLAT_ROWS": 0,
        "PACK_FILTER": 0,
        "IMAGES_OUTER": 0,
    }
    assert CONVOLUTION.violations(op, TARGET, config) == []
    # Unit stride: rows of output channels, each four vectors of the 68 pixels (the tail of
    # 4 split off), NCHW_ACCUMULATORS in all.
    unit_stride = Conv2d(**CONV1D).root
    config = CONVOLUTION.select(unit_stride, TARGET)
    rows = {"OW_TILE": 64, "F_TILE": NCHW_ACCUMULATORS // 4, "C_TILE": 1, "OH_TILE": 1}
    assert config == {**rows, "FLAT_ROWS": 0, "PACK_FILTER": 0, "IMAGES_OUTER": 0}
    assert CONVOLUTION.violations(unit_stride, TARGET, config) == []


def test_strided_tiles_are_checked_as_pixel_rows():
    op = Conv2d(**STRIDED).root
    assert "f_tile_whole_vectors" in CONVOLUTION.violations(
        op, TARGET, {"OW_TILE": 8, "F_TILE": 24, "C_TILE": 1}
    )
    assert "register_budget" in CONVOLUTION.violations(
        op, TARGET, {"OW_TILE": 16, "F_TILE": 64, "C_TILE": 1}
    )


@pytest.mark.jit
@pytest.mark.parametrize(
    "options",
    [
        {},  # 21 output pixels: two tiles of 8 and a partial one
        {"F": 20},  # a partial block of channels, padded
        {"F": 5, "stride": 2},  # fewer channels than a vector
        {"H": 7, "KH": 2, "stride": "2,2", "dilation": "2,1", "padding": "1,2"},
        {"W": 9, "F": 16},  # one tile
        {"C": 4, "F": 17, "W": 33, "KW": 5, "stride": 2, "dtype": "f64"},
    ],
    ids=["kb76", "partial-f", "narrow-f", "2d-padded", "one-tile", "f64"],
)
def test_strided_kernels_match_the_reference(engine, options):
    workload = Conv2d(**{**STRIDED, **options})
    result = engine.execute(workload)
    assert result.verification.ok, result.verification.summary()


@pytest.mark.jit
@pytest.mark.parametrize(
    "parameters",
    [{"OW_TILE": 1, "F_TILE": 16}, {"OW_TILE": 3, "F_TILE": 32}, {"OW_TILE": 16, "F_TILE": 8}],
)
def test_strided_tile_parameters(engine, parameters):
    result = engine.execute(Conv2d(**STRIDED), parameters)
    assert result.verification.ok, result.verification.summary()


@pytest.mark.jit
def test_the_strided_schedule_leaves_no_scalar_loops(engine):
    seen: list[str] = []

    def observer(stage: str, module: ir.Module) -> None:
        if stage.startswith("schedule"):
            module.operation.walk(lambda op: seen.append(op.name) or ir.WalkResult.ADVANCE)

    engine.lower_payload(Conv2d(**{**STRIDED, "F": 20, "padding": 1}), observer=observer)
    assert seen and not [name for name in seen if name.startswith("linalg.")]


@pytest.mark.jit
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs 2 cores")
def test_threads_split_the_images():
    engine = engine_for(HostCPU(threads=2), use_specs=False)
    result = engine.execute(Conv2d(**{**STRIDED, "N": 3}))
    assert result.verification.ok, result.verification.summary()


@pytest.mark.jit
@pytest.mark.parametrize(
    "options",
    [
        {"N": 2, "C": 32, "F": 40, "H": 7, "W": 9, "KH": 3, "KW": 3, "padding": 1},
        {"N": 3, "C": 33, "F": 32, "H": 5, "W": 21, "KH": 2, "KW": 5, "dilation": "1,2"},
    ],
    ids=["partial-f-padded", "dilated"],
)
def test_deep_batched_unit_stride_convs_take_channel_vectors(engine, options):
    workload = Conv2d(layout="nchw", **options)
    assert CONVOLUTION.select(workload.root, TARGET)["F_TILE"] == 16  # one vector of F
    result = engine.execute(workload)
    assert result.verification.ok, result.verification.summary()
    for row_path in ({"N": 1}, {"F": 8}, {"C": 16}):  # one image: threads take images
        root = Conv2d(layout="nchw", **{**options, **row_path}).root
        assert CONVOLUTION.select(root, TARGET)["F_TILE"] <= NCHW_ROWS  # rows of channels


@pytest.mark.jit
def test_a_strided_transposed_convs_phases_keep_the_row_path(engine):
    """Stride along H: one conv per phase in one payload, which the row path schedules."""
    workload = ConvTranspose(N=2, C=32, F=32, H=5, W=9, KH=3, KW=3, stride="2,1")
    assert [root.attributes["convs"] for root in workload.roots] == [2, 2]
    assert CONVOLUTION.select(workload.root, TARGET)["F_TILE"] == NCHW_ROWS
    result = engine.execute(workload)
    assert result.verification.ok, result.verification.summary()


# ResNet-18's 3x3 convs at batch 8, scaled down along H: unit stride (deep, batched) and
# stride 2, each row of 56 or 28 pixels; and one of 14, which four pixels leave a tail of.
RESNET = {"layout": "nchw", "N": 2, "C": 32, "F": 32, "H": 4, "KH": 3, "KW": 3, "padding": 1}


@pytest.mark.jit
@pytest.mark.parametrize(
    ("options", "avx2_tile"),
    [({"W": 56}, (4, 16)), ({"W": 56, "stride": 2}, (4, 16)), ({"W": 14}, (8, 8))],
    ids=["unit-stride", "stride-2", "row-of-14"],
)
def test_sixteen_registers_take_half_the_pixels_in_two_vectors(options, avx2_tile):
    """With AVX2's 16 registers, 4 pixels x 2 vectors of channels where 4 divides the row:
    8 accumulators, as 8 x 1 vector, on fewer loads per FMA; 32 registers keep 8 x 1."""
    workload = Conv2d(**{**RESNET, **options})
    op = workload.root
    for target, tile in ((cpu("avx2"), avx2_tile), (TARGET, (8, 16))):
        config = CONVOLUTION.select(op, target)
        assert (config["OW_TILE"], config["F_TILE"]) == tile
        assert CONVOLUTION.violations(op, target, config) == []
    avx2_config = CONVOLUTION.select(op, cpu("avx2"))
    result = engine_for(HostCPU(), use_specs=False).execute(workload, avx2_config)
    assert result.verification.ok, result.verification.summary()


@pytest.mark.parametrize("name", ["avx2", "avx512"])
def test_images_go_outermost_where_an_image_and_a_filter_block_pass_the_l2(name):
    """ResNet-18's stride-2 3x3 conv to 28 x 28 x 128 at batch 8: the rows one padded image
    gives it (64 x 57 x 58 f32, 826 KiB) and one filter block (36 KiB) pass the Zen 3
    class's 512 KiB L2, not the AVX-512 class's 1 MiB; its 14 x 14 convs keep channel
    blocks outermost (the filter would be packed per image for only 196 pixels), and one
    image has no images to walk."""
    target = cpu(name)
    l2 = target.features.l2_bytes
    stride_2 = Conv2d(**{**RESNET, "N": 8, "C": 64, "F": 128, "H": 56, "W": 56, "stride": 2})
    op = stride_2.root
    # Input rows (28 - 1) x 2 + 3 of the padded row of 58; one F block of the filter.
    image_bytes = 4 * (64 * 57 * 58 + 64 * 3 * 3 * CONVOLUTION.select(op, target)["F_TILE"])
    assert CONVOLUTION.select(op, target)["IMAGES_OUTER"] == int(image_bytes > l2)
    small_planes = Conv2d(**{**RESNET, "N": 8, "C": 256, "F": 256, "H": 14, "W": 14}).root
    assert IMAGES_OUTER_PIXELS > 14 * 14
    assert CONVOLUTION.select(small_planes, target)["IMAGES_OUTER"] == 0
    one_image = Conv2d(**{**RESNET, "N": 1, "C": 64, "F": 128, "H": 56, "W": 56, "stride": 2})
    assert CONVOLUTION.select(one_image.root, target)["IMAGES_OUTER"] == 0
    one_image_config = CONVOLUTION.select(one_image.root, target) | {"IMAGES_OUTER": 1}
    assert CONVOLUTION.violations(one_image.root, target, one_image_config) != []


@pytest.mark.jit
@pytest.mark.parametrize("options", [{"W": 56, "stride": 2}, {"W": 14}], ids=["stride-2", "14"])
def test_images_outermost_verify(options):
    """Walked images outermost, with a partial pixel tile (14 = 8 + 6) too."""
    workload = Conv2d(**{**RESNET, **options})
    config = CONVOLUTION.select(workload.root, cpu("avx2")) | {"IMAGES_OUTER": 1}
    assert CONVOLUTION.violations(workload.root, cpu("avx2"), config) == []
    result = engine_for(HostCPU(), use_specs=False).execute(workload, config)
    assert result.verification.ok, result.verification.summary()
