"""The generic schedule: register tiles of the output, reductions stepped one at a time.

A padded input is materialised once. The dispatch's last op is tiled into register tiles of
the root's output (VECTOR elements of the vector loop by UNROLL and UNROLL2 of the reuse
loops, one of every other parallel loop) with its producers, the root among them, fused
into each tile; a scf.forall spreads the tiles over THREADS. The root's reductions are
then stepped one iteration at a time: each step is generalized, its unit loops folded and
vectorized into FMAs of loaded rows and broadcasts, whose accumulators stay in registers
across the reduction loops. Windowed reads (`oh + kh`) are plain once their window loop is
a unit loop, which is what lets any convolution, pooling or stencil vectorize this way.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import transform
from mlir.dialects.transform import structured

from mlirtune.interfaces.op import OpInfo
from mlirtune.schedules.builder import ScheduleBuilder
from mlirtune.schedules.generic.knob_values import GenericKnobs
from mlirtune.schedules.generic.root import KIND, output_loops, parallel_loops
from mlirtune.schedules.unit_steps import vectorize_unit_steps


def generic_schedule(op: OpInfo, knobs: GenericKnobs) -> ir.Module:
    sizes = output_loops(op, knobs.vector, knobs.unroll, knobs.unroll2)
    reductions = [1 if size == 0 else 0 for size in sizes]
    if op.attributes["vector_loop"] >= 0 and reductions[op.attributes["vector_loop"]]:
        reductions[op.attributes["vector_loop"]] = knobs.vector  # a row summed a vector a step
    parallel = knobs.threads > 1
    attrs = op.attributes
    with ScheduleBuilder(KIND) as s:
        if "pad_rank" in attrs:
            function = s.match(s.root, ["func.func"], step="match_padded_function")
            s.materialize_padding(function, attrs["pad_rank"], attrs["pad_row"], attrs["pad"])
        if "fused_output" in attrs:
            # The last op's loops are the root's parallel ones, in order: its tiles fuse
            # the root and the element-wise ops between them.
            anchor = s.last_op()
            anchor_loops = parallel_loops(op)
        else:
            anchor = s.match_root(s.root, KIND)
            anchor_loops = list(range(attrs["loops"]))
        tile = [sizes[loop] for loop in anchor_loops]
        vector_loop = attrs["vector_loop"]
        if vector_loop in anchor_loops and op.dims["V"] % knobs.vector:
            _peeled_register_tiles(s, anchor, tile, anchor_loops.index(vector_loop), parallel)
        else:
            s.fuse_with_loops(anchor, tile, step="register_tiles", parallel=parallel)
        function = s.match(s.root, ["func.func"], step="match_function")
        s.shrink_temporaries(function)
        if any(reductions):
            root = s.match_root(s.root, KIND, step="match_root_tiles")
            s.tile(root, reductions, step="reduction_steps")
        ops = structured.MatchOp(
            transform.AnyOpType.get(), function, interface=structured.MatchInterfaceEnum.LinalgOp
        ).result
        with s.at("generalize"):
            structured.GeneralizeOp(ops)
        vectorize_unit_steps(s, function)
    return s.module


def _peeled_register_tiles(
    s: ScheduleBuilder, anchor: ir.Value, tile: list[int], dimension: int, parallel: bool
) -> None:
    """Register tiles where VECTOR does not divide the (parallel) vector loop, the anchor's
    `dimension`: its other loops tiled first (over threads where `parallel`), then the
    vector loop, which is peeled into whole tiles and one partial tile, each static, so
    each vectorizes (a partial tile would not). Whole tiles alone left a loop of 1018
    outputs (2 x 509) to tiles of 2."""
    outer = [0 if i == dimension else size for i, size in enumerate(tile)]
    inner = [tile[i] if i == dimension else 0 for i in range(len(tile))]
    tiled, _ = s.fuse_with_loops(anchor, outer, step="register_tiles", parallel=parallel)
    _, (vector_loop,) = s.fuse_with_loops(tiled, inner, step="vector_tiles")
    s.peel(vector_loop, step="peel_vector_tail")
