"""Register tiles of the convolution family's unit-stride NCHW paths: which convs take
them, the rows they span, and whether an output plane is computed row by row
(nchw_rows.py) or as one flat row (nchw_flat.py)."""

from __future__ import annotations

from mlirtune.interfaces.op import OpInfo
from mlirtune.schedules.convolution.flat_conv import flat_length
from mlirtune.schedules.knobs import vector_columns
from mlirtune.targets.host_cpu import HostCPU

# nchw register rows (output channels), each a row of output pixels in vectors, and the
# accumulators of a tile at most.
NCHW_ROWS = 8
NCHW_ACCUMULATORS = 24
# Fewest channels a tile of several vectors or rows takes (else a narrower tile).
MIN_ROWS = 4
# Input channels from which a batched unit-stride nchw conv vectorizes along F too (see
# `unit_taps`; measured against vectors along the row: 1.10-1.27x on KernelBench's 2-D
# transposed convs with C=32, F=64, N=16; 0.62x at C=3, 0.54x at F=3). With one image the
# channel-vector path would run one thread (its threads take images): those keep the row
# path.
DEEP_CHANNELS = 32


def unit_taps(op: OpInfo) -> bool:
    """An nchw conv scheduled one filter tap and one channel at a time (unit stride along
    W): each step is out[f, ow] += K[f] * I[ow], broadcast filter x contiguous input row.
    A batch of deep convs (DEEP_CHANNELS inputs and outputs or more, two images or more,
    alone in its payload) takes the channel-vector path of strided convs instead
    (nchw_strided.py): its vectors run along F, whole, where a row of W + KW - 1 outputs
    leaves a partial vector. A 1x1 conv keeps this path (its planes as flat rows): on the
    channel-vector path its filter block, F_TILE x C, was one vector hoisted out of the image
    loop (16 x 512 in SqueezeNet's classifier at batch 8: scalar fallback, 0.02x eager)."""
    if not op.attributes.get("nchw") or op.attributes.get("stride_w", 1) != 1:
        return False
    d = op.dims
    pointwise = d["KH"] == d["KW"] == 1
    deep = min(d["C"], d["F"]) >= DEEP_CHANNELS and d["N"] >= 2 and not pointwise
    # Several convs (a strided transposed conv's phases): the channel-vector path packs one.
    return not deep or op.attributes.get("convs", 1) > 1


def oh_tiles(op: OpInfo, lanes: int) -> list[int]:
    """Output rows a unit-stride nchw register tile spans, dividing OH: each broadcast filter
    value then multiplies a vector of every row. One elsewhere."""
    return [r for r in (1, 2, 4) if op.dims["OH"] % r == 0] if unit_taps(op) else [1]


def flat_rows_eligible(op: OpInfo) -> bool:
    """A conv of `unit_taps` with unit stride along H too, alone in its payload: its planes
    can be computed as flat rows (mlirtune.schedules.convolution.flat_conv)."""
    attributes = op.attributes
    return unit_taps(op) and attributes.get("stride", 1) == 1 and attributes.get("convs", 1) == 1


def flat_rows_choices(op: OpInfo, lanes: int) -> list[int]:
    """FLAT_ROWS candidates: 0 (row by row), and 1 where the conv is `flat_rows_eligible`."""
    return [0, 1] if flat_rows_eligible(op) else [0]


def plane_row(op: OpInfo) -> int:
    """Positions of one output plane computed as a flat row."""
    return flat_length(op.dims["OH"], op.dims["OW"], op.attributes["IW"])


def row_columns(op: OpInfo, lanes: int) -> list[int]:
    """OW_TILE candidates of a unit-stride nchw tile: one, two or four vectors of an output
    row, or of a flat plane's row where FLAT_ROWS may be 1."""
    columns = vector_columns("OW", (1, 2, 4))(op, lanes)
    if flat_rows_eligible(op):
        columns += [v * lanes for v in (1, 2, 4) if v * lanes <= plane_row(op)]
    return sorted(set(columns))


def flat_rows_considered(op: OpInfo, cpu: HostCPU) -> bool:
    """Whether the selector weighs flat rows against rows (by the cost model): where a row
    of OW pixels ends in a partial vector, there are several rows (one row is flat
    already), and the threads split the output channels evenly (the flat path's threads
    take F / THREADS each). Measured on an Intel Xeon, 3x3, 56x56 and 64 channels: 1.53-1.56
    ms flat against 1.69 by rows, whose 8-pixel tail of each row had taken a quarter of the
    time; on two threads, flat against rows: 1.03x at 56x56x64, 1.5x at 28x28x128, 1.2x at
    14x14x256, 1.7x at 7x7x512."""
    lanes = cpu.lanes(op.element_type)
    d = op.dims
    return (
        flat_rows_eligible(op)
        and d["F"] % cpu.threads == 0
        and d["OH"] > 1
        and d["OW"] % lanes != 0
    )


def channel_row_tile(op: OpInfo, cpu: HostCPU, flat: bool = False) -> tuple[int, int, int]:
    """(vectors per row, OH_TILE, F_TILE) of a unit-stride nchw register tile: the first of
    four vectors x one row, two x two rows, two x one, one x two, one x one that the row
    (OW, or a `flat` plane's row, one row high) and OH take and whose rows fit the register
    file (`oh_tile_registers`) at least MIN_ROWS channels deep, NCHW_ACCUMULATORS at most;
    several convs in one payload (a strided transposed conv's phases, tiled as one without
    pieces) take one row of one vector. Wider and taller tiles load less per FMA. Measured
    on an Intel Xeon, 3x3 f32, 64 channels, OW x F x OH: at 64 pixels wide, 64x6x1 163
    GFLOP/s, 32x8x1 144, 16x8x1 65-119, 64x3x2 109; at 56 wide, 32x6x2 135, 32x8x1 116."""
    dims, lanes = op.dims, cpu.lanes(op.element_type)
    registers = cpu.features.vector_registers
    row = plane_row(op) if flat else dims["OW"]
    shapes = [(4, 1), (2, 1), (1, 1)] if flat else [(4, 1), (2, 2), (2, 1), (1, 2), (1, 1)]
    if op.attributes.get("convs", 1) > 1:
        shapes = [(1, 1)]
    for vectors_per_row, rows in shapes:
        if (vectors_per_row > 1 and vectors_per_row * lanes > row) or dims["OH"] % rows:
            continue
        fitting = ((registers - 1) // rows - vectors_per_row) // vectors_per_row
        f_tile = min(NCHW_ROWS, NCHW_ACCUMULATORS // (vectors_per_row * rows), fitting)
        if f_tile >= min(MIN_ROWS, dims["F"]) or (vectors_per_row, rows) == (1, 1):
            return vectors_per_row, rows, max(1, min(f_tile, dims["F"]))
    raise AssertionError("unreachable: one vector x one row always qualifies")
