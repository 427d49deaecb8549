"""The `gpu_contraction` family: a matmul (with its fill and an element-wise epilogue such as
bias + ReLU) tiled into a grid of thread blocks and a block of threads on an NVIDIA GPU.

The last op (the matmul, or its epilogue) is tiled into an `scf.forall` mapped to
`#gpu.block` (block_m x block_n outputs per block), fusing its producers; with block_k > 0
the block's matmul then steps through K block_k at a time, and each step's tiles of A and B
are staged in shared memory (`transform.structured.promote` into workgroup memory; the
descriptor step `share-workgroup-tiles` splits the copies among the block's threads, in
16-byte vectors where the schedule proves the rows aligned). The
function is bufferized, the block forall becomes a `gpu.launch`, and the fill, matmul and
epilogue inside it are each split among the same grid of threads (thread_m x thread_n
outputs per thread), so a thread reads back only what it wrote. Where every tile is whole,
each thread's tiles are vectorized and its accumulators stay in registers across the K
steps; partial tiles run as scalar loops. With block_k = 0 each thread reads A and B
straight from global memory. With mma = 1 (tensor cores: bf16 or f16 inputs into f32)
warps take the place of threads: each computes a warp_m x warp_n tile as 16 x 8 x 16
contractions, which the descriptor step `lower-warp-mma` turns into ldmatrix and mma.sync
(mma.py). The kernel outlining, NVVM lowering and PTX serialization are pass stages of
nvidia/lower_gpu.yaml.

family.py holds the knobs, selector, constraints and cost model; tiles.py the tile
arithmetic they share with transform.py, which builds the transform module; mma.py the
tensor-core path's rules, cost and warp steps.
"""

from mlirtune.schedules.gpu_contraction.family import GPU_CONTRACTION, GpuContraction

__all__ = ["GPU_CONTRACTION", "GpuContraction"]
