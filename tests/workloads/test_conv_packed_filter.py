"""conv2d's packed filter (PACK_FILTER=1, nhwc.py): results match numpy on every shape it
takes, the filter slice is copied once per channel block above the pixel loops, the
selector packs a filter past half of L2 only, and partial tiles are refused by name."""

from __future__ import annotations

import os

import pytest
from mlir import ir

from mlirtune.api import engine_for
from mlirtune.schedules.convolution import CONVOLUTION
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.workloads.conv2d import Conv2d
from tests.schedules.test_blocking_model import AMD_LIKE, INTEL_LIKE

PACKED = {"PACK_FILTER": 1}


@pytest.mark.jit
@pytest.mark.parametrize(
    "options, params",
    [
        ({"H": 10, "W": 10, "C": 16, "F": 64}, {"OW_TILE": 4, "F_TILE": 32}),
        ({"N": 2, "H": 17, "W": 17, "C": 24, "F": 48, "stride": 2},
         {"OW_TILE": 4, "F_TILE": 16, "C_TILE": 8}),
        ({"N": 2, "H": 17, "W": 17, "C": 12, "F": 48, "dtype": "f64"},
         {"OW_TILE": 5, "F_TILE": 16, "C_TILE": 3}),  # C_TILE does not divide the copy rows
        ({"H": 9, "W": 9, "C": 8, "F": 32, "padding": 1}, {"OW_TILE": 3, "F_TILE": 16}),
        ({"H": 3, "W": 3, "C": 8, "F": 32}, {"OW_TILE": 1, "F_TILE": 16}),  # one pixel
        ({"H": 10, "W": 10, "C": 5, "F": 32}, {"OW_TILE": 8, "F_TILE": 16, "C_TILE": 2}),
    ],
)  # fmt: skip
def test_packed_filter_matches_reference(engine, options, params):
    result = engine.execute(Conv2d(**options), {**params, **PACKED})
    assert result.verification.ok, result.verification.summary()


@pytest.mark.jit
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs 2 cores, this host has 1")
def test_packed_filter_spreads_its_channel_blocks_over_threads():
    engine = engine_for(HostCPU(threads=2), use_specs=False)
    workload = Conv2d(N=2, H=10, W=10, C=16, F=64)
    result = engine.execute(workload, {"OW_TILE": 4, "F_TILE": 16, **PACKED})
    assert result.verification.ok, result.verification.summary()


def _filter_buffers(engine, workload, params, shape) -> list[int]:
    """For every tensor.empty of `shape` (a filter slice's) after the schedule, the scf.for
    and scf.forall loops around it."""
    depths: list[int] = []

    def observe(stage: str, module: ir.Module) -> None:
        if not stage.startswith("schedule"):
            return

        def visit(op: ir.Operation) -> ir.WalkResult:
            empty = op.name == "tensor.empty"
            if empty and ir.RankedTensorType(op.results[0].type).shape == shape:
                depth, parent = 0, op.parent
                while parent.name != "func.func":
                    depth += parent.name in ("scf.for", "scf.forall")
                    parent = parent.parent
                depths.append(depth)
            return ir.WalkResult.ADVANCE

        module.operation.walk(visit)

    engine.lower_payload(workload, params, observer=observe)
    return depths


@pytest.mark.jit
def test_the_filter_slice_is_copied_once_per_channel_block(engine):
    workload = Conv2d(N=2, H=10, W=10, C=16, F=64)
    params = {"OW_TILE": 4, "F_TILE": 16, "C_TILE": 4}
    # Inside the channel-block loop only: above the image, row and pixel loops.
    slice_shape = [3, 3, 16, 16]
    assert _filter_buffers(engine, workload, {**params, **PACKED}, slice_shape) == [1]
    assert _filter_buffers(engine, workload, {**params, "PACK_FILTER": 0}, slice_shape) == []


def test_the_selector_packs_a_filter_past_half_of_l2():
    deep = Conv2d(H=16, W=16, C=256, F=256).root  # a 2.4 MB filter
    shallow = Conv2d(H=58, W=58, C=64, F=64).root  # 147 KB
    middle = Conv2d(H=30, W=30, C=128, F=128).root  # 590 KB
    for cpu in (AMD_LIKE, INTEL_LIKE):
        assert CONVOLUTION.select(deep, cpu)["PACK_FILTER"] == 1
        assert CONVOLUTION.select(shallow, cpu)["PACK_FILTER"] == 0
    assert CONVOLUTION.select(middle, INTEL_LIKE)["PACK_FILTER"] == 0
    assert CONVOLUTION.select(middle, AMD_LIKE)["PACK_FILTER"] == 1


def test_partial_tiles_cannot_take_the_packed_filter():
    op = Conv2d(H=12, W=12, C=8, F=64).root  # 10 output pixels a row
    config = {**CONVOLUTION.select(op, INTEL_LIKE), "OW_TILE": 4, "F_TILE": 32, **PACKED}
    assert "pack_filter_whole_tiles" in CONVOLUTION.violations(op, INTEL_LIKE, config)
    whole = {**config, "OW_TILE": 5}
    assert "pack_filter_whole_tiles" not in CONVOLUTION.violations(op, INTEL_LIKE, whole)
    assert "pack_filter_whole_tiles" not in CONVOLUTION.violations(
        op, INTEL_LIKE, {**config, "PACK_FILTER": 0}
    )
