"""Copies between strided buffers as loops: a `memref.copy` whose source or target is not
one contiguous block (a padded input's interior, a strided phase of a convolution's input,
a slice of a concatenation) becomes a `linalg.copy`, which the lowering turns into loops
of loads and stores that LLVM compiles inline; left a `memref.copy`, it is a call to the
runtime's generic `memrefCopy`, which computes every element's address from the strides
(several nanoseconds an element). Contiguous copies stay `memref.copy` (a memcpy)."""

from __future__ import annotations

from mlir import ir
from mlir.dialects import linalg

from mlirtune.ir.inspect import ops_named


def copy_strided_as_loops(module: ir.Module) -> None:
    """Rewrite each non-contiguous `memref.copy` in `module` as a `linalg.copy`."""
    for copy in ops_named(module.operation, "memref.copy"):
        source, target = copy.operands
        if _contiguous(source.type) and _contiguous(target.type):
            continue
        with ir.InsertionPoint(copy), copy.location:
            linalg.copy(source, outs=[target])
        copy.erase()


def _contiguous(memref: ir.Type) -> bool:
    """Whether a memref's elements are one dense block in row-major order."""
    shaped = ir.MemRefType(memref)
    if not shaped.has_static_shape:
        return False
    strides, _ = shaped.get_strides_and_offset()
    expected, dense = 1, True
    for size, stride in reversed(list(zip(shaped.shape, strides, strict=True))):
        if size != 1 and stride != expected:
            dense = False
        expected *= size
    return dense
