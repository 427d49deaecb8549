"""The host CPU target, as facts: feature detection, ISA tables and what follows from them.

`detect_features` reads what the kernel reports about the CPU (ISA flags, vector width,
per-core cache sizes, vendor, family and model); `HostCPU` turns those into descriptor
folders to search, a fingerprint, a CPU class, the LLVM features the JIT must keep to, and
vector lanes per element type.
Choosing schedule parameters from these facts is each schedule family's job
(mlirtune.schedules, with the shared host model in mlirtune.schedules.cpu_model).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import platform
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.target import UNKNOWN_CLASS, Target
from mlirtune.targets.fma_in_flight import host_fma_in_flight
from mlirtune.targets.isa import ISA_LEVELS, ISA_VARIABLE, ISA_VECTORS, flag_level, isa_level
from mlirtune.targets.tile_state import amx_refusal

# Flags that matter to code generation; the rest of /proc/cpuinfo's list is left out.
RELEVANT_FLAG = re.compile(r"(avx|fma|sse|ssse|f16c|amx|asimd|sve|bf16|fp16|neon)")
# Used when sysfs says nothing: small enough to be true of any current core.
FALLBACK_CACHES = {
    "l1d_bytes": 32 << 10,
    "l2_bytes": 1 << 20,
    "l3_bytes": 8 << 20,
    "l1d_ways": 8,
    "l2_ways": 8,
    "l3_ways": 16,
    "line_bytes": 64,
}
FALLBACK_GHZ = 3.0
# FMA pipes per core, and the FMAs in flight where none were measured (two pipes of 4
# cycles' latency; CpuFeatures.fma_in_flight).
FMA_UNITS = 2
NOMINAL_FMA_IN_FLIGHT = FMA_UNITS * 4

# CPU classes: tuned configs carry over between CPUs of one class (one core design and cache
# hierarchy), not across classes. (vendor_id, cpu family, model ranges or None for every
# model, name); the first row that matches names the class. Model numbers as Linux assigns
# them: arch/x86/kernel/cpu/amd.c (Zen generations) and asm/intel-family.h.
AMD, INTEL = "AuthenticAMD", "GenuineIntel"
CPU_CLASSES: tuple[tuple[str, int, tuple[range, ...] | None, str], ...] = (
    (AMD, 0x19, (range(0x10, 0x20), range(0x60, 0xB0)), "amd-zen4"),
    (AMD, 0x19, None, "amd-zen3"),
    (AMD, 0x1A, None, "amd-zen5"),
    (INTEL, 6, (range(0x8F, 0x90),), "intel-sapphire-rapids"),
    (INTEL, 6, (range(0xCF, 0xD0),), "intel-emerald-rapids"),
    (INTEL, 6, (range(0xAD, 0xAF),), "intel-granite-rapids"),
    (INTEL, 6, (range(0x6A, 0x6B), range(0x6C, 0x6D)), "intel-ice-lake-sp"),
    (INTEL, 6, (range(0x55, 0x56),), "intel-skylake-sp"),
)
VENDOR_NAMES = {AMD: "amd", INTEL: "intel"}  # in the generic "<vendor>-f<family>-m<model>"

# Operand types AMX tiles multiply, each with the CPU flag of its tile product.
AMX_UNITS = {"bf16": "amx_bf16", "i8": "amx_int8"}
# Bits of the type arithmetic runs in: bf16 (and f16) products are computed in f32.
COMPUTE_BITS = {"f64": 64, "f32": 32, "bf16": 32, "f16": 32}
# The widest vectors an element type's kernels use, where narrower than the registers: int8
# kernels run AVX2's 256-bit vpmaddwd (contraction/dot.py), on AVX-512 hosts too.
KERNEL_BITS = {"i8": 256}


@dataclass(frozen=True)
class CpuFeatures:
    """What schedule families need to know about the host CPU. Cache sizes are per core."""

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
    l1d_ways: int = 8  # associativity of L1d: how many lines of one set it holds
    l2_ways: int = 8
    l3_ways: int = 16
    line_bytes: int = 64  # L1d line size
    vendor: str = ""  # cpuinfo's vendor_id, e.g. AuthenticAMD or GenuineIntel
    family: int = 0  # cpuinfo's cpu family and model numbers (0: not reported)
    model_number: int = 0
    # Independent FMAs a core keeps in flight (pipes x latency); measured for this host.
    fma_in_flight: int = NOMINAL_FMA_IN_FLIGHT


@functools.cache
def detect_features() -> CpuFeatures:
    """The features of this machine, read once from /proc/cpuinfo and sysfs (Linux), with
    conservative fallbacks elsewhere; restricted to MLIRTUNE_ISA where that is set; with
    the FMAs in flight measured at that ISA's width (fma_in_flight.py)."""
    features = read_features(Path("/proc/cpuinfo"), Path("/sys/devices/system/cpu/cpu0/cache"))
    isa = os.environ.get(ISA_VARIABLE, "").strip()
    return with_fma_in_flight(restrict_isa(features, isa, ISA_VARIABLE) if isa else features)


def with_fma_in_flight(features: CpuFeatures) -> CpuFeatures:
    """This host's `features` with the FMAs in flight at their ISA's width (fma_in_flight.py)."""
    identity = {"model": features.model, "isa": features.isa, "flags": sorted(features.flags)}
    in_flight = host_fma_in_flight(identity, NOMINAL_FMA_IN_FLIGHT)
    return dataclasses.replace(features, fma_in_flight=in_flight)


def restrict_isa(features: CpuFeatures, isa: str, origin: str = "--isa") -> CpuFeatures:
    """`features` with kernels restricted to `isa`, which may not be wider than the CPU's:
    its vector width and registers, and only the flags of that level and below (no AVX-512
    dot products or AMX tiles under avx2)."""
    if isa not in ISA_LEVELS:
        raise UsageError(
            f"{origin}={isa!r}: unknown ISA; give one of {', '.join(ISA_LEVELS)}", stage="target"
        )
    if ISA_LEVELS.index(isa) > ISA_LEVELS.index(features.isa):
        raise UsageError(
            f"{origin}={isa}: this CPU's widest ISA is {features.isa}; kernels can be "
            "restricted to a narrower one, not widened",
            stage="target",
        )
    bits, registers = ISA_VECTORS[isa]
    level = ISA_LEVELS.index(isa)
    flags = frozenset(f for f in features.flags if ISA_LEVELS.index(flag_level(f)) <= level)
    return dataclasses.replace(
        features, isa=isa, vector_bits=bits, vector_registers=registers, flags=flags
    )


def read_features(cpuinfo: Path, cache_dir: Path) -> CpuFeatures:
    """Features from a cpuinfo file and a sysfs cache folder; missing files give fallbacks."""
    info = _cpuinfo_fields(cpuinfo)
    arch = _normalise_arch(platform.machine())
    flags = frozenset(f for f in info.get("flags", info.get("Features", "")).split())
    isa = isa_level(arch, flags)
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
        vendor=info.get("vendor_id", ""),
        family=int(_number(info.get("cpu family", "")) or 0),
        model_number=int(_number(info.get("model", "")) or 0),
    )


class HostCPU(Target):
    """The machine this process runs on, or one like it: `HostCPU(isa="avx2",
    l1d_bytes=32768)` replaces detected fields, e.g. to select for another CPU in tests.
    `threads` is how many of its cores a kernel runs on (0: all of them; default 1)."""

    name = "host"

    def __init__(
        self, features: CpuFeatures | None = None, *, threads: int = 1, **overrides: Any
    ) -> None:
        features = features or detect_features()
        self.threads = _thread_count(threads, features.cores)
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
        threads = f", {self.threads} threads" if self.threads > 1 else ""
        return f"HostCPU({f.arch}/{f.isa}, {f.model!r}{threads})"

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
            # Only when parallel, so that one-thread keys stay those recorded before threads.
            **({"threads": self.threads} if self.threads > 1 else {}),
        }

    def pipeline_values(self) -> dict[str, int | str]:
        """THREADS: the cores the kernel's outer loops are spread over; ISA: the vector ISA
        code is generated for, which picks instruction-specific expansions, and VECTOR_BITS
        its registers' width, for schedules shaped by it (lower_cpu.yaml)."""
        return {
            "THREADS": self.threads,
            "ISA": self.features.isa,
            "VECTOR_BITS": self.features.vector_bits,
        }

    def has_bf16_dot(self) -> bool:
        """Whether kernels for this target may use 512-bit AVX512-BF16 dot products
        (vdpbf16ps, two bf16 products per f32 lane): the CPU flag, on a target lowered for
        AVX-512 (not one overridden to a lower ISA)."""
        return self.features.isa == "avx512" and "avx512_bf16" in self.features.flags

    def has_int8_dot(self) -> bool:
        """Whether kernels for this target may multiply int8 values (widened to int16) in
        pairs with AVX2's vpmaddwd, two products summed per int32 lane: a target lowered
        for AVX2 or AVX-512."""
        return self.features.isa in ("avx2", "avx512")

    def has_amx(self, dtype: str = "bf16") -> bool:
        """Whether kernels for this target may multiply `dtype` operands in AMX tiles (one
        of AMX_UNITS): the CPU flags, on a target lowered for AVX-512, and, where the
        kernels run here, Linux's grant of tile state to this process (asked once; a refusal
        warns, and the kernels take dot products or FMA instead)."""
        if dtype not in AMX_UNITS:
            return False
        flags = {"amx_tile", AMX_UNITS[dtype]}
        if self.features.isa != "avx512" or not flags <= self.features.flags:
            return False
        if not self.runs_here():  # another CPU's kernels are only compiled here
            return True
        refusal = amx_refusal()
        if refusal:
            _warn_once(f"{refusal}; bf16 and int8 kernels do without AMX tiles")
        return refusal is None

    def runs_here(self) -> bool:
        """Whether this machine can run this target's kernels: every CPU flag the target
        has, the machine has (a target overridden to a lower ISA runs; one describing
        another, wider CPU is only compiled for)."""
        return self.features.flags <= detect_features().flags

    def accepts(self, slot: str, value: int | str) -> bool:
        """A kernel may use fewer threads than the target has (`tune --search-threads`)."""
        if slot == "THREADS":
            return isinstance(value, int) and 1 <= value <= self.threads
        return super().accepts(slot, value)

    def cpu_class(self) -> str:
        """The CPU class from cpuinfo's vendor, family and model: a name from CPU_CLASSES,
        else "<vendor>-f<family>-m<model>" (e.g. "intel-f6-m151"), or "unknown" when
        cpuinfo reports none of them."""
        f = self.features
        for vendor, family, models, name in CPU_CLASSES:
            if (f.vendor, f.family) == (vendor, family) and (
                models is None or any(f.model_number in r for r in models)
            ):
                return name
        if not (f.vendor or f.family or f.model_number):
            return UNKNOWN_CLASS
        vendor = VENDOR_NAMES.get(f.vendor) or re.sub(r"[^a-z0-9]+", "", f.vendor.lower())
        return f"{vendor or UNKNOWN_CLASS}-f{f.family}-m{f.model_number}"

    def hardware_class(self) -> str:
        return self.cpu_class()

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

    def lanes(self, dtype: str) -> int:
        """Elements of the compute type of `dtype` per vector its kernels use."""
        bits = min(self.features.vector_bits, KERNEL_BITS.get(dtype, self.features.vector_bits))
        return max(1, bits // COMPUTE_BITS.get(dtype, 32))


# --- detection helpers ---------------------------------------------------------------------


def _thread_count(threads: int, cores: int) -> int:
    """`threads` checked against the host's `cores` (0 means all of them)."""
    if isinstance(threads, bool) or not isinstance(threads, int) or not 0 <= threads <= cores:
        raise UsageError(
            f"threads={threads!r}: give a whole number from 1 to this host's {cores} cores, "
            "or 0 for all of them",
            stage="target",
        )
    return threads or cores


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
    """Per-core data/unified cache sizes from sysfs `index*/{level,type,size}`, each level's
    associativity (`ways_of_associativity`) and L1d's line size (`coherency_line_size`)."""
    names = {1: "l1d_bytes", 2: "l2_bytes", 3: "l3_bytes"}
    ways = {1: "l1d_ways", 2: "l2_ways", 3: "l3_ways"}
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
            fields = [(ways[level], "ways_of_associativity")]
            if level == 1:
                fields.append(("line_bytes", "coherency_line_size"))
            sizes.update(_positive_fields(index, fields))
    return sizes


def _positive_fields(index: Path, fields: list[tuple[str, str]]) -> dict[str, int]:
    """{field: value} of the sysfs files `index/name` that hold a positive integer."""
    geometry: dict[str, int] = {}
    for field, name in fields:
        try:
            value = int((index / name).read_text())
        except (OSError, ValueError):
            continue
        if value > 0:
            geometry[field] = value
    return geometry


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


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return 0.0


@functools.cache
def _warn_once(message: str) -> None:
    warnings.warn(message, stacklevel=3)
