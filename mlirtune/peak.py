"""The host's FMA peak, measured once with a JIT micro-benchmark and cached per CPU.

The nominal peak (lanes x 2 x FMA pipes x clock) is wrong wherever a core splits wide FMAs
or runs at another clock, so "% of peak" is reported against a measurement instead: the
`fma_peak` workload, timed like any kernel. The result is kept in
`$XDG_CACHE_HOME/mlirtune/peaks.json` (else ~/.cache), keyed by the target's fingerprint
digest; an entry that is unreadable or not a positive finite number is measured again.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path

from mlirtune.api import engine_for
from mlirtune.interfaces.bench import BenchOptions
from mlirtune.targets.host_cpu import COMPUTE_BITS, HostCPU
from mlirtune.toolchain import digest
from mlirtune.workloads.fma_peak import FmaPeak

PEAK_OPTIONS = BenchOptions(max_time_s=0.3)


def peak_cache_path() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "mlirtune" / "peaks.json"


def measure_f32_peak(target: HostCPU) -> float:
    """GFLOP/s of independent f32 FMA chains on one core of `target` (this host)."""
    workload = FmaPeak(lanes=target.lanes("f32"))
    return engine_for(target, use_specs=False).benchmark(workload, options=PEAK_OPTIONS).gflops


def measured_peak_gflops(target: HostCPU, dtype: str = "f32") -> float:
    """The measured per-core FMA peak for `dtype` (f64 has half the lanes of f32; bf16
    and f16 compute in f32), from the cache or measured now and cached."""
    path = peak_cache_path()
    key = digest(target.fingerprint())
    peaks = _read(path)
    f32 = peaks.get(key)
    if not _plausible(f32):
        f32 = measure_f32_peak(target)
        _write(path, {**peaks, key: f32})
    return f32 * 32 / COMPUTE_BITS.get(dtype, 32)


def _plausible(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


def _read(path: Path) -> dict[str, float]:
    """The cached peaks; an unreadable or malformed file counts as empty."""
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
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False) as handle:
            json.dump(peaks, handle, indent=1, sort_keys=True)
        os.replace(handle.name, path)
    except OSError:
        pass
