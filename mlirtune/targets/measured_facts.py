"""Figures measured on this host (its FMA peak, its FMAs in flight, its bandwidth), cached
per CPU and boot in `$XDG_CACHE_HOME/mlirtune/peaks.json` (else ~/.cache): one flat object
of positive numbers, keyed on the target's fingerprint digest and this boot of the machine
(`cache_key`), then a suffix naming the figure.

An entry that is unreadable, not a positive finite number or out of its figure's range is
measured again, and so is one from another boot: one CPU model runs at other clocks on other
machines (a VM measured 216 GFLOP/s on one boot, 192 on the next). The measurements
themselves live where they can run kernels (mlirtune.peak); this module only keeps them.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable
from pathlib import Path

from mlirtune.files import cache_dir, write_atomic
from mlirtune.toolchain import digest

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def facts_cache_path() -> Path:
    return cache_dir() / "peaks.json"


def cache_key(fingerprint: dict[str, object]) -> str:
    """Where a figure of the target with `fingerprint` is cached: the fingerprint's digest,
    then `@` and this boot's id (Linux's boot_id; empty where there is none)."""
    return f"{digest(fingerprint)}@{_boot_id()}"


def cached(
    key: str, measure: Callable[[], float], valid: Callable[[float], bool] | None = None
) -> float:
    """The cached value under `key` where it is plausible (and `valid`), or `measure()` now,
    stored beside the others (read again just before writing, so an entry another process
    added meanwhile is kept). A measurement that raises stores nothing."""
    path = facts_cache_path()
    value = _read(path).get(key)
    if value is not None and (valid is None or valid(value)):
        return value
    value = measure()
    machine = key.split("/")[0]  # the entries of other boots of this CPU are stale
    kept = {k: v for k, v in _read(path).items() if not _other_boot(k, machine)}
    _write(path, {**kept, key: value})
    return value


def _boot_id() -> str:
    try:
        return BOOT_ID.read_text().strip()
    except OSError:
        return ""


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
    """The cached figures; an unreadable or malformed file counts as empty, and an entry
    that is not a positive finite number as absent."""
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(document, dict):
        return {}
    return {key: value for key, value in document.items() if _plausible(value)}


def _write(path: Path, figures: dict[str, float]) -> None:
    """Replace the cache atomically, so a killed run never leaves half a file; a cache that
    cannot be written only means measuring again next time."""
    with contextlib.suppress(OSError):
        write_atomic(path, json.dumps(figures, indent=1, sort_keys=True).encode())
