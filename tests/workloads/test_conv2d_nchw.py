"""conv2d layout=nchw (PyTorch's NCHW / FCHW): JIT results match numpy for strides,
dilations, zero padding, odd and asymmetric shapes and H=1 conv1d; per-dim stride/dilation
strings; bad options name the option; the unit-stride schedule is vectorized, its row tail
in pieces of whole vectors."""

from __future__ import annotations

import numpy as np
import pytest
from mlir import ir

from mlirtune.engine import MlirJitEngine
from mlirtune.interfaces.errors import MlirtuneError, UsageError
from mlirtune.ir.inspect import largest_vector
from mlirtune.schedules.convolution import CONVOLUTION, channel_rows_config
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.workloads.conv2d import Conv2d
from tests.targets.test_targets_host import AVX512

SMALL = {"N": 1, "H": 10, "W": 18, "C": 4, "F": 16, "KH": 3, "KW": 3, "layout": "nchw"}


@pytest.mark.jit
@pytest.mark.parametrize(
    "options",
    [
        {},  # every tile full
        {"N": 2, "H": 7, "W": 100, "C": 5, "F": 11},  # odd: partial OW and F tiles
        {"C": 3, "F": 8, "H": 11, "W": 12, "stride": 2},
        {"C": 3, "F": 8, "H": 12, "W": 12, "dilation": 2},
        {"padding": 1},
        {"padding": "1,2", "KH": 3, "KW": 5},  # asymmetric padding and kernel
        {"KW": 5, "padding": "1,2", "dilation": "2,1"},  # KernelBench 80, scaled down
        {"stride": "1,2", "dilation": "2,1", "padding": "2,0", "F": 5},
        {"KH": 1, "KW": 1, "C": 3},  # pointwise
        {"H": 1, "KH": 1, "W": 40, "C": 3, "F": 8},  # conv1d
        {"H": 1, "KH": 1, "W": 30, "C": 3, "F": 8, "stride": 3, "dilation": 4},
        {"H": 5, "W": 1, "KW": 1, "C": 2, "F": 3},  # single output column
        {"N": 1, "H": 4, "W": 4, "C": 1, "F": 1, "KH": 4, "KW": 4},  # a single output
        {"N": 2, "H": 9, "W": 13, "C": 6, "F": 17, "stride": 2, "padding": 1, "dtype": "f64"},
    ],
)  # fmt: skip
def test_matches_reference(engine, options):
    result = engine.execute(Conv2d(**{**SMALL, **options}))
    assert result.verification.ok, result.verification.summary()


@pytest.mark.jit
@pytest.mark.parametrize(
    "params",
    [{"OW_TILE": 32, "F_TILE": 4}, {"OW_TILE": 5, "F_TILE": 3}, {"OW_TILE": 100, "F_TILE": 100}],
)
def test_schedule_parameters(engine, params):
    result = engine.execute(Conv2d(**{**SMALL, "W": 40, "F": 13, "padding": 1}), params)
    assert result.verification.ok, result.verification.summary()


def test_reference_against_torch():
    torch = pytest.importorskip("torch")
    w = Conv2d(**{**SMALL, "KW": 5, "padding": "1,2", "dilation": "2,1", "stride": "1,2"})
    expected = torch.nn.functional.conv2d(
        *(torch.from_numpy(x.astype(np.float64)) for x in w.inputs),
        stride=(1, 2),
        padding=(1, 2),
        dilation=(2, 1),
    )
    np.testing.assert_allclose(w.reference_outputs[0], expected.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(w.torch_baseline()().numpy(), expected.numpy(), rtol=1e-4, atol=1e-5)


def test_shapes_options_and_root():
    w = Conv2d(**{**SMALL, "padding": "1,2", "stride": "2,2", "dilation": "1,2"})
    oh, ow = (10 + 2 - 3) // 2 + 1, (18 + 4 - 2 * 2 - 1) // 2 + 1
    assert w.output_hw == (oh, ow)
    assert [a.shape for a in w.arguments()] == [(1, 4, 10, 18), (16, 4, 3, 3), (1, 16, oh, ow)]
    assert (w.options["stride"], w.options["dilation"], w.options["padding"]) == (2, "1,2", "1,2")
    root = w.root
    assert root.op_name == "linalg.conv_2d_nchw_fchw"
    assert root.dims == {"N": 1, "OH": oh, "OW": ow, "F": 16, "KH": 3, "KW": 3, "C": 4}
    assert root.attributes["nchw"] == 1 and root.attributes["pad"] == 2
    assert root.attributes["IW"] == 18 + 4
    # Strided along W: one 64-byte vector of output channels (nchw_strided.py); unit
    # stride: NCHW_ROWS register rows of channels.
    assert CONVOLUTION.defaults(root)["F_TILE"] == 16
    assert CONVOLUTION.defaults(Conv2d(**SMALL).root)["F_TILE"] == 8


@pytest.mark.jit
def test_unit_stride_schedule_is_vectorized(engine):
    scheduled = []

    def observe(stage, module):
        if stage.startswith("schedule"):
            module.operation.walk(lambda op: scheduled.append(op.name) or ir.WalkResult.ADVANCE)

    engine.lower_payload(Conv2d(**{**SMALL, "padding": 1}), observer=observe)
    assert not [name for name in scheduled if name.startswith("linalg.")]


@pytest.mark.jit
def test_a_row_tail_is_split_into_power_of_two_pieces(engine):
    """56 output pixels computed row by row (FLAT_ROWS=0): on AVX-512, 32-wide tiles whose
    24-pixel tail runs as 16 + 8, each row of multiply-adds whole vectors (no 24-wide row
    for LLVM to break into lane inserts), which may fuse into FMAs; results match the
    reference."""
    workload = Conv2d(**{**SMALL, "H": 8, "W": 58, "F": 12})
    config = channel_rows_config(workload.root, engine.target, flat=False)
    ow_tile = config["OW_TILE"]
    rows: set[int] = set()
    contract: list[bool] = []

    def observe(stage, module):
        def visit(op):
            if op.name in ("arith.mulf", "arith.addf"):
                contract.append("contract" in str(op.attributes["fastmath"]))
                rows.add(ir.VectorType(op.results[0].type).shape[-1])
            return ir.WalkResult.ADVANCE

        if stage.startswith("schedule"):
            module.operation.walk(visit)

    engine.lower_payload(workload, config, observer=observe)
    assert rows and all(width & (width - 1) == 0 for width in rows)  # powers of two
    assert ow_tile in rows and (56 % ow_tile == 0 or len(rows) > 1)
    if ow_tile == 32:
        assert rows == {32, 16, 8}
    assert contract and all(contract)
    result = engine.execute(workload, config)
    assert result.verification.ok, result.verification.summary()


@pytest.mark.parametrize(
    ("options", "key"),
    [
        ({"padding": -1}, "padding"),
        ({"padding": "1,x"}, "padding"),
        ({"stride": "1,2,3"}, "stride"),
        ({"dilation": "0,1"}, "dilation"),
        ({"layout": "nhcw"}, "layout"),
        ({"H": 2, "KH": 5, "padding": 1}, "padding"),  # window larger than the padded input
    ],
)
def test_bad_options(options, key):
    with pytest.raises(UsageError, match=key):
        Conv2d(**{**SMALL, **options})


def test_cli_strings():
    w = Conv2d.from_strings({"layout": "nchw", "stride": "2", "padding": "1,2", "H": "9"})
    assert w.stride == (2, 2) and w.padding == (1, 2) and w.options["stride"] == 2


@pytest.mark.jit
def test_strided_schedule_packs_the_filter_a_channel_at_a_time(engine):
    """A deep strided conv: the filter's packing must not become one vector of the whole
    C x KH x KW x F_TILE block (at C=256, LLVM did not finish lowering it)."""
    largest = []

    def observe(stage, module):
        if stage.startswith("schedule"):
            largest.append(largest_vector(module))

    w = Conv2d(**{**SMALL, "C": 64, "F": 32, "H": 9, "W": 9, "stride": 2, "padding": 1})
    engine.lower_payload(w, observer=observe)
    assert largest and max(largest) <= 3 * 3 * 16


def test_two_output_rows_share_each_broadcast_where_the_registers_and_rows_allow():
    """A 3x3 conv of 48-pixel rows: 32-wide rows (two vectors) of 6 channels over two output
    rows, 24 accumulators; AVX2's 16 registers take one row of two vectors; a tile of 4
    vectors keeps one row; OH_TILE must divide OH and every row's accumulators must fit the
    registers. (Rows ending in a partial vector are flat rows, tests/schedules/
    test_nchw_flat_path.py.)"""
    target = HostCPU(AVX512)
    rows = Conv2d(layout="nchw", N=1, C=64, F=64, H=56, W=48, KH=3, KW=3, padding=1).root
    config = CONVOLUTION.select(rows, target)
    rows_of = {"C_TILE": 1, "FLAT_ROWS": 0, "PACK_FILTER": 0, "IMAGES_OUTER": 0}
    assert config == {"OW_TILE": 32, "F_TILE": 6, "OH_TILE": 2, **rows_of}
    assert CONVOLUTION.violations(rows, target, config) == []
    avx2 = CONVOLUTION.select(rows, HostCPU(AVX512, isa="avx2"))  # 16 registers
    assert avx2 == {"OW_TILE": 16, "F_TILE": 6, "OH_TILE": 1, **rows_of}
    assert CONVOLUTION.violations(rows, HostCPU(AVX512, isa="avx2"), avx2) == []
    wide = Conv2d(layout="nchw", N=1, C=64, F=64, H=66, W=66, KH=3, KW=3).root
    assert CONVOLUTION.select(wide, target) == {"OW_TILE": 64, "F_TILE": 6, "OH_TILE": 1, **rows_of}
    odd_rows = Conv2d(layout="nchw", N=1, C=64, F=64, H=9, W=50, KH=3, KW=3).root
    assert CONVOLUTION.select(odd_rows, target)["OH_TILE"] == 1
    assert "oh_tile_divides_oh" in CONVOLUTION.violations(odd_rows, target, {**config})
    assert "oh_tile_registers" in CONVOLUTION.violations(
        rows, target, {**config, "F_TILE": 8, "OH_TILE": 4}
    )


@pytest.mark.jit
def test_a_schedule_failure_names_the_constraints_the_config_breaks():
    """An explicit OH_TILE that does not divide OH fails in the transform interpreter; the
    error says which of the family's constraints the config breaks."""
    odd_rows = Conv2d(**{**SMALL, "H": 9, "W": 16, "padding": 1})
    with pytest.raises(MlirtuneError) as failure:
        MlirJitEngine(use_specs=False).compile(odd_rows, {"OH_TILE": 2})
    assert failure.value.stage == "schedule"
    assert "oh_tile_divides_oh" in str(failure.value).splitlines()[-1]
