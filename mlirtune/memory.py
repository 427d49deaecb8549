"""The memory budget: a workload whose arrays would not fit is refused before any is allocated.

`estimate` adds up what one run really holds at its peak (the cached inputs, the runtime's
copies of every argument, the float64 reference, the largest set of temporaries); the
workload supplies the parts only it knows (`Workload.reference_scratch_bytes`, ...).
`check_memory` compares that with the budget and raises one UsageError naming both. Every
path that allocates calls it first: the engine's execute and benchmark, the numpy baseline
and the tuner's `generate`. Lowering alone (`mlirtune opt`) allocates nothing proportional
to the shapes, so it only needs the shapes to be representable (`check_shapes`).
"""

from __future__ import annotations

import math
import os
import re
import resource
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mlir import ir

from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.workload import ArgSpec, Workload
from mlirtune.verify import CHUNK_ELEMENTS

BUDGET_VARIABLE = "MLIRTUNE_MEMORY_BUDGET"

# Default budget: half of the memory available now. The estimate counts arrays only; on top
# of it come the process itself (Python, numpy, the MLIR/LLVM libraries and JIT'd code,
# about 0.3 GiB resident), allocator slack, page cache that MemAvailable counts but that
# cannot all be dropped without thrashing, and the other processes of a shared machine (a
# tuner's sibling workers included). Half leaves room for all of that and still admits any
# workload that fits comfortably.
DEFAULT_FRACTION = 0.5

# MLIR computes strides and byte sizes in int64: a larger argument cannot even be lowered.
INT64_MAX = 2**63 - 1

# Peak bytes of the verification temporaries per compared element (mlirtune.verify.compare,
# which compares CHUNK_ELEMENTS at a time): five float64 arrays (the output and the
# reference as float64, |error|, |reference|, the excess over the tolerance) and two masks.
VERIFY_BYTES_PER_ELEMENT = 5 * 8 + 2

# Address space a tuning worker uses before any workload array: the interpreter, numpy and
# its BLAS threads, the MLIR/LLVM libraries and JIT'd code (about 0.7 GiB measured after a
# run with two cores; more cores add BLAS thread buffers). The rest of its cap (RLIMIT_AS,
# EvaluatorSettings.memory_bytes) is for the workload.
WORKER_OVERHEAD_BYTES = 1 << 30

# Address space a run maps besides its arrays and the process it starts in: thread stacks
# and allocator arenas (64 MiB reserved per thread), OpenMP's and BLAS's pools.
MAPPING_SLACK_BYTES = 512 << 20

# Runtime buffers are over-allocated by this much to be 64-byte aligned (HostRuntime).
BUFFER_ALIGNMENT = 64


def how_to_change(variable: str) -> str:
    """The end of a message about a memory limit set by `variable`: how to set it."""
    return (
        f"to change it, set {variable} to a size in bytes (e.g. 16G) or to a fraction of the "
        "available memory (e.g. 0.8)"
    )


_SUFFIXES = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)

_override: int | float | None = None  # set_memory_budget's value; None: variable or default


@dataclass(frozen=True)
class Budget:
    """The bytes one run may hold, and where that figure came from (for the message)."""

    bytes: int
    origin: str
    advice: str = ""  # how to change it, where not by MLIRTUNE_MEMORY_BUDGET


@dataclass(frozen=True)
class MemoryEstimate:
    """Peak bytes of one run, as named parts that add up to `total`."""

    parts: tuple[tuple[str, int], ...]

    @property
    def total(self) -> int:
        return sum(size for _, size in self.parts)

    def describe(self) -> str:
        return ", ".join(f"{name} {format_bytes(size)}" for name, size in self.parts if size)


def format_bytes(count: int | float) -> str:
    """`count` bytes in binary units: 512 B, 1.5 KiB, 12.0 GiB, 364.0 TiB, ..."""
    if count < 1024:
        return f"{int(count)} B"
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        count /= 1024
        if count < 1024 or unit == "PiB":
            return f"{count:,.1f} {unit}"
    raise AssertionError("unreachable")


def parse_budget(text: str, origin: str = BUDGET_VARIABLE) -> int | float:
    """Bytes (an int: `16G`, `512M`, `1048576`) or a fraction of the available memory (a
    float: `0.5`); anything else is a UsageError naming `origin`."""
    match = _SIZE.match(text)
    if match is None:
        raise UsageError(
            f"{origin}={text!r} is not a memory budget: give bytes with an optional K, M, G "
            "or T suffix (e.g. 16G) or a fraction of the available memory (e.g. 0.5)",
            stage="memory",
        )
    number, suffix = match.groups()
    if "." in number and not suffix:
        fraction = float(number)
        if not 0 < fraction <= 1:
            raise UsageError(
                f"{origin}={text!r}: a fraction of the available memory must be in (0, 1]",
                stage="memory",
            )
        return fraction
    size = int(float(number) * _SUFFIXES[suffix.upper()])
    if size <= 0:
        raise UsageError(f"{origin}={text!r}: the budget must be positive", stage="memory")
    return size


def set_memory_budget(budget: int | float | str | None) -> None:
    """Set the budget for this process: bytes (int), a fraction of the available memory
    (float in (0, 1]) or a string as `MLIRTUNE_MEMORY_BUDGET` takes; None restores the
    variable (or the default). Takes precedence over the variable."""
    global _override
    if isinstance(budget, str):
        budget = parse_budget(budget, "set_memory_budget")
    elif isinstance(budget, bool) or not (budget is None or isinstance(budget, int | float)):
        raise UsageError(f"set_memory_budget: {budget!r} is not a budget", stage="memory")
    elif isinstance(budget, int) and budget <= 0:
        raise UsageError(f"set_memory_budget: {budget} bytes is not positive", stage="memory")
    elif isinstance(budget, float) and not 0 < budget <= 1:
        raise UsageError(f"set_memory_budget: fraction {budget} is not in (0, 1]", stage="memory")
    _override = budget


def memory_budget() -> Budget | None:
    """The current budget, lowered to what the process's address-space limit (`ulimit -v`)
    leaves, where that is less; None when neither a budget was set nor the available
    memory nor a limit can be read (then only the int64 limits apply)."""
    if _override is not None:
        setting, origin = _override, f"set_memory_budget({_override!r})"
    elif (text := os.environ.get(BUDGET_VARIABLE, "")).strip():
        setting, origin = parse_budget(text), f"{BUDGET_VARIABLE}={text.strip()}"
    else:
        setting, origin = DEFAULT_FRACTION, "the default fraction"
    budget, left = budget_of(setting, origin), address_space_left()
    if left is not None and (budget is None or left < budget.bytes):
        return Budget(
            left,
            "what this process's address-space limit (ulimit -v) leaves",
            "raise the limit, or choose smaller sizes",
        )
    return budget


def address_space_bytes() -> int:
    """This process's address space now (/proc/self/statm's first field)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def address_space_left() -> int | None:
    """Bytes the process may still map under its address-space limit (RLIMIT_AS, `ulimit
    -v`), less an allowance for the thread stacks and allocator arenas a run maps besides
    its arrays; None where there is no limit."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    return max(0, soft - address_space_bytes() - MAPPING_SLACK_BYTES)


def budget_of(setting: int | float, origin: str) -> Budget | None:
    """A budget of `setting` bytes (int) or that fraction of the available memory (float;
    None when that cannot be read)."""
    if isinstance(setting, int):
        return Budget(setting, origin)
    available = available_memory()
    if available is None:
        return None
    size, source = available
    return Budget(int(size * setting), f"{setting:g} x {format_bytes(size)} {source}, {origin}")


def available_memory() -> tuple[int, str] | None:
    """Bytes this process can still allocate without swapping, and what the figure is:
    Linux's MemAvailable (lowered to a cgroup's remaining limit when there is one), else
    the free physical pages, else None."""
    found: list[tuple[int, str]] = []
    meminfo = _read_meminfo()
    if meminfo is not None:
        found.append((meminfo, "available now"))
    cgroup = _cgroup_remaining()
    if cgroup is not None:
        found.append((cgroup, "left under this cgroup's limit"))
    if not found:
        for name, source in (("SC_AVPHYS_PAGES", "free now"), ("SC_PHYS_PAGES", "installed")):
            try:
                pages, page_size = os.sysconf(name), os.sysconf("SC_PAGE_SIZE")
            except (ValueError, OSError, AttributeError):
                continue
            if pages > 0 and page_size > 0:
                found.append((pages * page_size, source))
                break
    return min(found) if found else None


def _read_meminfo() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_remaining() -> int | None:
    """Limit minus usage of this process's memory cgroup (v2, else v1); None if unlimited."""
    for limit_file, usage_file in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        (
            "/sys/fs/cgroup/memory/memory.limit_in_bytes",
            "/sys/fs/cgroup/memory/memory.usage_in_bytes",
        ),
    ):
        try:
            limit_text = Path(limit_file).read_text().strip()
            usage = int(Path(usage_file).read_text())
        except (OSError, ValueError):
            continue
        if limit_text == "max" or int(limit_text) >= INT64_MAX // 2:  # v1's "no limit"
            return None
        return max(0, int(limit_text) - usage)
    return None


def check_shapes(args: Sequence[ArgSpec], owner: str) -> None:
    """Refuse arguments whose element or byte count does not fit in int64: MLIR cannot
    represent them (its strides would overflow) and numpy cannot allocate them."""
    for spec in args:
        if spec.elements > INT64_MAX or spec.nbytes > INT64_MAX:
            shape = "x".join(str(d) for d in spec.shape)
            raise UsageError(
                f"{owner}: argument {spec.name} ({shape} x {spec.dtype.name}) needs more "
                "than 2^63 bytes, more than int64 (and MLIR) can count; choose smaller sizes",
                stage="memory",
            )


# Ops whose result the compiled kernel may allocate itself.
SCRATCH_OPS = ("tensor.empty", "memref.alloc", "memref.alloca", "bufferization.alloc_tensor")


def payload_scratch_bytes(module: ir.Module) -> int:
    """An upper bound on what a payload's kernel allocates itself: every intermediate tensor
    or buffer at full size, once per use (bufferization may give each use its own buffer;
    tiling only makes them smaller). Dynamically shaped ones cannot be counted."""
    total = 0

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal total
        if op.name in SCRATCH_OPS and len(op.results) == 1:
            shaped = ir.ShapedType(op.results[0].type)
            if shaped.has_static_shape:
                uses = max(1, len(list(op.results[0].uses)))
                total += math.prod(shaped.shape) * _element_bytes(shaped.element_type) * uses
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return total


def _element_bytes(element: ir.Type) -> int:
    if isinstance(element, ir.VectorType):
        vector = ir.VectorType(element)
        return math.prod(vector.shape) * _element_bytes(vector.element_type)
    for kind in (ir.FloatType, ir.IntegerType):
        if isinstance(element, kind):
            return -(-kind(element).width // 8)
    return 16  # index, complex: counted generously


def estimate(workload: Workload, *, verify: bool = True, baseline: bool = False) -> MemoryEstimate:
    """Peak bytes of one engine run of `workload` (with the reference and verification when
    `verify`), or of its numpy baseline when `baseline`."""
    args = workload.arguments()
    check_shapes(args, workload.name)
    inputs = [a for a in args if not a.is_output]
    outputs = [a for a in args if a.is_output]
    held = [("inputs", sum(a.nbytes for a in inputs))]
    temporaries = {"input generation": workload.input_scratch_bytes()}
    if baseline:
        temporaries["numpy baseline"] = workload.baseline_bytes()
    else:
        held.append(("runtime buffers", sum(a.nbytes + BUFFER_ALIGNMENT for a in args)))
        temporaries["kernel"] = workload.kernel_scratch_bytes
        if verify:
            held.append(("reference outputs", workload.reference_bytes()))
            temporaries["reference"] = workload.reference_scratch_bytes()
            compared = min(max((a.elements for a in outputs), default=0), CHUNK_ELEMENTS)
            temporaries["verification"] = VERIFY_BYTES_PER_ELEMENT * compared
    phase = max(temporaries, key=lambda name: temporaries[name])
    return MemoryEstimate((*held, (f"{phase} temporaries", temporaries[phase])))


def check_memory(
    workload: Workload,
    action: str,
    *,
    verify: bool = True,
    baseline: bool = False,
    processes: int = 1,
    process_limit: int | None = None,
) -> MemoryEstimate:
    """Refuse `action` (e.g. "run") on `workload` with one UsageError naming the bytes needed
    and the budget when `processes` runs of it would not fit; returns the estimate.
    `process_limit` is a per-process cap (a tuning worker's address-space limit)."""
    need = estimate(workload, verify=verify, baseline=baseline)
    what = f"{action} of {_label(workload)}"
    if process_limit is not None and need.total > process_limit:
        raise UsageError(
            f"{what} needs {format_bytes(need.total)} per process ({need.describe()}), more "
            f"than the {format_bytes(process_limit)} a tuning worker may use; choose smaller "
            "sizes",
            stage="memory",
        )
    budget = memory_budget()
    total = need.total * processes
    if budget is not None and total > budget.bytes:
        count = f"{processes} processes x {format_bytes(need.total)} = " if processes > 1 else ""
        raise UsageError(
            f"{what} needs {count}{format_bytes(total)} ({need.describe()}), over the memory "
            f"budget of {format_bytes(budget.bytes)} ({budget.origin}); "
            + (budget.advice or how_to_change(BUDGET_VARIABLE)),
            stage="memory",
        )
    return need


def _label(workload: Workload) -> str:
    options = " ".join(f"{key}={value}" for key, value in workload.options.items())
    return f"{workload.name} {options}".strip()
