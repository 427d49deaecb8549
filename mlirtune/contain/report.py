"""The one line a supervisor prints for a contained process that did not end by itself:
the signal that ended it, the stage it was in, and C++'s reason where it gave one."""

from __future__ import annotations

import re
import signal

from mlirtune.contain.limits import MEMORY_VARIABLE, TIMEOUT_VARIABLE
from mlirtune.contain.native import native_reason
from mlirtune.contain.stages import COMPILE, RUN, StageRecord

# Exit codes (the CLI's contract): a compile or a kernel that failed is a compilation error
# or bad input; a process that died anywhere else is an internal error.
FAILED, INTERNAL = 2, 3
INTERRUPTS = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}
# What a kernel's crash signal usually means.
CRASHES = {
    signal.SIGSEGV: "it read or wrote memory outside its buffers",
    signal.SIGBUS: "it read or wrote memory outside its buffers",
    signal.SIGILL: "it ran an instruction this CPU lacks (compiled for another --target?)",
    signal.SIGFPE: "an integer division by zero or overflow",
}
_OUT_OF_MEMORY = re.compile(r"out of memory|bad_alloc|cannot allocate memory", re.IGNORECASE)


def death_report(code: int, record: StageRecord, native_log: int) -> tuple[str, int]:
    """The error line and exit code for a process that `code` (negative: a signal) ended
    while `record` held; `native_log` is the file (descriptor) it wrote C++'s output to."""
    if code >= 0:
        where = f" in {record.stage}" if record.stage else ""
        return f"mlirtune: error: the command exited with status {code}{where}", INTERNAL
    number = signal.Signals(-code)
    if number in INTERRUPTS:
        return f"mlirtune: interrupted ({number.name})", INTERRUPTS[number]
    name = f"{number.name}, {signal.strsignal(number)}".rstrip(".")
    reason = native_reason(native_log)
    stage = f"[{record.stage}] " if record.stage else ""
    if record.kind == COMPILE:
        if number == signal.SIGALRM:
            text = (
                f"the compile ran past its time limit of {record.timeout} and was stopped; "
                f"set {TIMEOUT_VARIABLE} to more seconds, or 0 for no limit"
            )
        elif reason and _OUT_OF_MEMORY.search(reason):
            text = (
                f"the compile ran out of memory under its ceiling of {record.ceiling or '?'} "
                f"and was stopped ({reason}); a compile that keeps growing is a bug in its "
                f"schedule or pipeline; set {MEMORY_VARIABLE} to raise the ceiling"
            )
        else:
            text = f"the compile aborted in MLIR/LLVM ({name})" + (f": {reason}" if reason else "")
        return f"mlirtune: error: {stage}{text}", FAILED
    if record.kind == RUN:
        meaning = CRASHES.get(number, "")
        text = f"the kernel crashed ({name})" + (f": {meaning}" if meaning else "")
        return f"mlirtune: error: {stage}{text}", FAILED
    if number == signal.SIGKILL:
        text = "killed (SIGKILL), by the kernel's out-of-memory killer or another process"
        return f"mlirtune: error: {stage}{text}", FAILED
    detail = f": {reason}" if reason else ""
    return f"mlirtune: internal error: {stage}the process died ({name}){detail}", INTERNAL
