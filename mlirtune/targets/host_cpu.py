"""The host CPU target: feature detection and an analytic parameter selector.

`detect_features` reads what the kernel reports about the CPU (ISA flags, vector width,
per-core cache sizes); `HostCPU` turns those into descriptor folders to search and into
schedule parameters, from a register-and-cache model of each schedule. Nothing is measured:
the selector only does arithmetic on the features, so it is cheap and deterministic, and a
tuner can start from its choice.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import platform
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlirtune.errors import UsageError
from mlirtune.ir.roots import OpInfo
from mlirtune.schedules.contraction import CONTRACTION_PARAMETERS
from mlirtune.schedules.convolution import CONVOLUTION_PARAMETERS
from mlirtune.schedules.elementwise import ELEMENTWISE_PARAMETERS
from mlirtune.schedules.reduction import ROWWISE_PARAMETERS
from mlirtune.targets.base import Target

# (vector bits, vector registers) per ISA level on x86-64; "generic" is a 128-bit baseline.
ISA_VECTORS = {"avx512": (512, 32), "avx2": (256, 16), "sse": (128, 16), "generic": (128, 16)}
# Flags that matter to code generation; the rest of /proc/cpuinfo's list is left out.
RELEVANT_FLAG = re.compile(r"(avx|fma|sse|ssse|f16c|amx|asimd|sve|bf16|fp16|neon)")
# Used when sysfs says nothing: small enough to be true of any current core.
FALLBACK_CACHES = {"l1d_bytes": 32 << 10, "l2_bytes": 1 << 20, "l3_bytes": 8 << 20}
FALLBACK_GHZ = 3.0
FMA_UNITS = 2

# Bits of the type arithmetic runs in: bf16 (and f16) products are computed in f32.
COMPUTE_BITS = {"f64": 64, "f32": 32, "bf16": 32, "f16": 32}
ITEMSIZE = {"f64": 8, "f32": 4, "bf16": 2, "f16": 2}

# Accumulator registers a register tile aims for: two FMA pipes with a 4-cycle latency need
# 8 independent chains; 16 also hides the loads between them.
ACCUMULATORS = 16
# Largest output block (bytes) for a contraction cache tile smaller than the whole output:
# LLVM's compile time grows with the block (a 64x64 f32 block compiles in ~0.1 s, 128x128
# in ~0.5 s), for no gain once the block no longer fits in L1.
OUTPUT_BLOCK_BYTES = 32 << 10
# A divisor of the loop within [LOW, 1.25] x the modelled tile size is preferred to it.
LOW = 0.75


@dataclass(frozen=True)
class CpuFeatures:
    """What the selector needs to know about the host CPU. Cache sizes are per core."""

    arch: str
    model: str
    isa: str
    flags: frozenset[str]
    vector_bits: int
    vector_registers: int
    l1d_bytes: int
    l2_bytes: int
    l3_bytes: int
    cores: int
    ghz: float = FALLBACK_GHZ


@functools.cache
def detect_features() -> CpuFeatures:
    """The features of this machine, read once from /proc/cpuinfo and sysfs (Linux), with
    conservative fallbacks elsewhere."""
    return read_features(Path("/proc/cpuinfo"), Path("/sys/devices/system/cpu/cpu0/cache"))


def read_features(cpuinfo: Path, cache_dir: Path) -> CpuFeatures:
    """Features from a cpuinfo file and a sysfs cache folder; missing files give fallbacks."""
    info = _cpuinfo_fields(cpuinfo)
    arch = _normalise_arch(platform.machine())
    flags = frozenset(f for f in info.get("flags", info.get("Features", "")).split())
    isa = _isa_level(arch, flags)
    bits, registers = ISA_VECTORS[isa]
    if arch == "aarch64":
        registers = 32
    mhz = _number(info.get("cpu MHz", ""))
    return CpuFeatures(
        arch=arch,
        model=info.get("model name") or info.get("Model name") or platform.processor() or arch,
        isa=isa,
        flags=frozenset(f for f in flags if RELEVANT_FLAG.match(f)),
        vector_bits=bits,
        vector_registers=registers,
        **{**FALLBACK_CACHES, **_cache_sizes(cache_dir)},
        cores=os.cpu_count() or 1,
        ghz=mhz / 1000 if mhz else FALLBACK_GHZ,
    )


class HostCPU(Target):
    """The machine this process runs on, or one like it: `HostCPU(isa="avx2",
    l1d_bytes=32768)` replaces detected fields, e.g. to select for another CPU in tests."""

    name = "host"

    def __init__(self, features: CpuFeatures | None = None, **overrides: Any) -> None:
        features = features or detect_features()
        fields = {f.name for f in dataclasses.fields(CpuFeatures)}
        unknown = sorted(set(overrides) - fields)
        if unknown:
            raise UsageError(
                f"unknown CPU feature override(s) {', '.join(unknown)}; "
                f"known: {', '.join(sorted(fields))}",
                stage="target",
            )
        if "isa" in overrides:
            if overrides["isa"] not in ISA_VECTORS:
                raise UsageError(
                    f"unknown isa {overrides['isa']!r}; expected one of {', '.join(ISA_VECTORS)}",
                    stage="target",
                )
            bits, registers = ISA_VECTORS[overrides["isa"]]
            overrides = {"vector_bits": bits, "vector_registers": registers, **overrides}
        self.features = dataclasses.replace(features, **overrides)

    def __repr__(self) -> str:
        f = self.features
        return f"HostCPU({f.arch}/{f.isa}, {f.model!r})"

    def descriptor_search_path(self) -> list[str]:
        f = self.features
        if f.arch != "x86_64":
            return ["generic"]
        specific = [f"x86_64/{f.isa}"] if f.isa in ("avx512", "avx2") else []
        return [*specific, "x86_64", "generic"]

    def fingerprint(self) -> dict[str, Any]:
        f = self.features
        limited = {"llvm_target_features": self.llvm_target_features()}
        return {
            **(limited if limited["llvm_target_features"] else {}),
            "target": self.name,
            "arch": f.arch,
            "model": f.model,
            "isa": f.isa,
            "flags": sorted(f.flags),
            "l1d_bytes": f.l1d_bytes,
            "l2_bytes": f.l2_bytes,
            "l3_bytes": f.l3_bytes,
        }

    def llvm_target_features(self) -> list[str]:
        """A target below the host's ISA (e.g. `isa="avx2"` on an AVX-512 host) turns the
        host's wider features off; the JIT would use them otherwise. LLVM turns off every
        feature that implies the one named (-avx512f: all of AVX-512; -avx: AVX and up)."""
        if self.features.arch != "x86_64":
            return []
        return {"avx512": [], "avx2": ["-avx512f"]}.get(self.features.isa, ["-avx"])

    def spec_library_name(self) -> str | None:
        f = self.features
        return f"x86_64-{f.isa}" if f.arch == "x86_64" and f.isa in ("avx512", "avx2") else None

    def peak_gflops(self, dtype: str = "f32") -> float:
        """A rough per-core FMA peak: lanes x 2 flops x FMA_UNITS pipes x clock. An estimate
        for reporting efficiency, not a measurement: the clock is /proc/cpuinfo's current
        "cpu MHz" (boost and AVX-512 down-clocking are ignored) and some cores split a
        512-bit FMA over two 256-bit pipes."""
        return self.lanes(dtype) * 2 * FMA_UNITS * self.features.ghz

    def lanes(self, dtype: str) -> int:
        """Elements of the compute type of `dtype` per vector register."""
        return max(1, self.features.vector_bits // COMPUTE_BITS.get(dtype, 32))

    # --- parameter selection -----------------------------------------------------------

    def select_parameters(self, schedule: str, op: OpInfo) -> dict[str, int]:
        """Parameters for `schedule` on `op` from the register/cache model (see SELECTORS);
        exactly the names of that schedule's defaults."""
        try:
            selector, defaults = SELECTORS[schedule]
        except KeyError:
            raise UsageError(
                f"{self.name} has no parameter selector for schedule {schedule!r}; "
                f"known: {', '.join(SELECTORS)}",
                stage="select",
            ) from None
        chosen = selector(self, op)
        assert chosen.keys() == defaults.keys(), (schedule, chosen)
        return chosen

    def _register_tile(self, rows: int, columns: int, dtype: str) -> tuple[int, int]:
        """An outer-product register tile (rows x columns) for broadcast + FMA: columns span
        one or two vector registers; rows fill the register file with accumulators, leaving
        one register per column vector for the loaded operand and one for the broadcast."""
        lanes = self.lanes(dtype)
        cols = _vector_columns(columns, lanes)
        vectors = -(-cols // lanes)
        budget = max(1, (self.features.vector_registers - vectors - 1) // vectors)
        rows_tile = _fit(rows, min(budget, ACCUMULATORS // vectors), high=1.0)
        return rows_tile, cols

    def _contraction(self, op: OpInfo) -> dict[str, int]:
        """Register tile MR x NR; then KC, then the MC x NC output block.

        The schedule runs the register tiles of a block row by row, so A's micro-panel
        (MR x KC) is re-read from L1 by every tile of a row while B's micro-panels stream
        past it from L2: KC keeps A's panel in a quarter of L1, leaving the rest to the
        streamed lines (and to conflict misses: A's rows are K elements apart, often a
        multiple of 4 KiB). The output block is the whole output when it stays in L2 with
        the M x KC and KC x N panels across the K loop. Otherwise the A block (MC x KC) is
        sized to half of L1, because every column tile of the block re-reads it, and the
        B block (KC x NC) to half of L2, within OUTPUT_BLOCK_BYTES of output: few rows,
        many columns (16 x 512 f32 on a 32 KiB L1 / 1 MiB L2 core, measured 1.00x numpy at
        1024^3 against 0.84x for a 64 x 128 block).
        """
        f = self.features
        m, n, k = op.dims["M"], op.dims["N"], op.dims["K"]
        dtype = op.element_type
        size_in, size_out = ITEMSIZE.get(dtype, 4), ITEMSIZE.get(op.dtypes[-1], 4)
        mr, nr = self._register_tile(m, n, dtype)
        kc = _fit(k, f.l1d_bytes // 4 // (mr * size_in), pow2=True)
        if m * n * size_out + (m + n) * kc * size_in <= f.l2_bytes:
            mc, nc = m, n
        else:
            block = OUTPUT_BLOCK_BYTES // size_out
            a_rows = f.l1d_bytes // 2 // (kc * size_in)
            mc = _fit(m, max(mr, a_rows - a_rows % mr), step=mr, pow2=True)
            b_columns = f.l2_bytes // 2 // (kc * size_in)
            nc = _fit(n, max(nr, min(b_columns, block // mc)), step=nr, pow2=True)
        return {"MC": mc, "NC": nc, "KC": kc, "MR": min(mr, mc), "NR": min(nr, nc)}

    def _convolution(self, op: OpInfo) -> dict[str, int]:
        """An OW_TILE x F_TILE register tile like the contraction's MR x NR (output pixels
        broadcast against filter rows), and C_TILE channels per filter step: a divisor of C
        up to the vector width, so each step's unrolled FMAs stay within one L1 line of
        input channels per pixel."""
        dims = op.dims
        ow_tile, f_tile = self._register_tile(dims["OW"], dims["F"], op.element_type)
        line_elements = 64 // ITEMSIZE.get(op.element_type, 4)
        c_tile = _fit(dims["C"], min(4, line_elements), high=1.0)
        return {"OW_TILE": ow_tile, "F_TILE": f_tile, "C_TILE": c_tile}

    def _vector_tile(self, op: OpInfo, register_share: float) -> dict[str, int]:
        """ROWS x COLS tiles for element-wise and row-wise schedules: COLS spans four vectors
        (long contiguous runs for the prefetcher), ROWS fills `register_share` of the
        register file with one tile of values."""
        lanes = self.lanes(op.element_type)
        rows, cols = op.dims["ROWS"], op.dims["COLS"]
        cols_tile = _fit(cols, 4 * lanes, step=min(lanes, cols))
        vectors = max(1, -(-cols_tile // lanes))
        budget = int(self.features.vector_registers * register_share) // vectors
        rows_tile = _fit(rows, max(1, budget), high=1.0)
        return {"ROWS": rows_tile, "COLS": cols_tile}

    def _elementwise(self, op: OpInfo) -> dict[str, int]:
        # One row per tile: every row of a tile becomes its own unrolled run of vector ops,
        # and a single four-vector row streams best (measured 3-4.6x numpy on 1024^2 and
        # 300x500 chains, against 1.3-2.6x with eight-row tiles).
        return {**self._vector_tile(op, register_share=1.0), "ROWS": 1}

    def _rowwise(self, op: OpInfo) -> dict[str, int]:
        # Reductions keep a [ROWS, COLS] partial result live next to the loaded tile.
        return self._vector_tile(op, register_share=0.5)


Selector = Callable[[HostCPU, OpInfo], dict[str, int]]
SELECTORS: dict[str, tuple[Selector, dict[str, int]]] = {
    "contraction": (HostCPU._contraction, CONTRACTION_PARAMETERS),
    "convolution": (HostCPU._convolution, CONVOLUTION_PARAMETERS),
    "elementwise": (HostCPU._elementwise, ELEMENTWISE_PARAMETERS),
    "rowwise": (HostCPU._rowwise, ROWWISE_PARAMETERS),
}


# --- helpers -------------------------------------------------------------------------------


def _fit(dim: int, target: int, *, step: int = 1, high: float = 1.25, pow2: bool = False) -> int:
    """A tile size for a loop of `dim` iterations close to `target`, a multiple of `step`.

    A tile that divides the loop leaves no partial tile, which schedules peel into extra
    code (longer compiles, a slower remainder), so the divisor of `dim` closest to `target`
    wins if one lies within [target*LOW, target*high]. Otherwise `target` is rounded down
    to a multiple of `step` (and to a power of two with `pow2`). Never more than `dim`.
    """
    target = max(step, target)
    if dim <= target * high:
        return dim
    divisors = [
        d for d in range(step, int(target * high) + 1, step) if dim % d == 0 and d >= target * LOW
    ]
    if divisors:
        return min(divisors, key=lambda d: abs(math.log(d / target)))
    if pow2:
        return step * (1 << ((target // step).bit_length() - 1))
    return target // step * step


def _vector_columns(columns: int, lanes: int) -> int:
    """Columns of a register tile: two full vectors, or one where two would leave a
    remainder wider than one vector. Schedules peel the remainder into its own tile; one of
    at most one vector is a single partial register, while a wider odd one (e.g. 20 f32
    lanes) is split by LLVM into slow odd-sized pieces. A row narrower than a vector is
    taken whole."""
    if columns <= lanes:
        return columns
    return 2 * lanes if columns % (2 * lanes) <= lanes else lanes


def _cpuinfo_fields(path: Path) -> dict[str, str]:
    """`key: value` pairs of the first processor in /proc/cpuinfo ({} if unreadable)."""
    try:
        text = path.read_text()
    except OSError:
        return {}
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip() and fields:
            break
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    return fields


def _cache_sizes(cache_dir: Path) -> dict[str, int]:
    """Per-core data/unified cache sizes from sysfs `index*/{level,type,size}`."""
    names = {1: "l1d_bytes", 2: "l2_bytes", 3: "l3_bytes"}
    sizes: dict[str, int] = {}
    for index in sorted(cache_dir.glob("index*")):
        try:
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip()
            size = _parse_size((index / "size").read_text())
        except (OSError, ValueError):
            continue
        if level in names and kind in ("Data", "Unified") and size > 0:
            sizes[names[level]] = size
    return sizes


def _parse_size(text: str) -> int:
    """'48K' / '2048K' / '32M' / '1G' / '512' -> bytes."""
    match = re.fullmatch(r"\s*(\d+)\s*([KMG]?)i?B?\s*", text, re.IGNORECASE)
    if not match:
        raise ValueError(f"bad cache size {text!r}")
    scale = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[match.group(2).upper()]
    return int(match.group(1)) * scale


def _normalise_arch(machine: str) -> str:
    machine = machine.lower()
    return {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}.get(machine, machine)


def _isa_level(arch: str, flags: frozenset[str]) -> str:
    if arch != "x86_64":
        return "generic"
    if "avx512f" in flags:
        return "avx512"
    if "avx2" in flags and "fma" in flags:
        return "avx2"
    # SSE2 is part of x86-64 itself: only a flag list saying otherwise lowers the level.
    return "sse" if "sse2" in flags or not flags else "generic"


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return 0.0
