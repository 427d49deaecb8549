"""The CPU classes mlirtune runs on, as complete feature sets: tests select and lower for
each of them through `HostCPU(features)`, whatever CPU runs the tests, so that a fault on
one class shows on every machine. Only `runs_here` classes may execute their kernels."""

from __future__ import annotations

from mlirtune.targets.host_cpu import CpuFeatures, HostCPU

_SSE = frozenset({"sse", "sse2", "ssse3", "sse4_1", "sse4_2"})
_AVX2 = _SSE | {"avx", "avx2", "fma", "f16c"}
_AVX512 = _AVX2 | {"avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl", "avx512_vnni"}

# An AMD Zen 3 (AVX2 and FMA only; 32 KiB L1d, 512 KiB L2 per core).
AVX2 = CpuFeatures(
    arch="x86_64",
    model="AMD EPYC (Zen 3 class)",
    isa="avx2",
    flags=_AVX2,
    vector_bits=256,
    vector_registers=16,
    l1d_bytes=32 << 10,
    l2_bytes=512 << 10,
    l3_bytes=32 << 20,
    cores=2,
    ghz=2.45,
    l1d_ways=8,
    l2_ways=8,
    l3_ways=16,
    vendor="AuthenticAMD",
    family=0x19,
    model_number=0x01,
)
# A Skylake-SP (AVX-512 without bf16; 32 KiB L1d, 1 MiB L2).
AVX512 = CpuFeatures(
    arch="x86_64",
    model="Intel Xeon (Skylake-SP class)",
    isa="avx512",
    flags=_AVX512,
    vector_bits=512,
    vector_registers=32,
    l1d_bytes=32 << 10,
    l2_bytes=1 << 20,
    l3_bytes=32 << 20,
    cores=2,
    ghz=2.6,
    l1d_ways=8,
    l2_ways=16,
    l3_ways=11,
    vendor="GenuineIntel",
    family=6,
    model_number=0x55,
)
# An AMD Zen 4 (AVX-512 with bf16 dot products, no AMX; 32 KiB L1d, 1 MiB L2).
AVX512_BF16 = CpuFeatures(
    arch="x86_64",
    model="AMD EPYC (Zen 4 class)",
    isa="avx512",
    flags=_AVX512 | {"avx512_bf16"},
    vector_bits=512,
    vector_registers=32,
    l1d_bytes=32 << 10,
    l2_bytes=1 << 20,
    l3_bytes=32 << 20,
    cores=2,
    ghz=2.6,
    l1d_ways=8,
    l2_ways=8,
    l3_ways=16,
    vendor="AuthenticAMD",
    family=0x19,
    model_number=0x11,
)
# A Sapphire Rapids (AVX-512, bf16, fp16 and AMX tiles; 48 KiB L1d, 2 MiB L2).
AMX = CpuFeatures(
    arch="x86_64",
    model="Intel Xeon (Sapphire Rapids class)",
    isa="avx512",
    flags=_AVX512 | {"avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8"},
    vector_bits=512,
    vector_registers=32,
    l1d_bytes=48 << 10,
    l2_bytes=2 << 20,
    l3_bytes=105 << 20,
    cores=2,
    ghz=2.1,
    l1d_ways=12,
    l2_ways=16,
    l3_ways=15,
    vendor="GenuineIntel",
    family=6,
    model_number=0x8F,
)

CLASSES = {"avx2": AVX2, "avx512": AVX512, "avx512_bf16": AVX512_BF16, "amx": AMX}


def cpu(name: str, threads: int = 1) -> HostCPU:
    """The target of CPU class `name` (a key of CLASSES), on `threads` of its cores."""
    return HostCPU(CLASSES[name], threads=threads)
