"""The FMAs this host keeps in flight: measured once per CPU and boot in a child process,
cached beside the peaks, given by $MLIRTUNE_FMA_IN_FLIGHT instead where set (as conftest
sets it for every other test), and never trusted when its cache entry is corrupt."""

from __future__ import annotations

import json

import pytest

from mlirtune import peak
from mlirtune.interfaces.errors import UsageError
from mlirtune.targets import fma_in_flight
from mlirtune.targets.host_cpu import FMA_UNITS, HostCPU
from mlirtune.targets.measured_facts import cache_key

IDENTITY = {"model": "a test CPU", "isa": "avx2", "flags": ["avx2", "fma"]}
KEY = cache_key(IDENTITY) + fma_in_flight.SUFFIX


@pytest.fixture
def unpinned(monkeypatch, peaks_file):
    """No figure given: the cache decides, and each measurement is counted (10 FMAs)."""
    monkeypatch.delenv(fma_in_flight.VARIABLE)
    calls = []
    monkeypatch.setattr(
        fma_in_flight, "_measure_in_child", lambda isa, n: calls.append(isa) or 10.0
    )
    return calls


def test_measured_once_then_cached(unpinned, peaks_file):
    assert fma_in_flight.host_fma_in_flight(IDENTITY, 8) == 10
    assert fma_in_flight.host_fma_in_flight(IDENTITY, 8) == 10
    assert unpinned == ["avx2"]  # measured at the ISA the kernels use
    assert json.loads(peaks_file.read_text()) == {KEY: 10.0}


@pytest.mark.parametrize("corrupt", ["-3", "0", "1e9", '"eight"', "true", "NaN"])
def test_a_corrupt_cached_figure_is_measured_again(unpinned, peaks_file, corrupt):
    peaks_file.parent.mkdir(parents=True)
    peaks_file.write_text(f'{{"{KEY}": {corrupt}}}')
    assert fma_in_flight.host_fma_in_flight(IDENTITY, 8) == 10
    assert len(unpinned) == 1
    assert json.loads(peaks_file.read_text()) == {KEY: 10.0}


def test_a_failed_measurement_warns_takes_the_nominal_figure_and_caches_nothing(
    monkeypatch, peaks_file
):
    monkeypatch.delenv(fma_in_flight.VARIABLE)

    def fail(isa, nominal):
        raise fma_in_flight.MeasurementFailed("the micro-benchmark exited 3: boom")

    monkeypatch.setattr(fma_in_flight, "_measure_in_child", fail)
    with pytest.warns(UserWarning, match="boom.*taking 8"):
        assert fma_in_flight.host_fma_in_flight(IDENTITY, 8) == 8
    assert not peaks_file.exists()


def test_the_variable_gives_the_figure(monkeypatch):
    monkeypatch.setenv(fma_in_flight.VARIABLE, "12")
    assert fma_in_flight.host_fma_in_flight(IDENTITY, 8) == 12


@pytest.mark.parametrize("given", ["0", "-4", "eight", "8.5", "99"])
def test_a_bad_variable_is_a_usage_error_naming_it(monkeypatch, given):
    monkeypatch.setenv(fma_in_flight.VARIABLE, given)
    with pytest.raises(UsageError, match=f"{fma_in_flight.VARIABLE}=.*whole number from 1"):
        fma_in_flight.host_fma_in_flight(IDENTITY, 8)


@pytest.mark.subprocess
def test_the_child_measures_this_host():
    """The real measurement, in its child process: whole cycles of latency on FMA_UNITS
    pipes, from one pipe of 2 cycles to the most the chains could show."""
    figure = fma_in_flight._measure_in_child(HostCPU().features.isa, 8)
    assert figure % FMA_UNITS == 0
    assert 4 <= figure <= peak.fma_chains(HostCPU())
