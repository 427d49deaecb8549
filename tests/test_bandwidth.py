"""The measured streaming read bandwidth: a JIT micro-benchmark cached beside the FMA peak,
never trusted when its entry is corrupt, and what it means for the tune report."""

from __future__ import annotations

import json

import pytest

from mlirtune import peak
from mlirtune.api import engine_for
from mlirtune.cli.tune_report import print_report
from mlirtune.interfaces.errors import UsageError
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.tune.db_records import Verdict
from mlirtune.tune.outcome import Outcome
from mlirtune.tune.problem import generate
from mlirtune.tune.results import TuneReport
from mlirtune.workloads import Matmul
from mlirtune.workloads.stream_read import CHAINS, StreamRead

PEAK_GFLOPS, BANDWIDTH_GBS = 100.0, 20.0  # a balance of 0.2 bytes per FLOP
# This host with a 32 MiB L3, which a 1 x 11008 x 4096 matvec's 180 MB do not fit in
PAST_L3 = HostCPU(l3_bytes=32 << 20)


@pytest.fixture
def measurements(monkeypatch):
    """Record measurements instead of running them: 100 GFLOP/s and 20 GB/s."""
    calls = []

    def measure(kind, value):
        def run(target):
            calls.append(kind)
            return value

        return run

    monkeypatch.setattr(peak, "measure_f32_peak", measure("fma", PEAK_GFLOPS))
    monkeypatch.setattr(peak, "measure_stream_gbs", measure("stream", BANDWIDTH_GBS))
    return calls


def keys(target: HostCPU) -> tuple[str, str]:
    fma = peak.cache_key(target)
    return fma, fma + peak.BANDWIDTH_SUFFIX


def test_measured_once_per_cpu_then_cached_beside_the_peak(peaks_file, measurements):
    target = HostCPU()
    assert peak.measured_bandwidth_gbs(target) == BANDWIDTH_GBS
    assert peak.measured_bandwidth_gbs(target) == BANDWIDTH_GBS
    assert peak.measured_peak_gflops(target) == PEAK_GFLOPS
    assert measurements == ["stream", "fma"]
    fma, stream = keys(target)
    assert json.loads(peaks_file.read_text()) == {fma: PEAK_GFLOPS, stream: BANDWIDTH_GBS}
    peak.measured_bandwidth_gbs(HostCPU(l3_bytes=2 * target.features.l3_bytes))  # another CPU
    assert measurements == ["stream", "fma", "stream"]


def test_an_old_cache_with_fma_peaks_only_is_still_read(peaks_file, measurements):
    target = HostCPU()
    fma, stream = keys(target)
    peaks_file.parent.mkdir(parents=True)
    peaks_file.write_text(json.dumps({fma: 123.0, "someone else": 7.0}))
    assert peak.measured_peak_gflops(target) == 123.0
    assert peak.measured_bandwidth_gbs(target) == BANDWIDTH_GBS
    assert measurements == ["stream"]
    assert json.loads(peaks_file.read_text()) == {fma: 123.0, "someone else": 7.0, stream: 20.0}


@pytest.mark.parametrize("entry", ["-3", '"fast"', "NaN", "Infinity", "0", "true", "[20]"])
def test_a_corrupt_bandwidth_entry_is_measured_again(peaks_file, measurements, entry):
    target = HostCPU()
    fma, stream = keys(target)
    peaks_file.parent.mkdir(parents=True)
    peaks_file.write_text(f'{{"{fma}": 50.0, "{stream}": {entry}}}')
    assert peak.measured_bandwidth_gbs(target) == BANDWIDTH_GBS
    assert measurements == ["stream"]
    assert json.loads(peaks_file.read_text()) == {fma: 50.0, stream: BANDWIDTH_GBS}


def test_the_streamed_array_is_sized_past_the_last_level_cache():
    assert peak.stream_read_kib(HostCPU(l3_bytes=32 << 20)) == 256 << 10  # the floor
    assert peak.stream_read_kib(HostCPU(l3_bytes=96 << 20)) == 384 << 10  # 4 x L3


def test_memory_bound_means_past_l3_and_above_the_balance(peaks_file, measurements):
    target = PAST_L3
    small = Matmul(M=1, N=256, K=256).get_complexity()  # cache-resident: nothing measured
    assert peak.memory_bound_gbs(target, small) is None
    assert measurements == []
    matvec = Matmul(M=1, N=11008, K=4096).get_complexity()  # ~2 bytes per FLOP
    assert peak.memory_bound_gbs(target, matvec) == BANDWIDTH_GBS
    square = Matmul(M=4096, N=4096, K=4096).get_complexity()  # ~0.001 bytes per FLOP
    assert peak.memory_bound_gbs(target, square) is None


def tune_report(workload: Matmul, median_s: float) -> TuneReport:
    """A report whose search found nothing but the baseline, measured at `median_s`."""
    problem = generate(workload, PAST_L3)
    baseline = Outcome("ok", samples=(median_s,) * 3, flops=workload.get_complexity().flops)
    verdict = Verdict(problem.baseline, problem.baseline, False, 1.0, median_s)
    return TuneReport(problem, "random", [], 0, baseline, baseline, {}, None, verdict, [])


def test_the_tune_report_gives_a_memory_bound_workload_its_share_of_bandwidth(
    peaks_file, measurements, capsys
):
    workload = Matmul(M=1, N=11008, K=4096)
    complexity = workload.get_complexity()
    moved = complexity.bytes_read + complexity.bytes_written
    print_report(tune_report(workload, moved / 10e9), PAST_L3)  # 10 GB/s: half of 20
    out = capsys.readouterr().out
    assert "% bandwidth" in out and " 10.0 " in out and " 50% " in out
    assert "memory-bound" in out and "measured 20.0 GB/s" in out
    print_report(tune_report(Matmul(M=64, N=64, K=64), 1e-5), HostCPU())
    assert "bandwidth" not in capsys.readouterr().out


def test_sizes_that_break_the_rows_or_exactness_are_refused():
    with pytest.raises(UsageError, match="whole number of 2048-byte rows"):
        StreamRead(kib=1, lanes=32)
    with pytest.raises(UsageError, match="exact"):
        StreamRead(kib=16 << 20, lanes=4)


@pytest.mark.jit
@pytest.mark.parametrize("isa", ["avx512", "avx2"])
def test_the_micro_benchmark_verifies_and_counts_its_bytes(isa):
    target = HostCPU(isa=isa)
    if target.features.vector_bits > HostCPU().features.vector_bits:
        pytest.skip(f"{isa} is wider than this host")
    workload = StreamRead(kib=64, lanes=target.lanes("f32"))
    assert engine_for(target, use_specs=False).execute(workload).verification.ok
    complexity = workload.get_complexity()
    assert complexity.bytes_read == 64 << 10
    assert complexity.flops == (64 << 10) // 4
    assert complexity.bytes_written == 4 * CHAINS * workload.options["lanes"]
