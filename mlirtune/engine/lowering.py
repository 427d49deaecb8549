"""The host CPU lowering: bufferize, free temporaries, then everything down to the LLVM dialect."""

from __future__ import annotations

HOST_LOWERING = ",".join(
    [
        "one-shot-bufferize{bufferize-function-boundaries "
        "function-boundary-type-conversion=identity-layout-map}",
        "buffer-deallocation-pipeline",
        "canonicalize",
        "cse",
        # Fully unrolled: otherwise each n-D transfer gets a stack buffer per loop iteration,
        # which overflows the stack on large tiles.
        "convert-vector-to-scf{full-unroll=true}",
        "convert-linalg-to-loops",
        "expand-strided-metadata",
        "lower-affine",
        "convert-scf-to-cf",
        "convert-vector-to-llvm{enable-x86vector}",
        "finalize-memref-to-llvm",
        "convert-math-to-llvm",
        "convert-arith-to-llvm",
        "convert-func-to-llvm",
        "convert-cf-to-llvm",
        "convert-index-to-llvm",
        "convert-ub-to-llvm",
        "reconcile-unrealized-casts",
        "canonicalize",
        "cse",
    ]
)


def host_pipeline() -> str:
    """The full textual pass pipeline for `builtin.module`."""
    return f"builtin.module({HOST_LOWERING})"
