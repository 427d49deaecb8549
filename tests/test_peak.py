"""The measured FMA peak: a JIT micro-benchmark, cached per CPU fingerprint, and never
trusted when its cache entry is corrupt."""

from __future__ import annotations

import dataclasses
import json

import pytest

from mlirtune import peak
from mlirtune.api import engine_for
from mlirtune.ir.inspect import intrinsics_called
from mlirtune.schedules.contraction.steps.pair_products import PAIR_LANES, PMADDWD
from mlirtune.targets import host_cpu
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.toolchain import digest
from mlirtune.workloads.fma_peak import (
    AMX_CHAINS,
    CHAINS,
    DOT_LANES,
    STEPS,
    AmxPeak,
    Bf16DotPeak,
    FmaPeak,
    Int8DotPeak,
)
from tests.targets.test_targets_host import AVX512


@pytest.fixture
def measurements(monkeypatch):
    """Count measurements instead of running them: each returns 100 GFLOP/s."""
    calls = []

    def measure(target):
        calls.append(target)
        return 100.0

    monkeypatch.setattr(peak, "measure_f32_peak", measure)
    monkeypatch.setattr(peak, "measure_bf16_dot_peak", lambda target: calls.append(target) or 60.0)
    monkeypatch.setattr(peak, "measure_int8_dot_peak", lambda target: calls.append(target) or 70.0)
    monkeypatch.setattr(peak, "measure_amx_peak", lambda target, _: calls.append(target) or 80.0)
    return calls


def test_measured_once_per_cpu_then_cached(peaks_file, measurements):
    target = HostCPU()
    assert peak.measured_peak_gflops(target, "f32") == 100.0
    assert peak.measured_peak_gflops(target, "f64") == 50.0  # half the lanes
    # bf16 computes in f32 (the FMA's 100), or in dot products where the target has them
    # (here measured at 60) or AMX tiles (80): the fastest of them is the peak
    assert peak.measured_peak_gflops(target, "bf16") == 100.0
    extra = target.has_bf16_dot() + target.has_amx()
    assert len(measurements) == 1 + extra
    expected = {peak.cache_key(target): 100.0}
    if target.has_bf16_dot():
        expected[peak.cache_key(target) + peak.BF16_DOT_SUFFIX] = 60.0
    if target.has_amx():
        expected[peak.cache_key(target) + peak.AMX_SUFFIXES["bf16"]] = 80.0
    assert json.loads(peaks_file.read_text()) == expected
    other = HostCPU(l2_bytes=2 * target.features.l2_bytes)  # another CPU, another fingerprint
    peak.measured_peak_gflops(other)
    assert len(measurements) == 2 + extra
    assert len(json.loads(peaks_file.read_text())) == 2 + extra


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


def test_the_chains_stay_in_the_register_file():
    """AVX2's 16 registers hold 14 chains beside b and c (with 16 they spilled, and an AMD
    Zen 3's peak read 59 GFLOP/s against 103 with 14)."""
    assert peak.fma_chains(HostCPU(isa="avx512")) == CHAINS
    assert peak.fma_chains(HostCPU(isa="avx2")) == 14


@pytest.mark.jit
@pytest.mark.parametrize("isa", ["avx2", "avx512"])
def test_the_micro_benchmark_verifies_and_counts_its_flops(isa):
    """With the target's chains, as measure_f32_peak runs it."""
    if isa == "avx512" and HostCPU().features.isa != "avx512":
        pytest.skip("this host has no AVX-512")
    target = HostCPU(isa=isa)
    workload = FmaPeak(lanes=target.lanes("f32"), chains=peak.fma_chains(target))
    assert engine_for(target, use_specs=False).execute(workload).verification.ok
    lanes, chains = workload.options["lanes"], workload.options["chains"]
    assert workload.get_complexity().flops == 2 * STEPS * chains * lanes
    assert peak.measure_f32_peak(target) > 0


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


def test_faster_bf16_dot_products_are_the_bf16_peak(peaks_file, monkeypatch):
    """Where the dot products outrun the FMA (a Zen 4 core), they set bf16's peak; where
    the target has none, they are not measured."""
    monkeypatch.setattr(peak, "measure_f32_peak", lambda target: 100.0)
    monkeypatch.setattr(peak, "measure_bf16_dot_peak", lambda target: 180.0)
    with_dot = HostCPU(dataclasses.replace(AVX512, flags=AVX512.flags | {"avx512_bf16"}))
    without = HostCPU(AVX512)
    assert peak.measured_peak_gflops(with_dot, "bf16") == 180.0
    assert peak.measured_peak_gflops(with_dot, "f32") == 100.0
    assert peak.measured_peak_gflops(without, "bf16") == 100.0


@pytest.mark.jit
def test_the_dot_micro_benchmark_verifies_where_the_host_has_avx512_bf16():
    if not HostCPU().has_bf16_dot():
        pytest.skip("needs avx512_bf16, which this host lacks")
    workload = Bf16DotPeak()
    assert engine_for(HostCPU(), use_specs=False).execute(workload).verification.ok
    assert workload.get_complexity().flops == 4 * STEPS * CHAINS * DOT_LANES
    assert peak.measure_bf16_dot_peak(HostCPU()) > 0


def test_faster_int8_dot_products_are_the_int8_peak(peaks_file, monkeypatch):
    """Where vpmaddwd outruns the FMA (an AMD Zen 3: 182 GOP/s against 101 GFLOP/s) it
    sets int8's peak, cached apart from the FMA's; a target without AVX2 has the FMA's."""
    monkeypatch.setattr(peak, "measure_f32_peak", lambda target: 100.0)
    monkeypatch.setattr(peak, "measure_int8_dot_peak", lambda target: 160.0)
    avx2 = HostCPU(isa="avx2")
    assert peak.measured_peak_gflops(avx2, "i8") == 160.0
    assert peak.measured_peak_gflops(avx2, "f32") == 100.0
    assert peak.measured_peak_gflops(HostCPU(isa="sse"), "i8") == 100.0
    cached = json.loads(peaks_file.read_text())
    assert cached[peak.cache_key(avx2) + peak.INT8_DOT_SUFFIX] == 160.0


def test_amx_tiles_set_the_bf16_and_int8_peaks_where_granted(peaks_file, monkeypatch):
    """AMX tile products outrun every vector unit (3740 GFLOP/s bf16 on one Xeon core): on a
    target with AMX whose OS grants it, they are the bf16 and int8 peaks, cached apart; a
    refused grant leaves the vector peaks."""
    monkeypatch.setattr(peak, "measure_f32_peak", lambda target: 100.0)
    monkeypatch.setattr(peak, "measure_bf16_dot_peak", lambda target: 60.0)
    monkeypatch.setattr(peak, "measure_int8_dot_peak", lambda target: 70.0)
    amx_rates = {"bf16": 3000.0, "i8": 6000.0}
    monkeypatch.setattr(peak, "measure_amx_peak", lambda target, dtype: amx_rates[dtype])
    flags = AVX512.flags | {"avx512_bf16", "amx_tile", "amx_bf16", "amx_int8"}
    amx = HostCPU(dataclasses.replace(AVX512, flags=flags))
    monkeypatch.setattr(HostCPU, "runs_here", lambda self: True)  # the AMX host is this one
    monkeypatch.setattr(host_cpu, "amx_refusal", lambda: None)
    assert peak.measured_peak_gflops(amx, "bf16") == 3000.0
    assert peak.measured_peak_gflops(amx, "i8") == 6000.0
    assert peak.measured_peak_gflops(amx, "f32") == 100.0
    cached = json.loads(peaks_file.read_text())
    assert cached[peak.cache_key(amx) + peak.AMX_SUFFIXES["i8"]] == 6000.0
    monkeypatch.setattr(host_cpu, "amx_refusal", lambda: "refused for the peak test")
    with pytest.warns(UserWarning, match="refused for the peak test"):
        assert peak.measured_peak_gflops(amx, "bf16") == 100.0


@pytest.mark.jit
@pytest.mark.parametrize("dtype", ["bf16", "i8"])
def test_the_amx_micro_benchmark_verifies_where_the_host_grants_amx(dtype):
    workload = AmxPeak(dtype=dtype)
    k = 32 if dtype == "bf16" else 64
    assert workload.get_complexity().flops == 2 * 16 * 16 * k * STEPS * AMX_CHAINS
    if not HostCPU().has_amx(dtype):
        pytest.skip(f"needs {dtype} AMX tiles, which this host lacks or its OS refuses")
    assert engine_for(HostCPU(), use_specs=False).execute(workload).verification.ok


def test_slower_int8_dot_products_leave_the_fma_peak(peaks_file, measurements):
    assert peak.measured_peak_gflops(HostCPU(isa="avx2"), "i8") == 100.0  # the dot's 70


@pytest.mark.jit
def test_the_int8_dot_micro_benchmark_runs_the_dot_paths_instructions():
    """Lowered for AVX2 on any host, each step is one vpmaddwd (and an add); executed and
    verified where the host has AVX2."""
    target = HostCPU(isa="avx2")
    workload = Int8DotPeak(chains=peak.fma_chains(target))
    engine = engine_for(target, use_specs=False)
    assert PMADDWD in intrinsics_called(engine.compile(workload).module)
    assert workload.get_complexity().flops == 4 * PAIR_LANES * STEPS * 14
    if not HostCPU().has_int8_dot():
        pytest.skip("needs AVX2 to run, which this host lacks")
    assert engine.execute(workload).verification.ok
    assert peak.measure_int8_dot_peak(target) > 0
