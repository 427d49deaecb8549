"""The element-wise epilogue of an NCHW convolution (an activation, a scale, a residual
add; the partition gives a convolution's dispatch the element-wise ops that read its
result alone, at the same indices): tiled with the convolution's output, so each tile's
outputs are read back from L1, not from memory by a dispatch of their own.

The row path (nchw_rows.py) tiles the epilogue by its output rows and fuses the
convolution into those tiles, then cuts the epilogue's rows into vectors of at most
ROW_CHUNK pixels; the flat path (nchw_flat.py) fuses its crop into the epilogue's row
pieces instead; the strided path (nchw_strided.py) fuses its unpack and convolution into
the epilogue's channel x pixel tiles. (The depthwise family tiles its own epilogues the
same way: mlirtune.schedules.depthwise.)
"""

from __future__ import annotations

from mlir import ir

from mlirtune.interfaces.op import OpInfo
from mlirtune.schedules.builder import ScheduleBuilder

# Widest piece of an epilogue (or crop) row: four AVX-512 vectors of f32.
ROW_CHUNK = 64


def takes_epilogue(op: OpInfo) -> bool:
    """Whether the schedule of convolution `op` tiles an element-wise epilogue: depthwise
    and NCHW ones, but not several in one handle (a strided transposed convolution's
    phases)."""
    one = op.attributes.get("convs", 1) == 1
    return op.kind == "depthwise" or (bool(op.attributes.get("nchw")) and one)


def has_epilogue(op: OpInfo) -> bool:
    """Whether element-wise ops read the convolution's result, alone, and the payload
    stores theirs (mlirtune.ir.roots.stored_epilogue), for a schedule to tile."""
    return bool(op.attributes.get("epilogue")) and takes_epilogue(op)


def row_chunks(s: ScheduleBuilder, rows: ir.Value, width: int, step: str, fuse: bool) -> None:
    """Cut element-wise `rows` (loops N, C, H, W) into pieces of one row of at most
    ROW_CHUNK pixels, the partial piece peeled; `fuse` takes its element-wise producers
    (the flat path's crop) into the pieces."""
    chunk = min(ROW_CHUNK, width)
    sizes = [1, 1, 1, chunk]
    loops = s.fuse_with_loops(rows, sizes, step=step)[1] if fuse else s.tile(rows, sizes, step)[1]
    if width % chunk:
        s.peel(loops[-1], step=f"peel_{step}")
