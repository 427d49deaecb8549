"""Every family's typed knobs (`values_type`): one frozen int field per knob, in knob order,
named as the knob in lower case; Config dicts convert to them and back."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, dataclass, fields

import pytest

from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.schedule import KnobValues
from mlirtune.schedules.registry import FAMILIES


@pytest.mark.parametrize("family", list(FAMILIES.values()), ids=list(FAMILIES))
def test_the_typed_knobs_are_the_family_knobs(family):
    values_type = family.values_type
    assert values_type.__dataclass_params__.frozen
    knobs = [knob.name for knob in family.knobs]
    assert [field.name for field in fields(values_type)] == [name.lower() for name in knobs]
    assert [values_type.knob_name(field.name) for field in fields(values_type)] == knobs
    assert all(field.type == "int" for field in fields(values_type))


@dataclass(frozen=True)
class _Tile(KnobValues):
    rows: int
    cols: int


@dataclass(frozen=True)
class _LowerCaseTile(KnobValues):
    upper_case_names = False

    block_m: int


def test_a_config_converts_to_typed_knobs_and_back():
    tile = _Tile.from_config({"COLS": 64, "ROWS": 4})
    assert (tile.rows, tile.cols) == (4, 64)
    assert tile.to_config() == {"ROWS": 4, "COLS": 64}
    assert list(tile.to_config()) == ["ROWS", "COLS"]
    assert _LowerCaseTile.from_config({"block_m": 64}).to_config() == {"block_m": 64}
    with pytest.raises(FrozenInstanceError):
        tile.rows = 8  # type: ignore[misc]


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"ROWS": 4}, "missing COLS"),
        ({"ROWS": 4, "COLS": 64, "XX": 1}, "unknown XX"),
        ({"rows": 4, "cols": 64}, "missing ROWS, COLS; unknown rows, cols"),
    ],
)
def test_a_config_missing_or_naming_other_knobs_is_refused(config, message):
    with pytest.raises(UsageError, match=message):
        _Tile.from_config(config)


def test_a_family_fills_its_defaults_in_under_a_partial_config():
    family = FAMILIES["contraction"]
    op = OpInfo("matmul", {"M": 64, "N": 64, "K": 64}, ("f32", "f32", "f32"), "linalg.matmul")
    knobs = family.knob_values(op, {"MR": 4})
    assert knobs.mr == 4
    assert knobs.to_config() == {**family.defaults(op), "MR": 4}
