"""Pointwise NCHW convolutions become matmuls on reshaped views (mlirtune.ir.pointwise):
which convs qualify, that the rewritten payload is a matmul root scheduled by the contraction
family, and that it still computes the convolution."""

from __future__ import annotations

import pytest

from mlirtune.workloads.conv2d import Conv2d

POINTWISE = {"KH": 1, "KW": 1}


def test_pointwise_convs_are_matmul_roots():
    w = Conv2d(**POINTWISE, layout="nchw", H=5, W=3, C=7, F=9)
    root = w.root
    assert (root.kind, root.op_name) == ("matmul", "linalg.matmul")
    assert root.dims == {"M": 9, "N": 15, "K": 7}  # F x (H*W) x C
    assert root.attributes["reshaped_output"] == 1
    assert w.descriptor_name == "matmul"


@pytest.mark.parametrize(
    "options",
    [
        {"N": 2},  # one channel's pixels are not one row across images
        {"stride": 2},
        {"padding": 1},
        {"KH": 3, "KW": 3},
        {"KH": 1, "KW": 3},
        {"layout": "nhwc"},  # the NHWC conv path measured faster
    ],
    ids=["batch", "strided", "padded", "3x3", "1x3", "nhwc"],
)
def test_other_convs_stay_convs(options):
    w = Conv2d(**{"H": 6, "W": 6, "C": 4, "F": 8, "layout": "nchw", **POINTWISE, **options})
    assert w.root.kind == "conv2d"
    assert w.descriptor_name == "conv2d"


@pytest.mark.jit
@pytest.mark.parametrize(
    "options",
    [
        {"H": 5, "W": 3, "C": 7, "F": 9},
        {"H": 14, "W": 14, "C": 64, "F": 48},
        {"H": 7, "W": 7, "C": 64, "F": 40},  # 49 pixels: partial tiles
        {"H": 1, "W": 1, "C": 3, "F": 5, "dtype": "f64"},
    ],
)
def test_pointwise_convs_verify(engine, options):
    result = engine.execute(Conv2d(**POINTWISE, layout="nchw", **options))
    assert result.verification.ok, result.verification.summary()
    assert result.extra["pipeline"].endswith("matmul.yaml")
