"""Dispatches: a payload of several root ops (an imported model) split into kernels.

Each dispatch is one root op (a contraction, a convolution, a chain of row reductions)
with the fill it accumulates into and the element-wise ops fused to its result, outlined
into a function of its own in the payload's calling convention (memref arguments, the
output last). Each is planned and scheduled as a payload of its own, by the pipeline of its
root kind, so selectors, spec libraries and the tuner apply per dispatch; the module is
then lowered once (see mlirtune.pipeline.plan and mlirtune.dispatch.schedule).
"""
