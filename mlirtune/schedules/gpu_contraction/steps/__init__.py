"""The GPU contraction family's own IR rewrites, which the nvidia descriptors run as steps:
workgroup tiles in shared memory, multi-stage copies, warp-level MMA, dynamic shared
memory past the static 48 KiB."""
