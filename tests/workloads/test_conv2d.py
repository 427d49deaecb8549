"""conv2d: JIT results match numpy for strides, dilations and partial tiles; the default
schedule is vectorized; wrong references and bad options are caught."""

from __future__ import annotations

import numpy as np
import pytest
from mlir import ir

from mlirtune.interfaces.errors import UsageError
from mlirtune.schedules.convolution import CONVOLUTION
from mlirtune.workloads.conv2d import Conv2d
from tests.payloads import build_schedule

SMALL = {"N": 1, "H": 10, "W": 10, "C": 4, "F": 32, "KH": 3, "KW": 3}


@pytest.mark.jit
@pytest.mark.parametrize(
    "options",
    [
        SMALL,  # every tile full
        {"N": 2, "H": 9, "W": 13, "C": 5, "F": 40, "KH": 3, "KW": 2},  # partial OW, F tiles
        {"N": 1, "H": 11, "W": 12, "C": 3, "F": 16, "KH": 3, "KW": 3, "stride": 2},
        {"N": 1, "H": 12, "W": 12, "C": 3, "F": 8, "KH": 3, "KW": 3, "dilation": 2},
        {"N": 1, "H": 20, "W": 20, "C": 8, "F": 64, "KH": 5, "KW": 5, "stride": 3},
        {"N": 1, "H": 5, "W": 5, "C": 2, "F": 3, "KH": 1, "KW": 1},
        {"N": 1, "H": 4, "W": 4, "C": 1, "F": 1, "KH": 4, "KW": 4},  # a single output
        {"N": 2, "H": 15, "W": 17, "C": 6, "F": 33, "KH": 3, "KW": 3, "stride": 2,
         "dilation": 2, "dtype": "f64"},
        {"N": 1, "H": 9, "W": 9, "C": 8, "F": 16, "KH": 3, "KW": 3, "padding": 1},
        {"N": 2, "H": 15, "W": 13, "C": 3, "F": 7, "KH": 7, "KW": 5, "stride": 2,
         "padding": "3,2"},  # a stem-like conv: odd channels, partial tiles
        {"N": 1, "H": 1, "W": 6, "C": 5, "F": 4, "KH": 3, "KW": 3, "padding": 1},  # one row
    ],
)  # fmt: skip
def test_matches_reference(engine, options):
    result = engine.execute(Conv2d(**options))
    assert result.verification.ok, result.verification.summary()


@pytest.mark.jit
@pytest.mark.parametrize(
    "params",
    [
        {"C_TILE": 3},  # partial channel tile
        {"OW_TILE": 5, "F_TILE": 16, "C_TILE": 2},
        {"OW_TILE": 1, "F_TILE": 1},
        {"OW_TILE": 100, "F_TILE": 100, "C_TILE": 100},  # clamped to the dims
    ],
)
def test_schedule_parameters(engine, params):
    w = Conv2d(N=1, H=11, W=12, C=7, F=17, KH=3, KW=3, stride=2)
    result = engine.execute(w, params)
    assert result.verification.ok, result.verification.summary()


def _op_names(module: ir.Module) -> list[str]:
    names = []

    def visit(op):
        names.append(op.name)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return names


@pytest.mark.jit
@pytest.mark.parametrize("options", [SMALL, {**SMALL, "W": 13, "F": 40, "stride": 2}])
def test_default_schedule_is_vectorized(engine, options):
    scheduled = []

    def observe(stage, module):
        if stage.startswith("schedule"):
            scheduled.extend(_op_names(module))

    engine.lower_payload(Conv2d(**options), observer=observe)
    assert not [name for name in scheduled if name.startswith("linalg.")]
    assert "vector.fma" in scheduled


def test_default_parameters_follow_dtype():
    assert CONVOLUTION.defaults(Conv2d(dtype="f32").root)["F_TILE"] == 32
    assert CONVOLUTION.defaults(Conv2d(dtype="f64").root)["F_TILE"] == 16


@pytest.mark.jit
def test_wrong_reference_is_detected(engine):
    w = Conv2d(**SMALL)
    wrong = w.reference_outputs[0].copy()
    wrong[0, 2, 3, 4] += 0.5
    w.__dict__["reference_outputs"] = [wrong]
    assert not engine.execute(w).verification.ok


def test_reference_against_direct_sum():
    w = Conv2d(N=1, H=7, W=8, C=2, F=3, KH=2, KW=3, stride=2, dilation=2, seed=5)
    image, kernel = (x.astype(np.float64) for x in w.inputs)
    (out,) = w.reference_outputs
    assert out.shape == (1, 3, 2, 3)  # OH = (7 - 2*1 - 1)//2 + 1, OW = (8 - 2*2 - 1)//2 + 1
    for oh, ow, f in np.ndindex(3, 2, 3):
        total = sum(
            image[0, oh * 2 + kh * 2, ow * 2 + kw * 2, c] * kernel[kh, kw, c, f]
            for kh in range(2)
            for kw in range(3)
            for c in range(2)
        )
        assert out[0, oh, ow, f] == pytest.approx(total)


def test_shapes_and_complexity():
    w = Conv2d(N=2, H=11, W=13, C=3, F=5, KH=3, KW=2, stride=2, dilation=1)
    oh, ow = (11 - 3) // 2 + 1, (13 - 2) // 2 + 1
    assert w.output_hw == (oh, ow)
    assert [(a.name, a.shape, a.is_output) for a in w.arguments()] == [
        ("I", (2, 11, 13, 3), False),
        ("K", (3, 2, 3, 5), False),
        ("O", (2, oh, ow, 5), True),
    ]
    complexity = w.get_complexity()
    assert complexity.flops == 2 * 2 * oh * ow * 5 * 3 * 2 * 3
    assert complexity.bytes_read == (2 * 11 * 13 * 3 + 3 * 2 * 3 * 5) * 4
    assert complexity.bytes_written == 2 * oh * ow * 5 * 4
    assert w.accumulation_length() == 3 * 2 * 3


def test_dilated_output_size():
    w = Conv2d(N=1, H=9, W=10, C=1, F=1, KH=3, KW=3, stride=1, dilation=3)
    assert w.output_hw == (9 - 3 * 2 - 1 + 1, 10 - 3 * 2 - 1 + 1)


@pytest.mark.parametrize(
    "options",
    [
        {"stride": 0},
        {"dilation": -1},
        {"KH": 0},
        {"C": 1.5},
        {"dtype": "bf16"},
    ],
)
def test_bad_options(options):
    with pytest.raises(UsageError):
        Conv2d(**options)


@pytest.mark.parametrize(
    "options",
    [
        {"H": 2, "W": 8, "KH": 3, "KW": 3},
        {"H": 8, "W": 8, "KH": 3, "KW": 3, "dilation": 4},
    ],
)
def test_empty_output_is_rejected(options):
    with pytest.raises(UsageError, match="dilation"):
        Conv2d(**options)


def test_bad_strings_and_schedule_parameters():
    with pytest.raises(UsageError, match="stride"):
        Conv2d.from_strings({"stride": "2x"})
    with pytest.raises(UsageError, match="OW_TILE"):
        build_schedule(Conv2d(**SMALL), {"OW_TILE": 0})


def test_padding_matches_torch_and_marks_the_root():
    torch = pytest.importorskip("torch")
    w = Conv2d(N=1, H=9, W=8, C=3, F=5, KH=3, KW=3, padding="1,2", stride=2)
    image, kernel = (torch.from_numpy(x.astype(np.float64)) for x in w.inputs)
    expected = torch.nn.functional.conv2d(
        image.permute(0, 3, 1, 2), kernel.permute(3, 2, 0, 1), stride=2, padding=(1, 2)
    ).permute(0, 2, 3, 1)
    np.testing.assert_allclose(w.reference_outputs[0], expected.numpy(), rtol=1e-10, atol=1e-12)
    baseline = w.torch_baseline()().permute(0, 2, 3, 1).numpy()
    np.testing.assert_allclose(baseline, expected.numpy(), rtol=1e-4, atol=1e-5)
    assert w.root.attributes.get("padded") == 1
    assert "padded" not in Conv2d(**SMALL).root.attributes
