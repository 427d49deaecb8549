"""Slot sources (explicit > tuned > selector > descriptor > knob defaults), flows, and
schedule stages."""

import textwrap

import pytest
from mlir import ir

from mlirtune.interfaces.errors import MlirtuneError, UsageError
from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.target import Target
from mlirtune.pipeline import DescriptorError, load_descriptor, resolve_values, run_pipeline
from mlirtune.schedules.contraction import Contraction
from mlirtune.schedules.roots import annotate_roots
from mlirtune.workloads import Conv2d, Matmul


class StubTarget(Target):
    name = "stub"

    def descriptor_search_path(self):
        return ["x86_64", "generic"]

    def fingerprint(self):
        return {}


@pytest.fixture(autouse=True)
def stub_selector(monkeypatch):
    """The contraction family's selector, on any target: a fixed choice of some knobs."""

    def select(self, op: OpInfo, target: Target, fixed: dict | None = None) -> dict[str, int]:
        return {"MR": 4, "NR": 16, "KC": 32}

    monkeypatch.setattr(Contraction, "select", select)


def descriptor(tmp_path, body):
    path = tmp_path / "p.yaml"
    path.write_text(textwrap.dedent(body))
    return load_descriptor(path)


MATMUL_PIPELINE = """\
    flow: select
    params: {MC: 16, NC: 32, KC: 64, MR: 8, NR: 32}
    stages:
      - schedule: contraction {MC=$MC NC=$NC KC=$KC MR=$MR NR=$NR}
    """


def test_config_source_names_explicit_values_over_a_spec_entry(tmp_path):
    d = descriptor(tmp_path, MATMUL_PIPELINE)
    roots = [Matmul(M=32, N=32, K=32).root]
    tuned = {"KC": 16, "MR": 2}
    lowering = resolve_values(d, StubTarget(), roots, explicit={"NR": 8}, tuned=tuned)
    lowering.spec = "spec:lib:entry"
    assert lowering.config_source == "explicit"
    lowering = resolve_values(d, StubTarget(), roots, tuned=tuned)
    lowering.spec = "spec:lib:entry"
    assert lowering.config_source == "spec:lib:entry"
    assert resolve_values(d, StubTarget(), roots).config_source == "selector"


def blocks(mapping: dict) -> dict:
    """The cache and register tile knobs of a contraction's `mapping`."""
    return {k: mapping[k] for k in ("MC", "NC", "KC", "MR", "NR")}


def test_sources_in_priority_order(tmp_path):
    d = descriptor(tmp_path, MATMUL_PIPELINE)
    roots = [Matmul(M=32, N=32, K=32).root]
    lowering = resolve_values(d, StubTarget(), roots, explicit={"NR": 8})
    assert blocks(lowering.values) == {"MC": 16, "NC": 32, "KC": 32, "MR": 4, "NR": 8}
    assert blocks(lowering.sources) == {
        "MC": "descriptor",
        "NC": "descriptor",
        "KC": "selector",
        "MR": "selector",
        "NR": "explicit",
    }
    # The knobs the stage leaves to their own slots, which nothing else sets: defaults.
    assert lowering.sources["KU"] == lowering.sources["ORDER"] == "default"


def test_a_tuned_config_is_complete_without_the_selector(tmp_path):
    """A tuned config was measured with the knobs it leaves out at their defaults (e.g. a
    knob added to the family after the entry was tuned), so the selector fills none."""
    d = descriptor(tmp_path, MATMUL_PIPELINE)
    roots = [Matmul(M=32, N=32, K=32).root]
    lowering = resolve_values(d, StubTarget(), roots, explicit={"NR": 8}, tuned={"KC": 16})
    assert blocks(lowering.values) == {"MC": 16, "NC": 32, "KC": 16, "MR": 8, "NR": 8}
    assert blocks(lowering.sources) == {
        "MC": "descriptor",
        "NC": "descriptor",
        "KC": "tuned",
        "MR": "descriptor",
        "NR": "explicit",
    }


def test_without_flow_the_selector_is_not_asked(tmp_path):
    d = descriptor(tmp_path, MATMUL_PIPELINE.replace("flow: select", ""))
    lowering = resolve_values(d, StubTarget(), [Matmul().root])
    assert set(lowering.sources.values()) == {"descriptor", "default"}


def test_unknown_explicit_parameter_is_named(tmp_path):
    d = descriptor(tmp_path, MATMUL_PIPELINE)
    with pytest.raises(UsageError, match=r"unknown parameter.*ZZ"):
        resolve_values(d, StubTarget(), [Matmul().root], explicit={"ZZ": 1})


def test_unknown_flow(tmp_path):
    d = descriptor(tmp_path, MATMUL_PIPELINE.replace("flow: select", "flow: oracle"))
    with pytest.raises(DescriptorError, match="unknown flow 'oracle'"):
        resolve_values(d, StubTarget(), [Matmul().root])


def test_schedule_stage_runs_and_bad_value_type_is_reported(tmp_path):
    workload = Matmul(M=32, N=32, K=32)
    with ir.Context(), ir.Location.unknown():
        module = workload.payload_module()
        roots = annotate_roots(module)
        d = descriptor(tmp_path, MATMUL_PIPELINE)
        seen = []
        run_pipeline(
            module, resolve_values(d, StubTarget(), roots), observer=lambda s, m: seen.append(s)
        )
        assert seen == ["schedule contraction", "lowering"]
        bad = descriptor(tmp_path, MATMUL_PIPELINE.replace("MC: 16", "MC: sixteen"))
        with pytest.raises(DescriptorError, match="stage 1: schedule contraction parameter MC"):
            run_pipeline(workload.payload_module(), resolve_values(bad, StubTarget(), roots))


def test_schedule_needs_a_matching_root(tmp_path):
    conv = Conv2d(H=8, W=8, C=2, F=4)
    with ir.Context(), ir.Location.unknown():
        module = conv.payload_module()
        roots = annotate_roots(module)
        d = descriptor(tmp_path, MATMUL_PIPELINE.replace("flow: select", ""))
        with pytest.raises(MlirtuneError, match="needs a matmul or batch_matmul root op"):
            run_pipeline(module, resolve_values(d, StubTarget(), roots))


def test_knob_defaults_fill_the_slots_nothing_else_sets(tmp_path):
    """A schedule stage binds each knob of its family to a slot of its name unless it says
    otherwise; a slot bound to a knob needs no params entry (or a null one): the knob's
    default fills it, with source "default", the weakest."""
    d = descriptor(
        tmp_path,
        """\
        params: {MC: 16, NC: null}
        stages:
          - schedule: contraction {KU=$UNROLL}
        """,
    )
    assert d.params["MC"] == 16 and d.params["NC"] is None and d.params["UNROLL"] is None
    lowering = resolve_values(d, StubTarget(), [Matmul().root])
    assert (lowering.values["MC"], lowering.values["NC"], lowering.values["UNROLL"]) == (16, 128, 1)
    assert lowering.sources["MC"] == "descriptor"
    assert lowering.sources["NC"] == lowering.sources["UNROLL"] == "default"
    assert lowering.config_source == "descriptor"
    d = descriptor(tmp_path, "stages:\n  - schedule: contraction\n")
    lowering = resolve_values(d, StubTarget(), [Matmul().root])
    assert (lowering.values["MR"], lowering.values["NR"]) == (8, 32)
    assert lowering.config_source == "default"
    explicit = resolve_values(d, StubTarget(), [Matmul().root], explicit={"MR": 2})
    assert (explicit.sources["MR"], explicit.sources["NR"]) == ("explicit", "default")


def test_a_knob_default_may_depend_on_the_root_op(tmp_path):
    d = descriptor(tmp_path, "stages:\n  - schedule: convolution {F_TILE=$F}\n")
    for dtype, f_tile in (("f32", 32), ("f64", 16), ("bf16", 64)):
        root = OpInfo("conv2d", Conv2d(H=8, W=8, C=2, F=4).root.dims, (dtype,) * 3)
        assert resolve_values(d, StubTarget(), [root]).values["F"] == f_tile
