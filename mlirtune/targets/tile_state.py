"""AMX tile state: Linux grants it to a process only on request, before its first tile
instruction (without it, that instruction faults). The host runtime asks once per process.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform

# arch_prctl(2) on x86-64: its syscall number, the request, and the tile-data feature bit.
SYS_ARCH_PRCTL = 158
ARCH_REQ_XCOMP_PERM = 0x1023
XFEATURE_XTILEDATA = 18


@functools.cache
def amx_refusal() -> str | None:
    """Ask Linux for AMX tile state for this process, once: None when granted, else why not
    (the OS or CPU refused, or this is not Linux on x86-64)."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        return f"AMX tile state is requested from Linux on x86-64, not {platform.system()}"
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(SYS_ARCH_PRCTL, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0:
        reason = os.strerror(ctypes.get_errno())
        return f"Linux refused AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM: {reason})"
    return None
