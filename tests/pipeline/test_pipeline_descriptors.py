"""Descriptor parsing, includes, slots, and every validation error (file, stage, cause)."""

import textwrap
from pathlib import Path

import pytest

from mlirtune.interfaces.lowering import SLOT
from mlirtune.pipeline import DescriptorError, list_descriptors, load_descriptor
from mlirtune.pipeline.descriptor import resolve_stage
from mlirtune.schedules.registry import FAMILIES


def write(directory, name, text):
    path = directory / name
    path.write_text(textwrap.dedent(text))
    return path


def bound(family: str, **arguments) -> dict:
    """A `family` stage's arguments: every knob bound to its own slot, but `arguments`."""
    return {**{knob.name: f"${knob.name}" for knob in FAMILIES[family].knobs}, **arguments}


def knob_slots(family: str, *but: str) -> dict:
    """The params a `family` stage declares for its knobs' own slots, less `but`."""
    return {knob.name: None for knob in FAMILIES[family].knobs if knob.name not in but}


def test_stages_args_and_defaults(tmp_path):
    path = write(
        tmp_path,
        "p.yaml",
        """\
        description: demo
        flow: select
        params: {A: 4, B: null}
        stages:
          - schedule: contraction {MC=$A, NR=$B KC=7}
          - pass: canonicalize{max-iterations=$A}
        """,
    )
    d = load_descriptor(path)
    assert d.description == "demo" and d.flow == "select"
    assert d.params == {"A": 4, "B": None, **knob_slots("contraction", "MC", "NR", "KC")}
    schedule, canonicalize = d.stages
    # Every knob binds its own slot, but where the stage says otherwise.
    assert schedule.arguments == bound("contraction", MC="$A", NR="$B", KC=7)
    assert schedule.slots() == {"A", "B"} | set(knob_slots("contraction", "MC", "NR", "KC"))
    assert resolve_stage(canonicalize, {"A": 3}).name == "canonicalize{max-iterations=3}"
    values = {"A": 3, "B": 9, **{k: 1 for k in knob_slots("contraction")}}
    resolved = resolve_stage(schedule, values).arguments
    assert (resolved["MC"], resolved["NR"], resolved["KC"], resolved["MR"]) == (3, 9, 7, 1)


def test_includes_are_expanded_with_bindings(tmp_path):
    write(
        tmp_path,
        "inner.yaml",
        """\
        params: {X: 1, Y: 2}
        stages:
          - schedule: rowwise {ROWS=$X COLS=$Y}
        """,
    )
    outer = write(
        tmp_path,
        "outer.yaml",
        """\
        params: {Z: 5, Y: 20}
        stages:
          - pass: cse
          - include: inner.yaml {X=$Z}
        """,
    )
    d = load_descriptor(outer)
    assert [s.kind for s in d.stages] == ["pass", "schedule"]
    # X is bound to the includer's slot $Z; Y stays a slot and the includer's default wins.
    assert d.stages[1].arguments == bound("rowwise", ROWS="$Z", COLS="$Y")
    assert d.params == {"Z": 5, "Y": 20, **knob_slots("rowwise", "ROWS", "COLS")}


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"p.yaml": "stages:\n  - frobnicate: x\n"}, "stage 1: unknown stage 'frobnicate'"),
        (
            {"p.yaml": "stages:\n  - include: nowhere.yaml\n"},
            "stage 1: include 'nowhere.yaml' not found",
        ),
        (
            {
                "p.yaml": "stages:\n  - include: q.yaml\n",
                "q.yaml": "stages:\n  - include: p.yaml\n",
            },
            "include cycle: p.yaml -> q.yaml -> p.yaml",
        ),
        (
            {"p.yaml": "stages:\n  - pass: cse\n  - schedule: s {a=$NOPE}\n"},
            "stage 2: unfilled slot(s) $NOPE",
        ),
        (
            {"p.yaml": "params: {A: [1, 2]}\nstages:\n  - pass: cse\n"},
            "param A has a bad value type (list)",
        ),
        ({"p.yaml": "stages: []\n"}, "'stages' must be a non-empty list"),
        ({"p.yaml": "stages:\n  - pass: cse\n  bad: [\n"}, "invalid YAML"),
        ({"p.yaml": "stages:\n  - schedule: s {a}\n"}, "argument 'a' is not key=value"),
        ({"p.yaml": "stagez:\n  - pass: cse\n"}, "unknown key(s) stagez"),
        (
            {"p.yaml": "stages:\n  - schedule: rowwise {ROWS=4 FOO=3}\n"},
            "stage 1: schedule rowwise has no knob(s) FOO; its knobs: ROWS, COLS",
        ),
    ],
)
def test_errors_name_file_stage_and_cause(tmp_path, files, message):
    for name, text in files.items():
        write(tmp_path, name, text)
    with pytest.raises(DescriptorError) as error:
        load_descriptor(tmp_path / "p.yaml")
    assert message in str(error.value)
    assert "p.yaml" in str(error.value)


def test_slot_without_any_value_fails_at_lowering(tmp_path):
    d = load_descriptor(
        write(tmp_path, "p.yaml", "params: {B: null}\nstages:\n  - schedule: rowwise {ROWS=$B}\n")
    )
    with pytest.raises(DescriptorError, match=r"stage 1: unfilled slot\(s\) \$B"):
        resolve_stage(d.stages[0], d.params)


def test_every_packaged_descriptor_loads():
    found = list_descriptors()
    names = {name for name, _, _ in found}
    for kind in ("matmul", "mlp", "batch_matmul", "conv2d", "softmax", "elementwise"):
        assert f"x86_64/{kind}" in names
    assert "generic/default" in names
    assert all(description for _, description, _ in found)


def test_packaged_descriptors_restate_no_knob_default():
    """A packaged descriptor binds its schedule family's knobs to slots; their defaults
    live in the family alone (no params entry sets them), and no descriptor folder exists
    only to restate them."""
    names = set()
    for name, _, path in list_descriptors():
        names.add(name)
        d = load_descriptor(path)
        for stage in d.stages:
            if stage.kind != "schedule" or stage.name not in FAMILIES:
                continue
            knobs = {knob.name for knob in FAMILIES[stage.name].knobs}
            for key, value in stage.arguments.items():
                if key in knobs and isinstance(value, str) and SLOT.fullmatch(value):
                    assert d.params[value[1:]] is None, (name, key)
    assert not any(n.startswith(("x86_64/avx512/", "x86_64/avx2/")) for n in names)


def test_slots_bound_to_knobs_need_no_params_entry(tmp_path):
    write(
        tmp_path,
        "inner.yaml",
        """\
        params: {NR: null}
        stages:
          - schedule: contraction {MR=$MR NR=$NR KC=$DEPTH}
        """,
    )
    outer = write(tmp_path, "outer.yaml", "stages:\n  - include: inner.yaml {MR=4}\n")
    d = load_descriptor(write(tmp_path, "p.yaml", "stages:\n  - include: inner.yaml\n"))
    assert d.params == {"NR": None, "DEPTH": None, **knob_slots("contraction", "KC")}
    arguments = load_descriptor(outer).stages[0].arguments
    assert arguments == bound("contraction", MR=4, KC="$DEPTH")
    assert load_descriptor(outer).params == {"DEPTH": None, **knob_slots("contraction", "KC", "MR")}
    # A slot bound to anything but a knob of the stage's family must still be declared.
    write(tmp_path, "bad.yaml", "stages:\n  - schedule: contraction {MR=$MR XX=$YY}\n")
    with pytest.raises(DescriptorError, match=r"stage 1: unfilled slot\(s\) \$YY"):
        load_descriptor(tmp_path / "bad.yaml")


def test_unknown_schedule_names_the_file_and_the_stage_line(tmp_path):
    path = write(
        tmp_path, "p.yaml", "params: {}\nstages:\n  - pass: cse\n\n  - schedule: nosuch {A=1}\n"
    )
    with pytest.raises(DescriptorError) as error:
        load_descriptor(path)
    assert str(error.value).startswith(f"[pipeline] {path}:5: stage 2: unknown schedule 'nosuch'")
    assert "the library has contraction" in str(error.value)


def test_unknown_schedule_in_a_descriptor_built_in_code_names_its_stage():
    from mlirtune.interfaces.lowering import Descriptor, Stage
    from mlirtune.pipeline.driver import resolve_values
    from mlirtune.targets.host_cpu import HostCPU

    stage = Stage("schedule", "nosuch", {}, "mine.yaml: stage 1", Path("."))
    descriptor = Descriptor(Path("mine.yaml"), "", "select", {}, [stage])
    with pytest.raises(DescriptorError, match=r"mine.yaml: stage 1: unknown schedule 'nosuch'"):
        resolve_values(descriptor, HostCPU(), [])
