"""The measured FMA peak: a JIT micro-benchmark, cached per CPU fingerprint, and never
trusted when its cache entry is corrupt."""

from __future__ import annotations

import json

import pytest

from mlirtune import peak
from mlirtune.api import engine_for
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.toolchain import digest
from mlirtune.workloads.fma_peak import CHAINS, STEPS, FmaPeak


@pytest.fixture
def measurements(monkeypatch):
    """Count measurements instead of running them: each returns 100 GFLOP/s."""
    calls = []

    def measure(target):
        calls.append(target)
        return 100.0

    monkeypatch.setattr(peak, "measure_f32_peak", measure)
    return calls


def test_measured_once_per_cpu_then_cached(peaks_file, measurements):
    target = HostCPU()
    assert peak.measured_peak_gflops(target, "f32") == 100.0
    assert peak.measured_peak_gflops(target, "f64") == 50.0  # half the lanes
    # bf16 computes in f32; dot products do two products per lane where the target has them
    bf16 = 200.0 if target.has_bf16_dot() else 100.0
    assert peak.measured_peak_gflops(target, "bf16") == bf16
    assert len(measurements) == 1
    assert json.loads(peaks_file.read_text()) == {peak.cache_key(target): 100.0}
    other = HostCPU(l2_bytes=2 * target.features.l2_bytes)  # another CPU, another fingerprint
    peak.measured_peak_gflops(other)
    assert len(measurements) == 2 and len(json.loads(peaks_file.read_text())) == 2


def test_a_multi_thread_target_reads_the_one_core_figure(peaks_file, measurements):
    cores = HostCPU().features.cores
    if cores < 2:
        pytest.skip("needs 2 cores, this host has 1")
    assert peak.measured_peak_gflops(HostCPU(threads=2)) == 100.0
    assert peak.measured_peak_gflops(HostCPU()) == 100.0
    assert [target.threads for target in measurements] == [1]  # measured once, on one core


@pytest.mark.parametrize(
    "content", ["{not json", "[1, 2]", '{"KEY": -3}', '{"KEY": "fast"}', '{"KEY": NaN}', ""]
)
def test_a_corrupt_cache_is_measured_again(peaks_file, measurements, content):
    target = HostCPU()
    peaks_file.parent.mkdir(parents=True)
    peaks_file.write_text(content.replace("KEY", peak.cache_key(target)))
    assert peak.measured_peak_gflops(target) == 100.0
    assert len(measurements) == 1
    assert json.loads(peaks_file.read_text()) == {peak.cache_key(target): 100.0}


def test_an_unwritable_cache_only_means_measuring_again(tmp_path, monkeypatch, measurements):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # a file where a folder must go
    assert peak.measured_peak_gflops(HostCPU()) == 100.0
    assert peak.measured_peak_gflops(HostCPU()) == 100.0
    assert len(measurements) == 2


@pytest.mark.jit
def test_the_micro_benchmark_verifies_and_counts_its_flops():
    workload = FmaPeak(lanes=HostCPU().lanes("f32"))
    assert engine_for(HostCPU(), use_specs=False).execute(workload).verification.ok
    assert workload.get_complexity().flops == 2 * STEPS * CHAINS * workload.options["lanes"]
    assert peak.measure_f32_peak(HostCPU()) > 0


def test_a_figure_from_another_boot_is_measured_again(peaks_file, measurements):
    target = HostCPU()
    fingerprint = digest(target.fingerprint())
    other = HostCPU(l2_bytes=2 * target.features.l2_bytes)
    peaks_file.parent.mkdir(parents=True)
    stale = {f"{fingerprint}@another-boot": 216.0, fingerprint: 216.0}  # and an unkeyed one
    kept = {peak.cache_key(other): 50.0}
    peaks_file.write_text(json.dumps({**stale, **kept}))
    assert peak.measured_peak_gflops(target) == 100.0 and len(measurements) == 1
    assert json.loads(peaks_file.read_text()) == {**kept, peak.cache_key(target): 100.0}
