"""compare() checks outputs chunk by chunk: the worst element, the error maxima and a NaN
(an element never written) are found wherever they are, as in one pass over the whole."""

from __future__ import annotations

import numpy as np
import pytest

from mlirtune import verify
from mlirtune.interfaces.dtype import DTYPES
from mlirtune.interfaces.workload import ArgSpec

SPEC = ArgSpec("out", (5, 9), DTYPES["f32"], is_output=True)


@pytest.fixture(params=[1 << 22, 7], ids=["one-chunk", "chunks-of-7"])
def chunk(request, monkeypatch):
    monkeypatch.setattr(verify, "CHUNK_ELEMENTS", request.param)


def reference() -> np.ndarray:
    return np.linspace(-2.0, 2.0, 45).reshape(5, 9)


def test_matching_output_passes_with_its_errors(chunk):
    want = reference()
    got = want.astype(np.float32)
    result = verify.compare([(SPEC, got)], [want], accumulation_length=1)
    assert result.ok
    assert result.max_abs_error == pytest.approx(np.abs(got - want).max())
    nonzero = want != 0  # the relative error skips the reference's 0
    relative = np.abs(got - want)[nonzero] / np.abs(want[nonzero])
    assert result.max_rel_error == pytest.approx(relative.max())


def test_worst_element_is_found_in_a_later_chunk(chunk):
    want = reference()
    got = want.astype(np.float32)
    got[3, 4] += 0.5
    got[0, 1] += 0.01
    result = verify.compare([(SPEC, got)], [want], accumulation_length=1)
    assert not result.ok and result.worst_index == (3, 4)
    assert result.max_abs_error == pytest.approx(0.5, rel=1e-6)


def test_an_unwritten_element_fails(chunk):
    want = reference()
    got = want.astype(np.float32)
    got[4, 8] = np.nan
    result = verify.compare([(SPEC, got)], [want], accumulation_length=1)
    assert not result.ok and result.worst_index == (4, 8)
    assert result.max_abs_error == np.inf


def test_infinities_match_the_same_infinities_only(chunk):
    """A masked score (-inf) or an overflow the reference shares passes; an infinity where
    the reference is finite, or of the other sign, fails."""
    want = reference()
    want[1, 2], want[2, 3] = -np.inf, np.inf
    got = want.astype(np.float32)
    assert verify.compare([(SPEC, got)], [want], accumulation_length=1).ok
    for index, value in (((1, 2), np.inf), ((0, 0), -np.inf)):
        wrong = got.copy()
        wrong[index] = value
        result = verify.compare([(SPEC, wrong)], [want], accumulation_length=1)
        assert not result.ok and result.worst_index == index


def test_a_scalar_output_is_compared():
    spec = ArgSpec("loss", (), DTYPES["f64"], is_output=True)
    assert verify.compare([(spec, np.array(1.5))], [np.array(1.5)], 10).ok
    assert not verify.compare([(spec, np.array(1.6))], [np.array(1.5)], 10).ok
