"""The host's FMA peak, its bf16 and int8 dot products' peaks and its streaming read
bandwidth, each measured once with a JIT micro-benchmark and cached per CPU.

The nominal peak (lanes x 2 x FMA pipes x clock) is wrong wherever a core splits wide FMAs
or runs at another clock, so "% of peak" is reported against a measurement instead: the
`fma_peak` workload (`bf16_dot_peak` for bf16 on AVX512-BF16, `int8_dot_peak` for int8 on
AVX2 and later, `amx_peak` for either on AMX), timed like any kernel.
Memory-bound kernels are held against the bandwidth one core reads an array past the
last-level cache at: the `stream_read` workload. The FMAs a core keeps in flight, which
the selectors' register tiles must cover, are the rate of many FMA chains over one's
(`measure_fma_in_flight`). All are kept per CPU and boot by targets/measured_facts.py: the
FMA peak under `cache_key`, the others under that key + BF16_DOT_SUFFIX, INT8_DOT_SUFFIX,
AMX_SUFFIXES and BANDWIDTH_SUFFIX (the FMAs in flight: targets/fma_in_flight.py); a stale
or corrupt figure is measured again (a stale peak would misstate every "% of peak").
"""

from __future__ import annotations

from mlirtune.api import engine_for
from mlirtune.interfaces.bench import BenchOptions
from mlirtune.interfaces.workload import Complexity
from mlirtune.targets import measured_facts
from mlirtune.targets.host_cpu import COMPUTE_BITS, FMA_UNITS, HostCPU
from mlirtune.targets.measured_facts import cached
from mlirtune.workloads.fma_peak import CHAINS, AmxPeak, Bf16DotPeak, FmaPeak, Int8DotPeak
from mlirtune.workloads.stream_read import StreamRead

PEAK_OPTIONS = BenchOptions(max_time_s=0.3)
# Passes over the one-chain and all-chain rates when the FMAs in flight are measured.
IN_FLIGHT_PASSES = 3
BANDWIDTH_SUFFIX = "/stream_read_gbs"
BF16_DOT_SUFFIX = "/bf16_dot_gflops"
INT8_DOT_SUFFIX = "/int8_dot_gops"
# The AMX tile products' peaks, per operand type (HostCPU.has_amx).
AMX_SUFFIXES = {"bf16": "/amx_bf16_gflops", "i8": "/amx_int8_gops"}
MIN_STREAM_BYTES = 256 << 20


def measure_f32_peak(target: HostCPU) -> float:
    """GFLOP/s of independent f32 FMA chains on one core of `target` (this host), from the
    fastest sample: on a shared machine, slower ones measure the neighbours too."""
    return _best_gflops(target, FmaPeak(lanes=target.lanes("f32"), chains=fma_chains(target)))


def fma_chains(target: HostCPU) -> int:
    """Accumulators the FMA peak's loop keeps in `target`'s registers beside its b and c."""
    return min(CHAINS, target.features.vector_registers - 2)


def measure_fma_in_flight(target: HostCPU) -> float:
    """Independent FMAs one core of `target` (this host) keeps in flight, pipes x latency:
    the rate of fma_chains(target) independent FMA chains, which fill the pipes, over one
    chain's, which waits out each FMA's latency, rounded to whole cycles of latency per
    FMA_UNITS pipes. Each rate is the best of IN_FLIGHT_PASSES interleaved passes: on a
    shared host, a neighbour's burst slows one of them. An Intel Xeon (two pipes of 4
    cycles) measured ratios of 7.2-7.7, on AVX2's and AVX-512's widths alike: 8."""
    lanes = target.lanes("f32")
    one, full = FmaPeak(lanes=lanes, chains=1), FmaPeak(lanes=lanes, chains=fma_chains(target))
    one_rate = full_rate = 0.0
    for _ in range(IN_FLIGHT_PASSES):
        one_rate = max(one_rate, _best_gflops(target, one))
        full_rate = max(full_rate, _best_gflops(target, full))
    return FMA_UNITS * max(1, round(full_rate / one_rate / FMA_UNITS))


def measure_bf16_dot_peak(target: HostCPU) -> float:
    """GFLOP/s of independent AVX512-BF16 dot-product chains on one core of `target` (this
    host, which has them), from the fastest sample."""
    return _best_gflops(target, Bf16DotPeak())


def measure_int8_dot_peak(target: HostCPU) -> float:
    """GOP/s of independent vpmaddwd + vpaddd chains, the int8 dot path's instructions, on
    one core of `target` (this host, which has them), from the fastest sample."""
    return _best_gflops(target, Int8DotPeak(chains=fma_chains(target)))


def measure_amx_peak(target: HostCPU, dtype: str) -> float:
    """GFLOP/s (GOP/s for int8) of independent AMX tile-product chains of `dtype` on one
    core of `target` (this host, whose CPU and OS grant AMX tiles), from the fastest sample."""
    return _best_gflops(target, AmxPeak(dtype=dtype))


def measured_peak_gflops(target: HostCPU, dtype: str = "f32") -> float:
    """The measured per-core peak for `dtype`, from the cache or measured now and cached:
    the FMA's (f64 has half the lanes of f32; bf16 and f16 compute in f32, int8 in int32
    on the FMA path), and for bf16 on a target with AVX512-BF16 (HostCPU.has_bf16_dot), or
    int8 on one with AVX2 (HostCPU.has_int8_dot), the faster of that and its dot
    products'. Their rate is measured too, not derived from the FMA's: bf16's is twice
    the FMA's FLOPs on a Zen 4 core (216 against 118 GFLOP/s), half of them on an Intel
    Xeon (88 against 175); int8's 1.8 times them on an AMD Zen 3 (182 GOP/s against 101
    GFLOP/s). Where the target has AMX tiles for `dtype` (HostCPU.has_amx), their peak
    too: 3740 GFLOP/s for bf16 and 7500 GOP/s for int8 on one core of a Xeon with AMX."""
    core = _one_core(target)
    f32 = cached(cache_key(core), lambda: measure_f32_peak(core))
    peak = f32 * 32 / COMPUTE_BITS.get(dtype, 32)
    if dtype == "bf16" and target.has_bf16_dot():
        dot = cached(cache_key(core) + BF16_DOT_SUFFIX, lambda: measure_bf16_dot_peak(core))
        peak = max(peak, dot)
    elif dtype == "i8" and target.has_int8_dot():
        dot = cached(cache_key(core) + INT8_DOT_SUFFIX, lambda: measure_int8_dot_peak(core))
        peak = max(peak, dot)
    if dtype in AMX_SUFFIXES and target.has_amx(dtype):
        suffix = AMX_SUFFIXES[dtype]
        peak = max(peak, cached(cache_key(core) + suffix, lambda: measure_amx_peak(core, dtype)))
    return peak


def _best_gflops(target: HostCPU, workload: FmaPeak) -> float:
    result = engine_for(target, use_specs=False).benchmark(workload, options=PEAK_OPTIONS)
    return result.complexity.flops / result.stats.min / 1e9  # the best run: a peak


def stream_read_kib(target: HostCPU) -> int:
    """The streamed array's size: 4 x L3, so that no cache holds it, and at least 256 MiB."""
    return max(4 * target.features.l3_bytes, MIN_STREAM_BYTES) // 1024


def measure_stream_gbs(target: HostCPU) -> float:
    """GB/s at which one core of `target` (this host) reads an array past its L3, from the
    fastest sample (as for the FMA peak)."""
    workload = StreamRead(kib=stream_read_kib(target), lanes=target.lanes("f32"))
    result = engine_for(target, use_specs=False).benchmark(workload, options=PEAK_OPTIONS)
    moved = result.complexity.bytes_read + result.complexity.bytes_written
    return moved / result.stats.min / 1e9  # the best run: a peak


def measured_bandwidth_gbs(target: HostCPU) -> float:
    """The measured per-core streaming read bandwidth in GB/s, from the cache or measured
    now and cached."""
    core = _one_core(target)
    key = cache_key(core) + BANDWIDTH_SUFFIX
    return cached(key, lambda: measure_stream_gbs(core))


def cache_key(target: HostCPU) -> str:
    """Where a figure of `target` is cached (measured_facts.cache_key)."""
    return measured_facts.cache_key(target.fingerprint())


def _one_core(target: HostCPU) -> HostCPU:
    """`target` on one thread: per-core figures are measured and keyed on one core."""
    return target if target.threads == 1 else HostCPU(target.features)


def memory_bound_gbs(target: HostCPU, complexity: Complexity, dtype: str = "f32") -> float | None:
    """The measured bandwidth when a workload of this complexity is memory-bound on
    `target`, else None. Memory-bound: what one call moves does not fit in L3 (repeated
    calls cannot run from cache), and it moves more bytes per FLOP than the host's measured
    balance (bandwidth / FMA peak). Small workloads are never measured against it."""
    moved = complexity.bytes_read + complexity.bytes_written
    if not complexity.flops or moved <= target.features.l3_bytes:
        return None
    bandwidth = measured_bandwidth_gbs(target)
    balance = bandwidth / measured_peak_gflops(target, dtype)
    return bandwidth if moved / complexity.flops > balance else None


def _print_fma_in_flight() -> None:
    """`python -m mlirtune.peak`: what HostCPU's detection runs in a child process
    (targets/fma_in_flight.py), printing the figure alone."""
    print(measure_fma_in_flight(HostCPU()))


if __name__ == "__main__":
    _print_fma_in_flight()
