"""The register tiles of the contraction family's broadcast + FMA micro-kernels on the host
CPU, from its register file and its L1's geometry: the packed nest's (packed.py) and the
unpacked one's where the L1 leaves ways to spare.
"""

from __future__ import annotations

from mlirtune.interfaces.dtype import element_bytes
from mlirtune.interfaces.op import OpInfo
from mlirtune.ir.prefetch import LINE_BYTES
from mlirtune.schedules.contraction.packed_tails import row_tail
from mlirtune.schedules.cpu_model import ACCUMULATORS, LOAD_PORTS, MEMORY_BYTES_PER_CYCLE
from mlirtune.targets.host_cpu import FMA_UNITS, HostCPU

# Vectors per row of the packed micro-kernel's register tile (`packed_register_tile`).
PACKED_VECTORS = 4
# Rows of its widest tile: 24 accumulators, which with a row of B and the broadcast take 29
# of AVX-512's 32 registers (`tile_preference`).
WIDE_TILE_ROWS = 6
# A column tail at most this share of N costs the split-off nest too little to narrow the
# tile for (8205x5921x2949 f32, a 33-column tail: 5 x 64 1.00x OpenBLAS, 5 x 32 0.88x).
TAIL_SHARE = 0.01
# The largest share of M a split-off row tail may take (a prime M: 4099 = 4 x 1024 + 3).
ROW_TAIL_SHARE = 0.02
# The most a split-off row tail may add, streaming B from memory once more, to the FMA
# cycles of a fuller tile's nest (`fullest_register_tile`). Measured on an Intel Xeon
# restricted to AVX2, 6 x 16 with a 4-row tail against 4 x 16 (modelled share: 3.1%):
# 256x11008x4096 -4.6%, 256x4096x11008 -7.7%; with a 2-row tail at M = 512 (1.6%): +3.8%
# (N = 1024), +6.8% (N = 4096).
TAIL_REREAD_SHARE = 0.02


def prefetches_rows_ahead(op: OpInfo, nr: int) -> bool:
    """Whether the packed nest reading A in place prefetches B's panel rows ahead
    (PREFETCH=2, `prefetch_level`) whatever K is: where a panel row of the f32
    micro-kernel spans several cache lines (AVX-512's 4 x 64 and 8 x 32 tiles). Measured
    on an Intel Xeon (4 x 64, KC=128-256, ratios to OpenBLAS in one rotating run, without
    -> with): 2048^3 0.97x -> 1.05x, 4096x4096x256 (A's rows 1 KiB apart) 1.00x -> 1.10x,
    2048x2048x512 0.94x -> 1.04x, and under an MLP's bias and ReLU too."""
    row_bytes = nr * element_bytes(op.element_type)
    return op.element_type == "f32" and row_bytes >= 2 * LINE_BYTES


def ahead_accumulators(registers: int) -> int:
    """Most accumulators a packed register tile of several vectors per row keeps where B's
    panel rows are prefetched ahead (PREFETCH=2): three quarters of the register file. Each
    row's broadcast is reused by its row's vectors, so it takes a register of its own, and
    LLVM scheduled all of them ahead of the FMAs: on AVX-512, 13 x 32 and 14 x 32 f32 (and
    13 x 16 f64) spilled accumulators to the stack in the micro-kernel (not at PREFETCH 0
    or 1, nor 12 x 32 or 6 x 64). Measured on an Intel Xeon, 1001x4096x1024 f32 against
    OpenBLAS in one rotating run: 13 x 32 0.73x, 11 x 32 1.06-1.08x, 13 x 32 at PREFETCH=0
    1.06x."""
    return registers * 3 // 4


def packed_register_tile(op: OpInfo, cpu: HostCPU, mr: int, nr: int) -> tuple[int, int]:
    """The packed micro-kernel's register tile: of `tile_preference`'s tiles that the
    register file holds (within `ahead_accumulators` where B's rows are prefetched ahead)
    and whose rows divide M, the first whose column tail (split off, see
    packed.column_tail) is at most one vector, exactly two, or at most TAIL_SHARE of N;
    else MR x NR. Where none of them divides M, the other row counts that fill the register
    file take their place; where none of those divides M either, the first tile, preferred
    ones first, whose row tail (split off, see packed.row_tail) is at most ROW_TAIL_SHARE
    of M. Measured on an Intel Xeon, f32 with a prime M, ratios to OpenBLAS: the 14 x 32
    tile that fills the register file (an 11-row tail) ran 4099x2048x2048 at 0.62x and
    4099x4096x4096 at 0.58x, 6 x 64 (a 7-row tail) at 1.05x and 0.97x; 14 rows of A read
    in place, K elements apart, overfill a 12-way L1 set, and the tile spilled
    (`ahead_accumulators`).
    A wider tail costs the split-off nest more: 1000x999x1001 ran at 0.90x with 4 x 64 (a
    39-column tail), 0.97x with 8 x 32 (7 columns)."""
    lanes = cpu.lanes(op.element_type)
    m, n = op.dims["M"], op.dims["N"]
    candidates = ((rows, v * lanes) for rows, v in tile_preference(cpu))
    preferred = [tile for tile in candidates if register_file_holds(op, cpu, *tile)]
    filling: list[tuple[int, int]] = []
    if all(m % rows for rows, _ in preferred):
        # None fits and divides M (8205 = 3 x 5 x 547; AVX2's 16 registers, which hold no
        # 16 accumulators beside a row of B): the other row counts that fill the register
        # file, most accumulators first.
        filling = filling_tiles(op, cpu)
    tiles = filling or preferred
    usable = [(rows, width) for rows, width in tiles if m % rows == 0 and n >= width]
    if not usable:  # rows with a short tail, split off (any K past one block: see packed_blocks)
        usable = [
            (rows, width)
            for rows, width in (*preferred, *filling)
            if 0 < row_tail(op, rows, width, 0) <= ROW_TAIL_SHARE * m and n >= width
        ]
    narrow = [
        (r, w) for r, w in usable if n % w <= lanes or n % w == 2 * lanes or n % w <= TAIL_SHARE * n
    ]
    chosen = narrow or usable
    # The threads share out whole column tiles (packed_host.packed_blocks): a tile whose
    # count of them they divide comes first. ViT's 197 x 192 x 768 (B stored [N, K]) on two
    # threads of an AMD Zen 5: 5 x 64 leaves three, no packed blocks, and the unpacked nest
    # ran at 0.49x numpy's two threads; 8 x 32 packed at 2.1x.
    shared = [(r, w) for r, w in chosen if (n // w) % cpu.threads == 0]
    return (shared or chosen or [(mr, nr)])[0]


def register_file_holds(op: OpInfo, cpu: HostCPU, rows: int, width: int) -> bool:
    """Whether the register file holds a `rows` x `width` tile's accumulators beside a row
    of B and one broadcast, within `ahead_accumulators` where B's rows are prefetched ahead."""
    registers, vectors = cpu.features.vector_registers, width // cpu.lanes(op.element_type)
    spills = prefetches_rows_ahead(op, width) and rows * vectors > ahead_accumulators(registers)
    return registers >= (rows + 1) * vectors + 1 and not spills


def filling_tiles(op: OpInfo, cpu: HostCPU) -> list[tuple[int, int]]:
    """The register tiles of PACKED_VECTORS or two vectors per row that the register file
    holds, with at least as many accumulators as the core keeps FMAs in flight
    (CpuFeatures.fma_in_flight): BLIS's analytical rule; and whose FMAs keep the pipes as
    busy as their loads keep the load ports (`feeds_the_pipes`). Most accumulators first;
    of as many, more rows: fewer of B's vectors, which stream from L2, per FMA (AVX2,
    2048^3 f32 on an AMD Zen 3: 4 x 16 0.8-0.9x OpenBLAS, 2 x 32 0.7x)."""
    lanes, registers = cpu.lanes(op.element_type), cpu.features.vector_registers
    floor = cpu.features.fma_in_flight
    tiles = [
        (rows, v * lanes)
        for v in (PACKED_VECTORS, 2)
        for rows in range(1, registers)
        if rows * v >= floor
        and feeds_the_pipes(rows, v)
        and register_file_holds(op, cpu, rows, v * lanes)
    ]
    return sorted(tiles, key=lambda tile: (-tile[0] * tile[1], -tile[0]))


def feeds_the_pipes(rows: int, vectors: int) -> bool:
    """Whether a register tile of `rows` x `vectors` is bound by its FMAs rather than by its
    loads: each K step loads a row of B's vectors and broadcasts one value per row, for
    `rows * vectors` FMAs. A one-row tile never is. Where the core keeps only four FMAs in
    flight (an AMD Zen 4, whose 512-bit FMAs take both of its 256-bit pipes), 1 x 64 f32
    met the accumulator floor and was taken for a prime M; ViT's 197 x 192 x 768 (B stored
    [N, K]) ran at 44 GFLOP/s with it, at 85 with 5 x 64 and a 2-row tail."""
    return rows * vectors * LOAD_PORTS >= (rows + vectors) * FMA_UNITS


def fullest_register_tile(op: OpInfo, cpu: HostCPU) -> tuple[int, int] | None:
    """Where the register file holds none of `tile_preference`'s tiles (AVX2's 16
    registers), the tile of the most accumulators it holds (`filling_tiles`), with the rows
    past M's last whole tile split off (`row_tail`) where they are at most ROW_TAIL_SHARE of
    M; else None. More accumulators than the FMAs in flight leave the pipes fed while
    loads wait. Measured on an Intel Xeon restricted to AVX2 (8 FMAs in flight), one
    interleaved run of 8 rounds each: 6 x 16 against 4 x 16, 1536x2048x2048 +6.7%, 2048^3
    (a 2-row tail) +5.0%; 6 x 16 ran at 89% of the measured FMA peak. The tail re-reads B:
    it is split off only where that costs at most TAIL_REREAD_SHARE of the FMA cycles."""
    lanes = cpu.lanes(op.element_type)
    preferred = [(rows, v * lanes) for rows, v in tile_preference(cpu)]
    filling = filling_tiles(op, cpu)
    if not filling or any(register_file_holds(op, cpu, *tile) for tile in preferred):
        return None
    rows, width = filling[0]
    m, n = op.dims["M"], op.dims["N"]
    tail = row_tail(op, rows, width, 0)
    # The split-off tail streams all of B once more, from memory: against the nest's FMA
    # cycles, (K N bytes / MEMORY_BYTES_PER_CYCLE) / (M N K / (FMA_UNITS lanes)).
    reread = element_bytes(op.element_type) * FMA_UNITS * lanes / (MEMORY_BYTES_PER_CYCLE * m)
    short = 0 < tail <= ROW_TAIL_SHARE * m and reread <= TAIL_REREAD_SHARE
    return (rows, width) if (m % rows == 0 or short) and n >= width else None


def tile_preference(cpu: HostCPU) -> list[tuple[int, int]]:
    """Rows and vectors per row of the packed register tile, in order of preference (each
    taken only where the register file holds it and, for the first ones, its rows divide
    M; see `packed_register_tile`).
    B's micro-panel streams from L2 for every row of register tiles, NR elements per K
    step for MR x NR FMAs, so more rows take fewer of B's bytes per FMA (8 x 32: 8 bytes,
    4 x 64: 16); 6 x 64's 24 accumulators take fewer loads and broadcasts per FMA (10 per
    24, against 10 or 8 per 16) for 10.7 bytes of B. A read in place
    keeps its MR rows of a K step in L1, in one set where they lie a multiple of a way's
    bytes apart (K = 1024 f32 on a 4 KiB way), so taller tiles come first only where L1's
    ways exceed ACCUMULATORS // 2 (8 rows), leaving ways for B's streamed lines: there 6
    rows of PACKED_VECTORS vectors (24 accumulators), then 8 x 2 vectors, then 4 x
    PACKED_VECTORS; elsewhere 4 x PACKED_VECTORS, then 8 x 2. Measured on an Intel Xeon
    (12-way L1; f32, ratios to OpenBLAS in one rotating run at the same blocks):
    - 4 x 64 -> 8 x 32: 1024^3 1.07x -> 1.11x, 2048^3 1.02x -> 1.06x, 4096^3 0.92x ->
      0.96x, 512x1024x1024 1.06x -> 1.11x, 512x4096x1024 1.06x -> 1.10x (8 rounds),
      4096x4096x256 1.17x -> 1.22x, Llama 256x11008x4096 1.10x -> 1.11x and
      256x4096x11008 1.13x -> 1.17x, MLP 512x4096x1024 1.15x -> 1.17x; with the
      selector's blocks for each, B stored [N, K] 512x4096x4096 1.05x -> 1.13x and
      256x11008x4096 1.03x -> 1.12x, A stored [K, M] (packed) 2048^3 0.93x -> 0.99x and
      512x4096x1024 0.93x -> 1.00x; f64 (4 x 32 -> 8 x 16, against OpenBLAS's dgemm)
      2048^3 0.99x -> 1.06x, 1024^3 1.02x -> 1.06x, 512x4096x1024 0.94x -> 0.99x;
    - 8 x 32 -> 6 x 64 where 6 divides M: 384x4096x1024 1.01x -> 1.05x, 480x4096x1024
      1.09x -> 1.12x, 1536^3 1.05x -> 1.09x, MLP 768x3072x768 1.13x -> 1.17x.
    Earlier, with K in one block of 1024, 4 x 4 vectors had beaten 8 x 2 (1.08x and 1.10x
    at 1024^3 and 2048^3), and the Zen 4 library's tuned 1024^3 entry (8-way L1) is that
    tile."""
    four_rows = (ACCUMULATORS // PACKED_VECTORS, PACKED_VECTORS)
    eight_rows = (ACCUMULATORS // 2, 2)
    if cpu.features.l1d_ways > ACCUMULATORS // 2:
        return [(WIDE_TILE_ROWS, PACKED_VECTORS), eight_rows, four_rows]
    return [four_rows, eight_rows]


def wide_register_tile(op: OpInfo, cpu: HostCPU, mr: int, nr: int) -> tuple[int, int]:
    """The unpacked f32 micro-kernel's register tile where L1 has ways to spare beside a
    micro-panel step (`tile_preference`'s condition): 24 accumulators, 12 rows of two
    vectors, or 6 rows of four where A's rows (K elements apart, read in place) fall into
    one L1 set, where 12 would fill its ways; else `mr` x `nr`. Measured on an Intel Xeon
    (12-way L1; ratios to OpenBLAS in one rotating run, 6 rounds, 8 x 32 -> 12 x 32 / 6 x
    64): 256^3 1.16x -> 1.24x / 1.22x, 384^3 1.16x -> 1.23x / 1.19x, 512^3 1.03x -> 1.11x
    / 1.12x, 128x512x2048 (K rows 8 KiB apart) 1.15x -> 1.21x / 1.26x; the tuner's winners
    for the shipped library's unpacked shapes were such tiles too. Kept to M of at least
    four such tiles, whose partial last row tile is a small share, to N whose column tail
    the tile leaves narrow, and on several threads to M the rows divide (the threads'
    output blocks may split M, in whole tiles: `blocking.shared_blocks`)."""
    f, lanes = cpu.features, cpu.lanes(op.element_type)
    m, n, k = op.dims["M"], op.dims["N"], op.dims["K"]
    if op.element_type != "f32" or f.l1d_ways <= ACCUMULATORS // 2:
        return mr, nr
    same_set = (k * element_bytes("f32")) % (f.l1d_bytes // f.l1d_ways) == 0
    vectors = PACKED_VECTORS if same_set else 2
    rows, width = WIDE_TILE_ROWS * PACKED_VECTORS // vectors, vectors * lanes
    fits = (rows + 1) * vectors + 1 <= f.vector_registers
    narrow_tail = not lanes < n % width < width
    split = cpu.threads == 1 or m % rows == 0
    if fits and m >= 4 * rows and n >= width and narrow_tail and split:
        return rows, width
    return mr, nr
