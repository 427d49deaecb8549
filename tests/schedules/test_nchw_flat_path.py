"""The convolution family's flat-row NCHW path (FLAT_ROWS=1: convolution/flat_conv.py rewrites
the conv, nchw_flat.py schedules it): results against the float64 reference on partial
tiles, padding, dilation, batches and planes narrower than a vector; the rewritten payload;
the selector's choice and the constraints; a conv the rewrite cannot take. Nothing is
timed."""

from __future__ import annotations

import os

import pytest
from mlir import ir

from mlirtune.api import engine_for
from mlirtune.interfaces.errors import MlirtuneError
from mlirtune.ir.context import new_context
from mlirtune.ir.inspect import largest_vector
from mlirtune.schedules.convolution import CONVOLUTION, channel_rows_config
from mlirtune.schedules.convolution.flat_conv import (
    FLAT_CROP_ATTRIBUTE,
    FLAT_ROWS_ATTRIBUTE,
    flat_length,
    flatten_conv_rows,
)
from mlirtune.schedules.roots import annotate_roots
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.workloads.conv2d import Conv2d
from mlirtune.workloads.conv_transpose import ConvTranspose
from tests.targets.test_targets_host import AVX512

TARGET = HostCPU(AVX512)
RESNET = {"layout": "nchw", "N": 1, "C": 64, "F": 64, "H": 56, "W": 56, "KH": 3, "KW": 3}
SMALL = {"layout": "nchw", "N": 1, "C": 4, "F": 12, "H": 10, "W": 18, "KH": 3, "KW": 3}


def flat_config(workload, target: HostCPU) -> dict:
    """The selector's config on the flat path's own register tile (the row path's may not
    fit a flat row's registers: AVX2's 16 hold no 6 x 4 vectors)."""
    flat = channel_rows_config(workload.root, target, flat=True)
    return {**CONVOLUTION.select(workload.root, target), **flat}


def test_flat_length_ends_at_the_last_rows_last_pixel():
    assert flat_length(56, 56, 58) == 55 * 58 + 56


@pytest.mark.jit
@pytest.mark.parametrize(
    "options",
    [
        {"padding": 1},  # 12 channels: a partial F tile of the selector's 6 or 8
        {"padding": 1, "F": 16},  # 198 pixels: the plane's tail in power-of-two pieces
        {"N": 2, "C": 3, "F": 5, "H": 9, "W": 13, "padding": "1,2"},
        {"H": 12, "W": 12, "dilation": "2,3"},  # unpadded, dilated
        {"H": 5, "W": 5, "KH": 2, "KW": 4, "padding": 1},  # planes narrower than a vector
        {"H": 3, "W": 20},  # one output row
        {"dtype": "f64", "padding": 1},
    ],
)  # fmt: skip
def test_flat_rows_match_the_reference(engine, options):
    workload = Conv2d(**{**SMALL, **options})
    config = flat_config(workload, engine.target)
    assert CONVOLUTION.violations(workload.root, engine.target, config) == []
    result = engine.execute(workload, config)
    assert result.verification.ok, result.verification.summary()


@pytest.mark.jit
def test_the_conv_becomes_a_generic_over_flat_planes_and_is_vectorized(engine):
    """After the rewrite, a linalg.generic reads the input plane at p + dh*IW*kh + dw*kw
    and a copy crops the planes; after the schedule no linalg op is left, and no vector is
    larger than a register tile."""
    workload = Conv2d(**{**SMALL, "padding": 1})
    config = flat_config(workload, engine.target)
    left: list[str] = []
    largest: list[int] = []

    def observe(stage, module):
        if stage.startswith("schedule"):
            module.operation.walk(lambda op: left.append(op.name) or ir.WalkResult.ADVANCE)
            largest.append(largest_vector(module))

    engine.lower_payload(workload, config, observer=observe)
    assert largest and not [name for name in left if name.startswith("linalg.")]
    assert max(largest) <= 8 * 64


def test_rewrite_builds_the_flat_generic_and_the_crop():
    with new_context(), ir.Location.unknown():
        workload = Conv2d(**{**SMALL, "padding": 1, "dilation": "2,1"})
        module = workload.payload_module()
        annotate_roots(module)
        flatten_conv_rows(module)
        ops: dict[str, ir.Operation] = {}
        module.operation.walk(lambda op: ops.setdefault(op.name, op) and ir.WalkResult.ADVANCE)
        assert "linalg.conv_2d_nchw_fchw" not in ops
        flat, crop = ops["linalg.generic"], ops["linalg.copy"]
        assert FLAT_ROWS_ATTRIBUTE in flat.attributes and FLAT_CROP_ATTRIBUTE in crop.attributes
        image_map = ir.AffineMapAttr(ir.ArrayAttr(flat.attributes["indexing_maps"])[0]).value
        in_w = 18 + 2  # the padded input row
        assert str(image_map) == f"(d0, d1, d2, d3, d4, d5) -> (d0, d3, d2 + d4 * {2 * in_w} + d5)"


def test_selector_takes_flat_rows_where_a_row_ends_in_a_partial_vector_and_they_cost_less():
    resnet = Conv2d(**RESNET, padding=1).root
    config = CONVOLUTION.select(resnet, TARGET)
    assert config == {
        "OW_TILE": 64,
        "F_TILE": 6,
        "C_TILE": 1,
        "OH_TILE": 1,
        "FLAT_ROWS": 1,
        "PACK_FILTER": 0,
        "IMAGES_OUTER": 0,
    }
    assert CONVOLUTION.violations(resnet, TARGET, config) == []
    whole_vectors = Conv2d(**{**RESNET, "H": 64, "W": 64}, padding=1).root
    assert CONVOLUTION.select(whole_vectors, TARGET)["FLAT_ROWS"] == 0
    one_row = Conv2d(**{**RESNET, "H": 3, "W": 58}).root
    assert CONVOLUTION.select(one_row, TARGET)["FLAT_ROWS"] == 0
    # KernelBench 63: large planes of three channels, where the crop's output traffic costs
    # more than the row tails (measured 5.1 ms by rows against 6.7 flat at N=2)
    few_channels = Conv2d(**{**RESNET, "N": 16, "C": 3, "H": 256, "W": 256}).root
    assert CONVOLUTION.select(few_channels, TARGET)["FLAT_ROWS"] == 0
    strided = Conv2d(**RESNET, padding=1, stride=2).root
    assert CONVOLUTION.domains(strided, TARGET)["FLAT_ROWS"] == (0,)


def test_flat_rows_constraints():
    resnet = Conv2d(**RESNET, padding=1).root
    flat = CONVOLUTION.select(resnet, TARGET)
    assert "flat_rows_one_row" in CONVOLUTION.violations(resnet, TARGET, {**flat, "OH_TILE": 2})
    rows = {**flat, "FLAT_ROWS": 0}
    assert "ow_tile_within_row" in CONVOLUTION.violations(resnet, TARGET, rows)
    threads = HostCPU(AVX512, threads=2)
    assert CONVOLUTION.select(resnet, threads)["FLAT_ROWS"] == 1
    assert CONVOLUTION.violations(resnet, threads, flat) == []  # 64 channels, 32 a thread
    odd = Conv2d(**{**RESNET, "F": 63}, padding=1).root
    assert "flat_rows_split_channels" in CONVOLUTION.violations(odd, threads, flat)
    assert CONVOLUTION.select(odd, threads)["FLAT_ROWS"] == 0  # the selector keeps to them


@pytest.mark.jit
def test_flat_rows_on_a_strided_conv_is_an_error_naming_why(engine):
    workload = Conv2d(**{**SMALL, "stride": 2, "padding": 1})
    config = {**CONVOLUTION.select(workload.root, engine.target), "FLAT_ROWS": 1}
    with pytest.raises(MlirtuneError, match="FLAT_ROWS"):
        engine.compile(workload, config)


@pytest.mark.jit
def test_a_stride_one_transposed_conv_takes_flat_rows_too(engine):
    """conv_transpose's stride-1 conv: its pipeline runs the rewrite before the schedule."""
    workload = ConvTranspose(N=1, C=16, F=16, H=26, W=26, KH=3, KW=3)
    assert CONVOLUTION.select(workload.root, TARGET)["FLAT_ROWS"] == 1  # 28 = 16 + 12
    result = engine.execute(workload, flat_config(workload, engine.target))
    assert result.verification.ok, result.verification.summary()


@pytest.mark.jit
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs 2 cores")
def test_threads_split_the_channels_of_flat_rows():
    engine = engine_for(HostCPU(threads=2), use_specs=False)
    workload = Conv2d(**{**SMALL, "F": 20, "padding": 1})  # 10 channels a thread
    config = flat_config(workload, engine.target)
    assert CONVOLUTION.violations(workload.root, engine.target, config) == []
    result = engine.execute(workload, config)
    assert result.verification.ok, result.verification.summary()
