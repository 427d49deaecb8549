"""Free a module's heap buffers after bufferization, where it has any.

MLIR's `buffer-deallocation-pipeline` places the frees of `memref.alloc` (and `realloc`)
buffers. On a module that allocates nothing it only canonicalizes, runs cse and
canonicalizes again, which the descriptor does after this step anyway. Many tuning
candidates allocate nothing (the unpacked matmuls): skipping the pipeline saved about 3 ms
of a 256^3 matmul candidate's compile and 6 ms of a 1024^3 one (medians of 30 configs,
paired), and lowered 48 sampled configs of 8 workloads to the same code.

Registered as the descriptor step `deallocate-buffers` (mlirtune.pipeline.steps).
"""

from __future__ import annotations

from mlir import ir

from mlirtune.ir.context import run_passes

ALLOCATIONS = ("memref.alloc", "memref.realloc")


def deallocate_buffers(module: ir.Module) -> None:
    """Run the deallocation pipeline on `module` in place if it allocates."""
    if allocates(module):
        run_passes(
            module, "builtin.module(buffer-deallocation-pipeline)", stage="deallocate-buffers"
        )


def allocates(module: ir.Module) -> bool:
    """Whether any op of `module` allocates a heap buffer (the walk stops at the first)."""
    found = False

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal found
        found = op.name in ALLOCATIONS
        return ir.WalkResult.INTERRUPT if found else ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found
