"""Schedule families: knob defaults written once, parameter checks, the registry, the slots a
pipeline binds, and violations that agree with the search space. Nothing is compiled."""

import itertools
from pathlib import Path

import pytest

from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.lowering import Descriptor, Lowering, Stage
from mlirtune.interfaces.op import OpInfo
from mlirtune.schedules.registry import FAMILIES, bound_family, family_named
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.tune.space_for import space_for

F32 = ("f32", "f32", "f32")
MATMUL = OpInfo("matmul", {"M": 64, "N": 80, "K": 96}, F32)
CONV = {"N": 1, "OH": 8, "OW": 14, "F": 56, "KH": 3, "KW": 3, "C": 12}
ROWS = {"ROWS": 30, "COLS": 100}

# The defaults of the schedule modules before the families owned them.
DEFAULTS = {
    "contraction": (
        MATMUL,
        {
            "MC": 64,
            "NC": 128,
            "KC": 256,
            "MR": 8,
            "NR": 32,
            "KU": 1,
            "ORDER": 1,
            "PACK": 0,
            "PREFETCH": 0,
            "UNIT": 0,
        }
        | {"THREADS": 1, "VECTOR_BITS": 128},
    ),
    "convolution": (
        OpInfo("conv2d", CONV, F32),
        {
            "OW_TILE": 8,
            "F_TILE": 32,
            "C_TILE": 1,
            "OH_TILE": 1,
            "FLAT_ROWS": 0,
            "PACK_FILTER": 0,
            "IMAGES_OUTER": 0,
        }
        | {"THREADS": 1},
    ),
    "rowwise": (
        OpInfo("reduction", ROWS, F32[:2]),
        {"ROWS": 4, "COLS": 64, "PREFETCH": 0, "THREADS": 1},
    ),
    "elementwise": (OpInfo("elementwise", ROWS, F32), {"ROWS": 8, "COLS": 64, "THREADS": 1}),
}


@pytest.mark.parametrize("name", sorted(DEFAULTS))
def test_defaults_are_the_knobs_defaults(name):
    op, expected = DEFAULTS[name]
    family = FAMILIES[name]
    assert family.defaults(op) == expected
    assert [knob.name for knob in family.knobs] == list(expected)
    assert family.parameters(op) == expected
    first = next(iter(expected))
    assert family.parameters(op, {first: 3}) == {**expected, first: 3}


def test_the_convolution_f_tile_default_spans_128_bytes():
    family = FAMILIES["convolution"]
    for dtype, f_tile in (("f32", 32), ("f64", 16), ("bf16", 64)):
        assert family.defaults(OpInfo("conv2d", CONV, (dtype,) * 3))["F_TILE"] == f_tile


def test_only_the_selected_knobs_are_selected():
    cpu = HostCPU(isa="avx512")
    contraction = FAMILIES["contraction"]
    selected = ("MC", "NC", "KC", "MR", "NR", "ORDER", "PACK", "PREFETCH", "UNIT")
    assert contraction.selected() == selected
    assert set(contraction.select(MATMUL, cpu)) == set(selected)


@pytest.mark.parametrize(
    ("values", "message"),
    [({"XX": 1}, "unknown parameter 'XX'; known: MC, NC"), ({"MR": 0}, "MR=0 must be a positive")],
)
def test_parameters_are_checked(values, message):
    with pytest.raises(UsageError, match=message) as error:
        FAMILIES["contraction"].parameters(MATMUL, values)
    assert error.value.stage == "schedule"


def test_family_named_lists_the_families():
    assert family_named("rowwise") is FAMILIES["rowwise"]
    with pytest.raises(UsageError, match="unknown schedule 'nosuch'; the library has contraction"):
        family_named("nosuch")


def _lowering(*stages: Stage, roots=(MATMUL,)) -> Lowering:
    descriptor = Descriptor(Path("p.yaml"), "", None, {}, list(stages))
    return Lowering(descriptor, list(roots))


def _stage(name: str, arguments: dict) -> Stage:
    return Stage("schedule", name, arguments, "p.yaml: stage 1", Path("."))


def test_bound_family_maps_knobs_to_slots():
    stage = _stage("contraction", {"MC": "$A", "NR": "$NR", "KC": 7})
    family, op, slots = bound_family(_lowering(stage))
    assert (family, op, slots) == (FAMILIES["contraction"], MATMUL, {"MC": "A", "NR": "NR"})
    with pytest.raises(UsageError, match="has 2 library schedule stages") as error:
        bound_family(_lowering(stage, stage))
    assert error.value.stage == "tune"
    with pytest.raises(UsageError, match="no conv2d root op for schedule convolution"):
        bound_family(_lowering(_stage("convolution", {})))


@pytest.mark.parametrize(
    ("op", "name"),
    [
        (MATMUL, "contraction"),
        (OpInfo("conv2d", CONV, F32), "convolution"),
        (OpInfo("reduction", ROWS, F32[:2]), "rowwise"),
        (OpInfo("elementwise", {"ROWS": 7, "COLS": 40}, F32), "elementwise"),
    ],
)
def test_violations_agree_with_the_search_space(op, name):
    cpu = HostCPU(isa="avx2", l1d_bytes=32 << 10, l2_bytes=1 << 20)
    family, space = FAMILIES[name], space_for(op, name, cpu)
    assert family.domains(op, cpu) == space.domains
    configs = list(itertools.product(*space.domains.values()))[::7][:200]
    for values in configs:
        config = dict(zip(space.domains, values, strict=True))
        assert family.violations(op, cpu, config) == space.violations(config)
    config = dict(zip(space.domains, configs[0], strict=True))
    odd = {**config, "ZZ": 1, next(iter(config)): 12345}
    assert family.violations(op, cpu, odd) == space.violations(odd)
