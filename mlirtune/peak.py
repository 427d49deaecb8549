"""The host's FMA peak, its bf16 and int8 dot products' peaks and its streaming read
bandwidth, each measured once with a JIT micro-benchmark and cached per CPU.

The nominal peak (lanes x 2 x FMA pipes x clock) is wrong wherever a core splits wide FMAs
or runs at another clock, so "% of peak" is reported against a measurement instead: the
`fma_peak` workload (`bf16_dot_peak` for bf16 on AVX512-BF16, `int8_dot_peak` for int8 on
AVX2 and later, `amx_peak` for either on AMX), timed like any kernel.
Memory-bound kernels are held against the bandwidth one core reads an array past the
last-level cache at: the `stream_read` workload. All are kept in
`$XDG_CACHE_HOME/mlirtune/peaks.json` (else ~/.cache), one flat object of positive numbers:
the FMA peak under `cache_key` (the target's fingerprint digest and this boot of the
machine), the dot products', the AMX tiles' and the bandwidth under that key +
BF16_DOT_SUFFIX, INT8_DOT_SUFFIX, AMX_SUFFIXES and BANDWIDTH_SUFFIX. An entry that is
unreadable or not a positive finite number is measured again, and so is one from another
boot: one CPU model runs at other clocks on other machines (a VM measured 216 GFLOP/s on
one boot, 192 on the next), and a stale figure misstates every "% of peak".
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Callable
from pathlib import Path

from mlirtune.api import engine_for
from mlirtune.files import write_atomic
from mlirtune.interfaces.bench import BenchOptions
from mlirtune.interfaces.workload import Complexity
from mlirtune.targets.host_cpu import COMPUTE_BITS, HostCPU
from mlirtune.toolchain import digest
from mlirtune.workloads.fma_peak import CHAINS, AmxPeak, Bf16DotPeak, FmaPeak, Int8DotPeak
from mlirtune.workloads.stream_read import StreamRead

PEAK_OPTIONS = BenchOptions(max_time_s=0.3)
BANDWIDTH_SUFFIX = "/stream_read_gbs"
BF16_DOT_SUFFIX = "/bf16_dot_gflops"
INT8_DOT_SUFFIX = "/int8_dot_gops"
# The AMX tile products' peaks, per operand type (HostCPU.has_amx).
AMX_SUFFIXES = {"bf16": "/amx_bf16_gflops", "i8": "/amx_int8_gops"}
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
MIN_STREAM_BYTES = 256 << 20


def peak_cache_path() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "mlirtune" / "peaks.json"


def measure_f32_peak(target: HostCPU) -> float:
    """GFLOP/s of independent f32 FMA chains on one core of `target` (this host), from the
    fastest sample: on a shared machine, slower ones measure the neighbours too."""
    return _best_gflops(target, FmaPeak(lanes=target.lanes("f32"), chains=fma_chains(target)))


def fma_chains(target: HostCPU) -> int:
    """Accumulators the FMA peak's loop keeps in `target`'s registers beside its b and c."""
    return min(CHAINS, target.features.vector_registers - 2)


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
    f32 = _cached(cache_key(core), lambda: measure_f32_peak(core))
    peak = f32 * 32 / COMPUTE_BITS.get(dtype, 32)
    if dtype == "bf16" and target.has_bf16_dot():
        dot = _cached(cache_key(core) + BF16_DOT_SUFFIX, lambda: measure_bf16_dot_peak(core))
        peak = max(peak, dot)
    elif dtype == "i8" and target.has_int8_dot():
        dot = _cached(cache_key(core) + INT8_DOT_SUFFIX, lambda: measure_int8_dot_peak(core))
        peak = max(peak, dot)
    if dtype in AMX_SUFFIXES and target.has_amx(dtype):
        suffix = AMX_SUFFIXES[dtype]
        peak = max(peak, _cached(cache_key(core) + suffix, lambda: measure_amx_peak(core, dtype)))
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
    return _cached(key, lambda: measure_stream_gbs(core))


def cache_key(target: HostCPU) -> str:
    """Where a figure of `target` is cached: its fingerprint's digest, then `@` and this
    boot's id (Linux's boot_id; empty where there is none)."""
    return f"{digest(target.fingerprint())}@{_boot_id()}"


def _boot_id() -> str:
    try:
        return BOOT_ID.read_text().strip()
    except OSError:
        return ""


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


def _cached(key: str, measure: Callable[[], float]) -> float:
    """The cached value under `key`, or `measure()` now, stored beside the others (read
    again just before writing, so an entry another process added meanwhile is kept)."""
    path = peak_cache_path()
    cached = _read(path).get(key)  # only plausible entries are read
    if cached is not None:
        return cached
    value = measure()
    machine = key.split("/")[0]  # the entries of other boots of this CPU are stale
    kept = {k: v for k, v in _read(path).items() if not _other_boot(k, machine)}
    _write(path, {**kept, key: value})
    return value


def _other_boot(key: str, machine: str) -> bool:
    """Whether `key` holds a figure of `machine`'s CPU (digest@boot) from another boot, or
    from before figures were keyed by boot (the digest alone)."""
    entry = key.split("/")[0]
    return entry != machine and entry.split("@")[0] == machine.split("@")[0]


def _plausible(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


def _read(path: Path) -> dict[str, float]:
    """The cached measurements; an unreadable or malformed file counts as empty, and an
    entry that is not a positive finite number as absent."""
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(document, dict):
        return {}
    return {key: value for key, value in document.items() if _plausible(value)}


def _write(path: Path, peaks: dict[str, float]) -> None:
    """Replace the cache atomically, so a killed run never leaves half a file; a cache that
    cannot be written only means measuring again next time."""
    with contextlib.suppress(OSError):
        write_atomic(path, json.dumps(peaks, indent=1, sort_keys=True).encode())
