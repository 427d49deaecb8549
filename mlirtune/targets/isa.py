"""x86-64 vector ISA levels: what each gives kernels (vector width, registers), and which
level a CPU's flags, or one flag, belong to."""

from __future__ import annotations

# (vector bits, vector registers) per ISA level on x86-64; "generic" is a 128-bit baseline.
ISA_VECTORS = {"avx512": (512, 32), "avx2": (256, 16), "sse": (128, 16), "generic": (128, 16)}
ISA_LEVELS = ("generic", "sse", "avx2", "avx512")  # narrowest first
# Restricts the host's kernels to a narrower ISA than its CPU has (e.g. avx2 on an AVX-512
# machine, to measure or test an AVX2 class there): `--isa` on the command line.
ISA_VARIABLE = "MLIRTUNE_ISA"


def isa_level(arch: str, flags: frozenset[str]) -> str:
    """The widest vector ISA `flags` (cpuinfo's) give on `arch`."""
    if arch != "x86_64":
        return "generic"
    if "avx512f" in flags:
        return "avx512"
    if "avx2" in flags and "fma" in flags:
        return "avx2"
    # SSE2 is part of x86-64 itself: only a flag list saying otherwise lowers the level.
    return "sse" if "sse2" in flags or not flags else "generic"


def flag_level(flag: str) -> str:
    """The ISA level a CPU flag belongs to (AVX-512's and AMX's flags need avx512)."""
    if flag.startswith(("avx512", "amx")):
        return "avx512"
    if flag.startswith("avx") or flag in ("fma", "f16c"):
        return "avx2"
    return "sse" if flag.startswith(("sse", "ssse")) else "generic"
