"""The gpu_contraction family's typed knobs and tile arithmetic: threads per block, whole
tiles, shared memory per K step."""

from __future__ import annotations

from dataclasses import dataclass

from mlirtune.interfaces.dtype import element_bytes
from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.schedule import KnobValues
from mlirtune.schedules.gpu_contraction.steps.workgroup import ldmatrix_row_padding
from mlirtune.targets.nvidia_gpu import NvidiaGPU


@dataclass(frozen=True)
class GpuTiles(KnobValues):
    """The gpu_contraction family's knobs (named in lower case, as the fields): `block_m` x
    `block_n` outputs per thread block, `thread_m` x `thread_n` per thread, `block_k` K per
    shared-memory step (0: threads read global memory); `mma` 1 takes tensor cores, a warp
    per `warp_m` x `warp_n` tile, with `stages` buffers per shared tile."""

    upper_case_names = False

    block_m: int
    block_n: int
    thread_m: int
    thread_n: int
    block_k: int
    mma: int
    stages: int
    warp_m: int
    warp_n: int


def whole_tiles(op: OpInfo, tiles: GpuTiles) -> bool:
    """Whether every block, thread and K-step tile is whole (static shapes throughout)."""
    m, n, k = op.dims["M"], op.dims["N"], op.dims["K"]
    bm, bn, bk = tiles.block_m, tiles.block_n, tiles.block_k
    return (
        m % bm == 0
        and n % bn == 0
        and bm % tiles.thread_m == 0
        and bn % tiles.thread_n == 0
        and (bk == 0 or k % bk == 0)
    )


def copy_lanes(op: OpInfo, tiles: GpuTiles) -> int:
    """Elements per 16-byte vector where every row a K step copies into shared memory
    starts 16-byte aligned (whole tiles; K, N, block_k and block_n multiples of the
    lanes, with A and B allocated aligned), else 1: the copies go element by element."""
    lanes = 16 // element_bytes(op.element_type)
    aligned = all(
        size % lanes == 0 for size in (op.dims["K"], op.dims["N"], tiles.block_k, tiles.block_n)
    )
    return lanes if tiles.block_k and whole_tiles(op, tiles) and aligned else 1


def shared_bytes(op: OpInfo, tiles: GpuTiles) -> int:
    """Shared memory one K step's tiles of A and B take (none with block_k = 0), their
    rows padded where tensor cores read them (mma = 1, see ldmatrix_row_padding), times
    the stages (buffers per tile)."""
    size = element_bytes(op.element_type)
    bm, bn, bk = tiles.block_m, tiles.block_n, tiles.block_k
    if tiles.mma:
        padded = bm * (bk + ldmatrix_row_padding(bk, size)) + bk * (
            bn + ldmatrix_row_padding(bn, size)
        )
        return size * padded * tiles.stages
    return size * (bm + bn) * bk


def block_dims(tiles: GpuTiles) -> list[int]:
    """Threads per block (x over N, y over M, z = 1): one thread per thread tile, or with
    tensor cores one warp per warp tile (x counts threads: 32 per warp)."""
    if tiles.mma:
        return [
            NvidiaGPU.warp_size * (tiles.block_n // tiles.warp_n),
            tiles.block_m // tiles.warp_m,
            1,
        ]
    return thread_dims(tiles.block_m, tiles.block_n, tiles.thread_m, tiles.thread_n)


def thread_dims(block_m: int, block_n: int, thread_m: int, thread_n: int) -> list[int]:
    """Threads per block of FMA thread tiles: one per thread tile (x over N, y over M)."""
    return [-(-block_n // thread_n), -(-block_m // thread_m), 1]


def largest_divisor(n: int, cap: int) -> int:
    return next(d for d in range(min(n, cap), 0, -1) if n % d == 0)
