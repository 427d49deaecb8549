"""What C++ wrote to a contained process's stderr, read back for the line that says why it
stopped (an LLVM fatal error, a failed assertion, an uncaught exception)."""

from __future__ import annotations

import os
import re

_ASSERTION = re.compile(r"^(?:.*/)?([^/:\s]+:\d+): .*?(Assertion `.*' failed\.?)\s*$")
_NOISE = ("PLEASE submit", "Stack dump", "#", "Program arguments", "0.\t", "1.\t", "2.\t")
_LONGEST = 300


def native_reason(native_log: int) -> str:
    """The line of C++'s output (the file open as `native_log`) that says why it stopped:
    an LLVM fatal error, a failed assertion (file:line and condition), an uncaught
    exception, else its last line."""
    try:
        size = os.fstat(native_log).st_size
        tail = os.pread(native_log, 64 << 10, max(0, size - (64 << 10)))
    except OSError:
        return ""
    lines = tail.decode(errors="replace").splitlines()
    lines = [line.strip() for line in lines if line.strip()]
    for line in lines:
        assertion = _ASSERTION.match(line)
        if assertion:
            return _short(f"{assertion.group(1)}: {assertion.group(2)}")
    for marker in ("LLVM ERROR:", "terminate called", "what():"):
        found = [line for line in lines if marker in line]
        if found:
            return _short(found[-1])
    meaningful = [line for line in lines if not line.startswith(_NOISE)]
    return _short(meaningful[-1]) if meaningful else ""


def _short(line: str) -> str:
    return line if len(line) <= _LONGEST else line[: _LONGEST - 3] + "..."
