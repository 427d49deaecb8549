"""Pool workload: max / average pooling in 1-D, 2-D and 3-D, channels-first, as PyTorch."""

import numpy as np
import pytest
from mlir import ir

from mlirtune.api import engine_for
from mlirtune.cli import main
from mlirtune.interfaces.errors import UsageError
from mlirtune.ir.context import new_context
from mlirtune.schedules.registry import FAMILIES
from mlirtune.schedules.roots import find_roots
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.workloads import WORKLOADS
from mlirtune.workloads.pool import Pool
from tests.cpu_classes import cpu

VERIFIED = [
    # 1-D
    {"kind": "max", "spatial": "16", "kernel": 2},
    {"kind": "max", "spatial": "37", "C": 3, "kernel": 4, "stride": 2, "padding": 2, "dilation": 3},
    {"kind": "avg", "spatial": "29", "kernel": 4, "stride": 2, "padding": 1},
    {"kind": "avg", "spatial": "9", "N": 1, "C": 1, "kernel": 3, "stride": 1},
    # 2-D
    {"kind": "max", "spatial": "7,100", "kernel": 2, "stride": 1},
    {"kind": "max", "spatial": "9,10", "kernel": 2, "stride": 2, "padding": 1, "dilation": 3},
    {"kind": "max", "spatial": "11,13", "kernel": "3,2", "stride": "2,1", "dilation": 2},
    {"kind": "avg", "spatial": "12,15", "kernel": 3, "dtype": "f64"},
    {"kind": "avg", "spatial": "9,10", "kernel": 3, "stride": 2, "padding": 1},
    {"kind": "max", "spatial": "2,2", "N": 1, "C": 1, "kernel": 2},  # a 1x1 output
    {"kind": "avg", "spatial": "1,17", "kernel": "1,3", "stride": 1},  # a single row
    # 3-D
    {"kind": "max", "spatial": "5,6,7", "kernel": 3, "stride": 2, "padding": 1, "dilation": 2},
    {"kind": "max", "spatial": "4,4,4", "C": 3, "kernel": 2},
    {"kind": "avg", "spatial": "5,6,7", "kernel": 3, "stride": 2, "padding": 1},
    {"kind": "avg", "spatial": "3,3,3", "N": 1, "C": 1, "kernel": 3},  # a 1x1x1 output
    {"kind": "avg", "spatial": "5,6,7", "kernel": 3, "padding": "1,0,0"},  # depth stage only
    {"kind": "max", "spatial": "5,6,7", "kernel": 3, "padding": "0,1,1"},  # image stage only
]


@pytest.mark.jit
@pytest.mark.parametrize("options", VERIFIED)
def test_pool_verifies(engine, options):
    result = engine.execute(Pool(**options))
    assert result.verification.ok, result.verification.summary()
    assert not result.verification.skipped


@pytest.mark.jit
@pytest.mark.parametrize(
    "options",
    [
        {"spatial": "37", "C": 11, "kernel": 4, "stride": 2, "padding": 2, "dilation": 3},
        {"spatial": "50", "C": 9, "N": 1, "kernel": 3, "stride": 3, "padding": 1},
        {"spatial": "7", "C": 3, "kernel": 2, "stride": 2},
    ],
)
def test_strided_max_1d_vectorizes_across_channels(engine, options):
    """A strided 1-D max pool takes channel tiles (odd channel counts leave partial ones)."""
    workload = Pool(kind="max", **options)
    with new_context(), ir.Location.unknown():
        _, op = find_roots(workload.payload_module())[0]
        config = FAMILIES["pooling"].select_on(op, HostCPU())
    assert config["C_TILE"] == min(8, 1 << (options["C"].bit_length() - 1)) > 1
    result = engine.execute(workload)
    assert result.verification.ok, result.verification.summary()


@pytest.mark.parametrize("cpu_class", ["avx2", "avx512"])
@pytest.mark.parametrize(("stride", "vectors"), [(1, 2.0), (2, 0.5)])
def test_a_strided_window_takes_one_vector_of_outputs(cpu_class, stride, vectors):
    """Outputs of a strided window are gathered one by one: past one vector, LLVM built
    them in memory (4-8x slower), so the constraints keep one and the selector half."""
    workload = Pool(kind="max", spatial="64,114", kernel=3, stride=stride)
    target = cpu(cpu_class)
    lanes = target.lanes("f32")
    family = FAMILIES["pooling"]
    with new_context(), ir.Location.unknown():
        _, op = find_roots(workload.payload_module())[0]
        config = family.select_on(op, target)
        assert config["OW_TILE"] == int(vectors * lanes)
        wide = {**family.defaults(op), **config, "OW_TILE": 2 * lanes}
        broken = family.violations(op, target, wide)
    assert broken == ([] if stride == 1 else ["strided_tile_in_one_vector"])


@pytest.mark.jit
@pytest.mark.parametrize(
    "parameters",
    [
        {"OW_TILE": 3, "C_TILE": 3},  # partial tiles in both
        {"OW_TILE": 1, "C_TILE": 1},
        {"OW_TILE": 64, "C_TILE": 8},  # larger than the shape
    ],
)
def test_pool_with_non_dividing_schedule_parameters(engine, parameters):
    workload = Pool(kind="avg", spatial="9,23", C=5, kernel=3, stride=2, padding=1)
    result = engine.execute(workload, parameters)
    assert result.verification.ok, result.verification.summary()


@pytest.mark.jit
@pytest.mark.parametrize("spatial", ["30", "8,30", "6,5,30"])
def test_pool_on_two_threads(spatial):
    workload = Pool(kind="max", spatial=spatial, C=4, kernel=3, stride=2, padding=1)
    result = engine_for(HostCPU(threads=2)).execute(workload)
    assert result.verification.ok, result.verification.summary()


@pytest.mark.jit
def test_schedule_vectorizes_every_pool(engine):
    stages = {}
    engine.lower_payload(
        Pool(kind="avg", spatial="5,9,10", kernel=3, stride=2, padding=1),
        observer=lambda stage, module: stages.setdefault(stage, str(module)),
    )
    scheduled = next(text for stage, text in stages.items() if stage.startswith("schedule"))
    assert "linalg." not in scheduled and "tensor.pad" not in scheduled


def test_reference_matches_torch():
    torch = pytest.importorskip("torch")
    for options in VERIFIED:
        workload = Pool(**options)
        with torch.inference_mode():
            expected = workload.torch_baseline()().numpy()
        np.testing.assert_allclose(workload.reference_outputs[0], expected, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(workload.numpy_baseline()(), expected, rtol=1e-5, atol=1e-6)


def test_roots_are_pooling_not_conv():
    with new_context(), ir.Location.unknown():
        roots = [info for _, info in find_roots(Pool(spatial="8,8", kernel=2).payload_module())]
        assert [r.kind for r in roots] == ["pooling"]
        assert roots[0].dims == {"N": 2, "C": 16, "OH": 4, "OW": 4, "KH": 2, "KW": 2, "IW": 8}
        three = Pool(spatial="4,8,8", kernel=2, padding=1).payload_module()
        roots = [info for _, info in find_roots(three)]
    assert [r.op_name for r in roots] == ["linalg.pooling_nchw_max", "linalg.pooling_nwc_max"]
    assert roots[0].attributes["then_pool"] == 1 and roots[0].attributes["pad"] == 1


def test_complexity_and_canonical_options():
    workload = Pool(kind="avg", spatial="8,10", N=1, C=2, kernel=2)
    c = workload.get_complexity()
    assert c.flops == 1 * 2 * 4 * 5 * 4
    assert c.bytes_read == 1 * 2 * 8 * 10 * 4 and c.bytes_written == 1 * 2 * 4 * 5 * 4
    assert workload.describe() == Pool(kind="avg", spatial="8,10", N=1, C=2, kernel="2,2",
                                       stride=2).describe()  # fmt: skip
    assert workload.options["stride"] == "2,2"


# KernelBench level 1, problems 41-46: they construct and plan (not run: too large here).
KERNELBENCH = [
    {"kind": "max", "N": 16, "C": 64, "spatial": "128", "kernel": 4, "stride": 2, "padding": 2,
     "dilation": 3},
    {"kind": "max", "N": 16, "C": 32, "spatial": "128,128", "kernel": 2, "stride": 2,
     "padding": 1, "dilation": 3},
    {"kind": "max", "N": 16, "C": 32, "spatial": "64,64,64", "kernel": 3, "stride": 2,
     "padding": 1, "dilation": 3},
    {"kind": "avg", "N": 16, "C": 32, "spatial": "128", "kernel": 4, "stride": 2, "padding": 1},
    {"kind": "avg", "N": 16, "C": 64, "spatial": "256,256", "kernel": 3},
    {"kind": "avg", "N": 16, "C": 32, "spatial": "64,64,64", "kernel": 3, "stride": 2,
     "padding": 1},
]  # fmt: skip


@pytest.mark.parametrize("options", KERNELBENCH)
def test_kernelbench_shapes_plan(options):
    workload = Pool(**options)
    plan = engine_for(HostCPU()).plan(workload)
    assert plan.values["OW_TILE"] >= 1 and plan.sources["OW_TILE"] == "selector"
    with new_context(), ir.Location.unknown():
        assert workload.schedule_module() is not None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"kind": "min"}, "kind='min' is not one of"),
        ({"spatial": "4,4,4,4"}, "spatial.*1 to 3"),
        ({"spatial": "4,x"}, "spatial.*not a comma-separated"),
        ({"spatial": "4,0"}, "spatial.*at least 1"),
        ({"kernel": 0}, "kernel.*at least 1"),
        ({"kernel": "2,2,2"}, "kernel.*needs 1 or 2 values"),
        ({"stride": 0}, "stride.*at least 1"),
        ({"stride": -1}, "stride.*at least 1"),
        ({"padding": -1}, "padding.*at least 0"),
        ({"kernel": 3, "padding": 2}, "padding.*at most half the kernel"),
        ({"spatial": "3,3", "kernel": 6, "padding": 1}, "larger than the padded input"),
        ({"spatial": "5,5", "kernel": 3, "dilation": 3}, "larger than the padded input"),
        ({"kind": "avg", "dilation": 2}, "dilation.*average pooling has no dilation"),
        ({"N": 0}, "N must be positive"),
        ({"ceil_mode": 1}, "unknown option"),
    ],
)
def test_bad_options(options, message):
    with pytest.raises(UsageError, match=f"pool: .*{message}|{message}"):
        Pool(**options)


def test_registered():
    assert WORKLOADS["pool"] is Pool


@pytest.mark.jit
def test_cli_run(capsys):
    assert main(["run", "pool", "kind=max", "spatial=32,32", "N=2", "C=4", "kernel=2"]) == 0
