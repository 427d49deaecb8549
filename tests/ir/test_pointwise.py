"""Pointwise convolutions become matmuls on reshaped views (mlirtune.ir.pointwise): which
convs qualify, that the rewritten payload is a matmul root scheduled by the contraction
family, and that it still computes the convolution."""

from __future__ import annotations

import pytest

from mlirtune.workloads.conv2d import Conv2d

POINTWISE = {"KH": 1, "KW": 1}


@pytest.mark.parametrize(
    ("options", "dims"),
    [
        ({"N": 2, "H": 5, "W": 3, "C": 7, "F": 9}, {"M": 30, "N": 9, "K": 7}),  # NHWC, 2 images
        ({"layout": "nchw", "H": 5, "W": 3, "C": 7, "F": 9}, {"M": 9, "N": 15, "K": 7}),
    ],
    ids=["nhwc", "nchw"],
)
def test_pointwise_convs_are_matmul_roots(options, dims):
    w = Conv2d(**POINTWISE, **options)
    root = w.root
    assert (root.kind, root.op_name, root.dims) == ("matmul", "linalg.matmul", dims)
    assert root.attributes["reshaped_output"] == 1
    assert w.descriptor_name == "matmul"


@pytest.mark.parametrize(
    "options",
    [
        {"layout": "nchw", "N": 2},  # NCHW pixels of one channel are not one row across images
        {"stride": 2},
        {"layout": "nchw", "padding": 1},
        {"KH": 3, "KW": 3},
        {"KH": 1, "KW": 3},
    ],
    ids=["nchw-batch", "strided", "padded", "3x3", "1x3"],
)
def test_other_convs_stay_convs(options):
    w = Conv2d(**{"H": 6, "W": 6, "C": 4, "F": 8, **POINTWISE, **options})
    assert w.root.kind == "conv2d"
    assert w.descriptor_name == "conv2d"


@pytest.mark.jit
@pytest.mark.parametrize(
    "options",
    [
        {"N": 2, "H": 5, "W": 3, "C": 7, "F": 9},
        {"N": 1, "H": 14, "W": 14, "C": 64, "F": 48},
        {"layout": "nchw", "H": 7, "W": 7, "C": 64, "F": 40},  # 49 pixels: partial tiles
        {"layout": "nchw", "H": 1, "W": 1, "C": 3, "F": 5, "dtype": "f64"},
    ],
)
def test_pointwise_convs_verify(engine, options):
    result = engine.execute(Conv2d(**POINTWISE, **options))
    assert result.verification.ok, result.verification.summary()
    assert result.extra["pipeline"].endswith("matmul.yaml")
