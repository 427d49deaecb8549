"""The dispatch timer's samples: each stands for `iterations` calls of one dispatch, read
from as few profiling runs of the module as give them (the runs faked here)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mlirtune.interfaces.errors import UsageError
from mlirtune.iree import profile
from mlirtune.iree.profile import DispatchTimer


@pytest.fixture
def runs(monkeypatch):
    """Each profiling run gives the dispatch three calls (100, 200, 300 ns) and another
    dispatch one; the runs taken are counted."""
    taken = []

    def fake(vmfb, entry, inputs, min_time_s):
        taken.append(min_time_s)
        return {"d0": [100, 200, 300], "other": [7]}

    monkeypatch.setattr(profile, "dispatch_calls_ns", fake)
    return taken


def test_single_calls_are_the_samples(runs):
    timer = DispatchTimer(Path("m.vmfb"), "main", [], "d0")
    assert timer(1, 4).tolist() == [100, 200, 300, 100]
    assert len(runs) == 2  # a second run once the first's three calls were spent


def test_a_sample_of_more_calls_than_a_run_gives_is_scaled_from_its_calls(runs):
    timer = DispatchTimer(Path("m.vmfb"), "main", [], "d0")
    # Two calls (100, 200) stand for two; then the last one (300) stands for two.
    assert timer(2, 2).tolist() == [300, 600]
    # Ten wanted, three in the run: their mean times ten, one run per sample at most.
    assert timer(10, 2).tolist() == [2000, 2000]
    assert len(runs) == 3


def test_a_dispatch_the_profile_lacks_is_named(runs):
    with pytest.raises(UsageError, match=re.escape("has no dispatch d9 (d0, other)")):
        DispatchTimer(Path("m.vmfb"), "main", [], "d9")(1, 1)
