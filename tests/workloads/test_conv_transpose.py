"""conv_transpose (PyTorch's ConvTranspose2d / 1d, NCHW, weight [C, F, KH, KW]): JIT results
match the float64 reference on regular, odd, single-row and strided / dilated / padded shapes;
the reference matches PyTorch; the stride phases along H; bad options name the option."""

from __future__ import annotations

import numpy as np
import pytest
from mlir import ir

from mlirtune.interfaces.errors import UsageError
from mlirtune.ir.context import new_context
from mlirtune.workloads import workload_class
from mlirtune.workloads.conv_transpose import ConvTranspose

SMALL = {"N": 1, "C": 4, "F": 16, "H": 6, "W": 18, "KH": 3, "KW": 3}


@pytest.mark.jit
@pytest.mark.parametrize(
    "options",
    [
        {},  # every tile full: one conv over the padded input
        {"N": 2, "H": 7, "W": 5, "C": 3, "F": 5, "stride": 2, "padding": 1, "output_padding": 1},
        {"H": 1, "KH": 1, "W": 20, "C": 3, "F": 8},  # conv_transpose1d
        {"H": 1, "KH": 1, "W": 9, "stride": "1,2", "padding": "0,1", "dilation": "1,2"},  # 79
        {"H": 5, "W": 9, "dilation": 2, "F": 11},
        {"KW": 5, "padding": "1,2", "F": 9},  # KernelBench 78, scaled down
        {"H": 4, "W": 6, "stride": 5, "padding": 1, "dilation": 2},  # 81: zero phases
        {"H": 5, "W": 7, "KH": 3, "KW": 5, "stride": "2,3", "padding": "1,2", "dilation": "2,1"},
        {"H": 5, "W": 6, "stride": 2, "padding": 3},  # more padding than the kernel spans
        {"H": 4, "W": 4, "KH": 2, "KW": 2, "padding": 2, "dilation": 3, "output_padding": 2},
        {"H": 2, "W": 3, "KH": 5, "KW": 4},  # a kernel larger than the input
        {"H": 6, "W": 1, "KW": 1, "F": 3},  # a single output column
        # The only output row is output_padding: every phase is a zero one.
        {"H": 1, "KH": 1, "W": 4, "KW": 2, "stride": "3,1", "padding": "1,0",
         "output_padding": "2,0"},
        {"N": 2, "C": 5, "F": 7, "stride": 3, "padding": "2,1", "dtype": "f64"},
    ],
)  # fmt: skip
def test_matches_reference(engine, options):
    result = engine.execute(ConvTranspose(**{**SMALL, **options}))
    assert result.verification.ok, result.verification.summary()


@pytest.mark.jit
@pytest.mark.parametrize(
    "params",
    [{"OW_TILE": 32, "F_TILE": 3}, {"OW_TILE": 16, "F_TILE": 16}, {"OW_TILE": 64, "F_TILE": 5}],
)
def test_schedule_parameters(engine, params):
    w = ConvTranspose(**{**SMALL, "H": 5, "W": 13, "F": 13, "stride": 2, "padding": 1})
    result = engine.execute(w, params)
    assert result.verification.ok, result.verification.summary()


def settings(w: ConvTranspose) -> dict[str, tuple[int, ...]]:
    """F.conv_transpose2d's keyword arguments for `w`."""
    names = {"stride": "stride", "padding": "padding", "output_padding": "extra"}
    names["dilation"] = "dilation"
    return {key: tuple(getattr(a, name) for a in w.axes) for key, name in names.items()}


@pytest.mark.parametrize(
    "options",
    [
        {"stride": 2, "padding": 1, "output_padding": 1},
        {"KW": 5, "stride": "5,3", "padding": "1,2", "dilation": "2,1"},
        {"stride": 1, "padding": 2, "dilation": 3, "output_padding": 2},  # op < dilation
        {"H": 1, "KH": 1, "stride": "1,2", "padding": "0,1", "dilation": "1,2"},
    ],
)
def test_reference_against_torch(options):
    torch = pytest.importorskip("torch")
    w = ConvTranspose(**{**SMALL, **options})
    image, weight = (torch.from_numpy(x.astype(np.float64)) for x in w.inputs)
    expected = torch.nn.functional.conv_transpose2d(image, weight, **settings(w)).numpy()
    np.testing.assert_allclose(w.reference_outputs[0], expected, rtol=1e-10, atol=1e-12)
    baseline = w.torch_baseline()().numpy().reshape(expected.shape)  # 1-D: [N, F, OW]
    np.testing.assert_allclose(baseline, expected, rtol=1e-4, atol=1e-5)


def test_phases_of_a_strided_dilated_filter():
    # Output row o = 5*i + 2*k - 1 (stride 5, dilation 2, padding 1): taps 0, 1, 2 reach the
    # phases 4, 1 and 3; phases 0 and 2 are zeros.
    w = ConvTranspose(**{**SMALL, "H": 4, "stride": 5, "padding": 1, "dilation": 2})
    phases = {p.row: p for p in w.phases}
    assert sorted(phases) == [0, 1, 2, 3, 4] and w.output[0] == 3 * 5 - 2 + 4 + 1
    assert [p.row for p in w.phases[:3]] == [1, 3, 4]  # phases with taps first
    assert {r: p.taps for r, p in phases.items()} == {0: 0, 1: 1, 2: 0, 3: 1, 4: 1}
    # Flipped filter row = KH-1-k: phase 4 takes k = 0, phase 1 k = 1, phase 3 k = 2.
    assert {r: phases[r].first_tap for r in (1, 3, 4)} == {1: 1, 3: 0, 4: 2}
    assert [phases[r].rows for r in range(5)] == [4, 4, 4, 3, 3]
    with new_context(), ir.Location.unknown():
        text = str(w.payload_module())
    assert text.count("linalg.conv_2d_nchw_fchw") == 5
    root = w.root
    assert root.kind == "conv2d" and root.op_name == "linalg.conv_2d_nchw_fchw"
    assert root.dims["OW"] == w.output[1] and root.dims["F"] == 16 and root.dims["KH"] == 1


def test_unit_stride_is_one_padded_conv():
    w = ConvTranspose(**{**SMALL, "KW": 5, "padding": "1,2"})
    assert w.output == (6 + 2 - 2, 18 + 4 - 4)
    with new_context(), ir.Location.unknown():
        text = str(w.payload_module())
    assert text.count("linalg.conv_2d_nchw_fchw") == 1 and "linalg.generic" not in text
    assert text.count("tensor.pad") == 1 and "tensor.generate" in text  # the flipped filter
    root = w.root
    assert root.attributes["padded"] == 1 and root.attributes["pad"] == 2
    assert root.dims == {"N": 1, "OH": 6, "OW": 18, "F": 16, "KH": 3, "KW": 5, "C": 4}


@pytest.mark.jit
def test_strided_schedule_is_vectorized(engine):
    scheduled = []

    def observe(stage, module):
        if stage.startswith("schedule"):
            module.operation.walk(lambda op: scheduled.append(op.name) or ir.WalkResult.ADVANCE)

    w = ConvTranspose(**{**SMALL, "H": 4, "W": 7, "stride": 5, "padding": 1, "dilation": 2})
    engine.lower_payload(w, observer=observe)
    assert scheduled and not [name for name in scheduled if name.startswith("linalg.")]


def test_shapes_complexity_and_options():
    w = ConvTranspose(**{**SMALL, "stride": "2", "padding": "1,0", "output_padding": "1"})
    oh, ow = (6 - 1) * 2 - 2 + 2 + 1 + 1, (18 - 1) * 2 + 2 + 1 + 1
    assert [a.shape for a in w.arguments()] == [(1, 4, 6, 18), (4, 16, 3, 3), (1, 16, oh, ow)]
    assert (w.options["stride"], w.options["padding"], w.options["dilation"]) == (
        "2,2",
        "1,0",
        "1,1",
    )
    assert w.get_complexity().flops == 2 * 1 * 6 * 18 * 4 * 16 * 3 * 3
    assert w.accumulation_length() == 4 * 3 * 3
    assert workload_class("conv_transpose") is ConvTranspose


@pytest.mark.parametrize(
    ("options", "key"),
    [
        ({"stride": -1}, "stride"),
        ({"stride": 0}, "stride"),
        ({"stride": "1,2,3"}, "stride"),
        ({"padding": "1,x"}, "padding"),
        ({"dilation": "0,1"}, "dilation"),
        ({"output_padding": -1}, "output_padding"),
        ({"stride": 2, "output_padding": 2}, "output_padding"),  # not below the stride
        ({"output_padding": "0,1"}, "output_padding"),  # stride 1, dilation 1
        ({"H": 1, "KH": 1, "padding": 1}, "padding"),  # an empty output
        ({"H": 2, "KH": 2, "W": 2, "KW": 2, "padding": "1,2"}, "padding"),
        ({"KH": 0}, "KH"),
        ({"C": 0}, "C"),
    ],
)
def test_bad_options(options, key):
    with pytest.raises(UsageError, match=rf"conv_transpose: .*{key}"):
        ConvTranspose(**{**SMALL, **options})


def test_cli_strings():
    w = ConvTranspose.from_strings({"stride": "2", "padding": "1,2", "H": "9", "dilation": "2"})
    assert [a.stride for a in w.axes] == [2, 2] and [a.padding for a in w.axes] == [1, 2]
    assert w.options["stride"] == "2,2" and w.options["H"] == 9
