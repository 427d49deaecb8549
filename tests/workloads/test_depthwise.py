"""Depthwise workload: channels-first depthwise 2-D convolution, as PyTorch's groups=C conv."""

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
from mlirtune.tune.space_for import space_for
from mlirtune.workloads import WORKLOADS
from mlirtune.workloads.depthwise import Depthwise

VERIFIED = [
    {"N": 1, "C": 3, "H": 10, "W": 34},
    {"N": 2, "C": 5, "H": 7, "W": 100},  # odd: no tile divides
    {"N": 1, "C": 2, "H": 9, "W": 20, "stride": 2},
    {"N": 1, "C": 2, "H": 9, "W": 21, "stride": "1,2", "padding": 1},
    {"N": 1, "C": 4, "H": 8, "W": 19, "padding": 1},
    {"N": 1, "C": 2, "H": 8, "W": 19, "padding": "2,0"},  # H only
    {"N": 1, "C": 2, "H": 8, "W": 19, "padding": "0,2"},  # W only
    {"N": 1, "C": 3, "H": 11, "W": 13, "dilation": 2},
    {"N": 1, "C": 3, "H": 9, "W": 30, "KH": 3, "KW": 5},  # asymmetric kernel
    {"N": 1, "C": 3, "H": 9, "W": 20, "KH": 3, "KW": 1},  # (kernel_size, 1)
    {"N": 1, "C": 2, "H": 11, "W": 13, "KH": 3, "KW": 5, "dilation": "2,1", "padding": "1,2"},
    {"N": 2, "C": 1, "H": 6, "W": 17, "dtype": "f64"},  # one channel
    {"N": 1, "C": 1, "H": 3, "W": 3},  # a 1x1 output
    {"N": 1, "C": 2, "H": 3, "W": 40},  # a single output row
    {"N": 1, "C": 2, "H": 40, "W": 3},  # a single output column
]


@pytest.mark.jit
@pytest.mark.parametrize("options", VERIFIED)
def test_depthwise_verifies(engine, options):
    result = engine.execute(Depthwise(**options))
    assert result.verification.ok, result.verification.summary()
    assert not result.verification.skipped


@pytest.mark.jit
@pytest.mark.parametrize(
    "parameters",
    [
        {"OW_TILE": 3, "OH_TILE": 3, "C_TILE": 3},  # partial tiles in all three
        {"OW_TILE": 1, "OH_TILE": 1, "C_TILE": 1},
        {"OW_TILE": 64, "OH_TILE": 8, "C_TILE": 8},  # larger than the shape
    ],
)
def test_depthwise_with_non_dividing_schedule_parameters(engine, parameters):
    workload = Depthwise(N=1, C=5, H=9, W=23, padding=1)
    result = engine.execute(workload, parameters)
    assert result.verification.ok, result.verification.summary()


@pytest.mark.jit
@pytest.mark.parametrize("options", [{"C": 4}, {"C": 3, "stride": 2, "padding": 1}])
def test_depthwise_on_two_threads(options):
    workload = Depthwise(N=1, H=8, W=30, **options)
    result = engine_for(HostCPU(threads=2)).execute(workload, {"C_TILE": 2})
    assert result.verification.ok, result.verification.summary()


@pytest.mark.jit
@pytest.mark.parametrize("stride", [1, 2])
def test_schedule_vectorizes_every_tap(engine, stride):
    stages = {}
    engine.lower_payload(
        Depthwise(N=1, C=2, H=9, W=20, padding="1,0", stride=stride),
        observer=lambda stage, module: stages.setdefault(stage, str(module)),
    )
    scheduled = next(text for stage, text in stages.items() if stage.startswith("schedule"))
    assert "linalg." not in scheduled and "tensor.pad" not in scheduled
    assert "fastmath<contract>" in scheduled  # the taps' multiply-adds may become FMAs


def test_reference_matches_torch():
    torch = pytest.importorskip("torch")
    for options in VERIFIED:
        workload = Depthwise(**options)
        with torch.inference_mode():
            expected = workload.torch_baseline()().numpy()
        np.testing.assert_allclose(workload.reference_outputs[0], expected, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(workload.numpy_baseline()(), expected, rtol=1e-5, atol=1e-5)


def test_root_is_depthwise_not_conv2d():
    with new_context(), ir.Location.unknown():
        module = Depthwise(N=2, C=4, H=10, W=12, stride="1,2", padding=1).payload_module()
        roots = [info for _, info in find_roots(module)]
    assert [r.kind for r in roots] == ["depthwise"]
    assert roots[0].dims == {"N": 2, "OH": 10, "OW": 6, "C": 4, "KH": 3, "KW": 3, "IW": 14}
    assert roots[0].attributes["stride"] == 2 and roots[0].attributes["stride_h"] == 1
    assert roots[0].attributes["pad"] == 1


def test_complexity_and_canonical_options():
    workload = Depthwise(N=1, C=2, H=8, W=10, KH=3, KW=5, stride=1)
    c = workload.get_complexity()
    assert c.flops == 2 * 1 * 2 * 6 * 6 * 15
    assert c.bytes_read == (1 * 2 * 8 * 10 + 2 * 15) * 4 and c.bytes_written == 2 * 6 * 6 * 4
    assert workload.accumulation_length() == 15
    assert workload.describe() == Depthwise(N=1, C=2, H=8, W=10, KH=3, KW=5,
                                            stride="1,1").describe()  # fmt: skip
    assert workload.options["padding"] == "0,0"


# KernelBench level 1, problems 82-85 (N=16, C=3): they construct and plan (not run here).
KERNELBENCH = [
    {"N": 16, "C": 3, "H": 256, "W": 256, "KH": 3, "KW": 3},
    {"N": 16, "C": 3, "H": 256, "W": 256, "KH": 3, "KW": 1},
    {"N": 16, "C": 3, "H": 128, "W": 256, "KH": 3, "KW": 3},
    {"N": 16, "C": 3, "H": 128, "W": 256, "KH": 3, "KW": 5},
]


@pytest.mark.parametrize("options", KERNELBENCH)
def test_kernelbench_shapes_plan(options):
    workload = Depthwise(**options)
    plan = engine_for(HostCPU()).plan(workload)
    assert plan.values["OW_TILE"] >= 1 and plan.sources["OW_TILE"] == "selector"
    with new_context(), ir.Location.unknown():
        assert workload.schedule_module() is not None


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
@pytest.mark.parametrize("options", [KERNELBENCH[0], {"H": 9, "W": 23, "stride": 2}])
def test_selected_config_is_in_the_search_space(isa, options):
    cpu = HostCPU(isa=isa)
    workload = Depthwise(**options)
    op = workload.root
    family, space = FAMILIES["depthwise"], space_for(op, "depthwise", cpu)
    chosen = family.select(op, cpu)
    assert space.violations(chosen) == []
    assert 0 < space.cost(chosen) < float("inf")
    worse = {**chosen, "OH_TILE": 16, "OW_TILE": 4 * cpu.lanes(op.element_type)}
    assert "register_budget" in family.violations(op, cpu, worse) or op.dims["OW"] < 64


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"stride": 0}, "stride.*at least 1"),
        ({"stride": "1,-1"}, "stride.*at least 1"),
        ({"stride": "2,2,2"}, "stride.*needs 1 or 2 values"),
        ({"padding": -1}, "padding.*at least 0"),
        ({"padding": "a"}, "padding.*not an integer"),
        ({"dilation": 0}, "dilation.*at least 1"),
        ({"H": 2, "W": 8, "KH": 3}, "KH=3 KW=3.*larger than the padded input"),
        ({"H": 8, "W": 8, "dilation": 4}, "larger than the padded input"),
        ({"KW": 0}, "KW must be positive"),
        ({"C": -2}, "C must be positive"),
        ({"dtype": "bf16"}, "dtype='bf16' is not one of"),
        ({"groups": 2}, "unknown option"),
    ],
)
def test_bad_options(options, message):
    with pytest.raises(UsageError, match=f"depthwise: .*{message}"):
        Depthwise(**options)


def test_registered():
    assert WORKLOADS["depthwise"] is Depthwise


@pytest.mark.jit
def test_cli_run():
    assert main(["run", "depthwise", "N=1", "C=4", "H=16", "W=32", "padding=1", "stride=2"]) == 0
