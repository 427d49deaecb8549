"""A thin builder over the transform dialect bindings.

Every op is created under a named location (`schedule:step`), so when a transform fails
the diagnostic says which step of which schedule it was.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from mlir import ir
from mlir.dialects import transform
from mlir.dialects.transform import loop, structured
from mlir.dialects.transform import tensor as ttensor
from mlir.dialects.transform import vector as tvector

from mlirtune.interfaces.op import OpInfo
from mlirtune.ir.roots import ROOT_ATTRIBUTE

ENTRY_POINT = "__transform_main"
# The llvm.br property a back edge takes LLVM loop metadata from; its no-unroll value.
LOOP_ANNOTATION = "loop_annotation"
NO_UNROLL = "#llvm.loop_annotation<unroll = <disable = true>>"


class ScheduleBuilder:
    """Builds one `__transform_main` named sequence; use `with ScheduleBuilder(name) as s:`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.module = ir.Module.create()
        self.module.operation.attributes["transform.with_named_sequence"] = ir.UnitAttr.get()
        any_op = transform.AnyOpType.get()
        with ir.InsertionPoint(self.module.body):
            self._sequence = transform.NamedSequenceOp(
                ENTRY_POINT, [any_op], [], arg_attrs=[{"transform.consumed": ir.UnitAttr.get()}]
            )
        self.root = self._sequence.bodyTarget
        self._ip = ir.InsertionPoint(self._sequence.body)

    def __enter__(self) -> ScheduleBuilder:
        self._ip.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if exc[0] is None:
            with self.at("end"):
                transform.YieldOp([])
        self._ip.__exit__(*exc)

    @contextmanager
    def at(self, step: str) -> Iterator[None]:
        """Create the ops of one step under the location `schedule:step`."""
        with ir.Location.name(f"{self.name}:{step}"):
            yield

    # --- handles ---------------------------------------------------------------------------

    def match(
        self,
        target: ir.Value,
        op_names: Sequence[str],
        step: str = "match",
        attributes: Sequence[str] = (),
    ) -> ir.Value:
        """Ops named one of `op_names` nested in `target`, and carrying unit `attributes`."""
        with self.at(step):
            if not attributes:
                return structured.MatchOp.match_op_names(target, list(op_names)).result
            attrs = ir.DictAttr.get({name: ir.UnitAttr.get() for name in attributes})
            return structured.MatchOp(
                transform.AnyOpType.get(), target, ops=list(op_names), op_attrs=attrs
            ).result

    def match_root(self, target: ir.Value, kind: str, step: str = "match_root") -> ir.Value:
        """Root ops annotated `mlirtune.root = kind` (see mlirtune.ir.roots)."""
        with self.at(step):
            attrs = ir.DictAttr.get({ROOT_ATTRIBUTE: ir.StringAttr.get(kind)})
            return structured.MatchOp(transform.AnyOpType.get(), target, op_attrs=attrs).result

    def last_op(self, step: str = "match_last_op") -> ir.Value:
        """The op whose result the payload writes to its output argument."""
        store = self.match(self.root, ["bufferization.materialize_in_destination"], step=step)
        return self.producer(store, 0, step=step)

    def output_op(self, op: OpInfo) -> ir.Value:
        """The op a schedule tiles the output by: the last op, or the root `op` itself where
        its result is reshaped into the output (`reshaped_output`, a pointwise conv)."""
        if op.attributes.get("reshaped_output"):
            return self.match_root(self.root, op.kind, step="match_output_root")
        return self.last_op()

    def producer(self, consumer: ir.Value, operand: int = 0, step: str = "producer") -> ir.Value:
        """The op defining operand `operand` of `consumer` (e.g. the op whose result a
        `materialize_in_destination` writes, i.e. the last op of a payload)."""
        with self.at(step):
            return transform.GetProducerOfOperand(
                transform.AnyOpType.get(), consumer, operand
            ).result

    def match_generic(
        self, target: ir.Value, iterators: Sequence[str], step: str = "match"
    ) -> ir.Value:
        """linalg.generic ops whose iterator types are exactly `iterators`, e.g. the row
        reductions ["parallel", "reduction"] of a row-wise payload."""
        types = [ir.Attribute.parse(f"#linalg.iterator_type<{it}>") for it in iterators]
        attrs = ir.DictAttr.get({"iterator_types": ir.ArrayAttr.get(types)})
        with self.at(step):
            return structured.MatchOp(
                transform.AnyOpType.get(), target, ops=["linalg.generic"], op_attrs=attrs
            ).result

    # --- loop transformations ----------------------------------------------------------------

    def tile(
        self, target: ir.Value, sizes: Sequence[int], step: str, interchange: Sequence[int] = ()
    ) -> tuple[ir.Value, list]:
        """Tile with scf.for (size 0: untiled), the loops in `interchange` order if given."""
        with self.at(step):
            op = structured.TileUsingForOp(target, sizes=list(sizes), interchange=list(interchange))
        return op.tiled_linalg_op, list(op.loops)

    def fuse(self, target: ir.Value, sizes: Sequence[int], step: str) -> ir.Value:
        """Tile `target` and fuse its producers (fills, element-wise ops) into the tiles."""
        return self.fuse_with_loops(target, sizes, step)[0]

    def fuse_with_loops(
        self,
        target: ir.Value,
        sizes: Sequence[int],
        step: str,
        interchange: Sequence[int] | None = None,
        parallel: bool = False,
    ) -> tuple[ir.Value, list]:
        """`fuse`, also returning the loop handles (outermost first, one per non-zero size);
        `interchange` orders the tile loops (a permutation of the tiled dims). `parallel`
        makes them one scf.forall instead, whose iterations the lowering spreads over
        threads (lower_cpu.yaml); its handle is then the only one returned."""
        with self.at(step):
            op = structured.FuseOp(
                target,
                tile_sizes=list(sizes),
                tile_interchange=list(interchange) if interchange else None,
                apply_cleanup=True,
                use_forall=parallel,
            )
        return op.transformed, list(op.loops)

    def peel(self, loop_handle: ir.Value, step: str) -> tuple[ir.Value, ir.Value]:
        """Split an scf.for into a main loop whose trip count the step divides (so its tiles
        have static sizes and vectorize) and a remainder loop for the partial tile."""
        with self.at(step):
            any_op = transform.AnyOpType.get()
            # loop.peel takes scf.for handles only (checked when the schedule is verified).
            for_op = transform.CastOp(transform.OperationType.get("scf.for"), loop_handle)
            op = loop.LoopPeelOp(any_op, any_op, for_op.result)
        return op.peeled_loop, op.remainder_loop

    def split(
        self, target: ir.Value, dimension: int, size: int, step: str
    ) -> tuple[ir.Value, ir.Value]:
        """Split a structured op along loop `dimension` into the op over its first `size`
        iterations and the op over the rest, in program order (the second reads the first's
        result when the dimension is a reduction)."""
        with self.at(step):
            parts = structured.SplitOp(target, dimension, size).results[0]
            any_op = transform.AnyOpType.get()
            first, rest = transform.SplitHandleOp([any_op, any_op], parts).results
        return first, rest

    def split_tail(
        self, target: ir.Value, dimension: int, size: int, tail: int, step: str
    ) -> tuple[ir.Value, list[tuple[ir.Value, int]]]:
        """Split a structured op along loop `dimension` at `size`, and the `tail` iterations
        past it into `split_pieces`: the op over the first `size`, and the pieces."""
        main, rest = self.split(target, dimension, size, step=step)
        return main, self.split_pieces(rest, dimension, tail, step)

    def split_pieces(
        self, target: ir.Value, dimension: int, size: int, step: str
    ) -> list[tuple[ir.Value, int]]:
        """Split a structured op over `size` iterations of loop `dimension` into pieces of
        power-of-two widths down to 8, then the rest: vector rows that LLVM keeps whole,
        where it breaks other widths (24, 39, 53) into odd pieces, lane inserts and spills.
        Returns the (piece, width) list in order."""
        pieces: list[tuple[ir.Value, int]] = []
        while size:
            width = 1 << (size.bit_length() - 1) if size > 8 else size
            part = target
            if width < size:
                part, target = self.split(target, dimension, width, step=f"{step}_{len(pieces)}")
            pieces.append((part, width))
            size -= width
        return pieces

    def unroll(self, loop_handle: ir.Value, factor: int, step: str) -> None:
        """Unroll an scf.for by `factor` (the loop handle is consumed). A factor that does not
        divide the trip count leaves an epilogue loop for the remaining iterations."""
        with self.at(step):
            loop.LoopUnrollOp(loop_handle, factor=factor)

    def keep_rolled(self, loop_handles: Sequence[ir.Value], step: str) -> None:
        """Mark these scf.for loops `llvm.loop.unroll.disable`: unrolled whole, a fill's or
        a copy's loops left a block of a thousand stores for LLVM's quadratic schedulers."""
        with self.at(step):
            no_unroll = ir.Attribute.parse(NO_UNROLL)
            param = transform.ParamConstantOp(transform.AnyParamType.get(), no_unroll).param
            for handle in loop_handles:
                transform.AnnotateOp(handle, LOOP_ANNOTATION, param=param)

    def apply_patterns(
        self,
        target: ir.Value,
        step: str,
        *populate: Callable[[], object],
        canonicalize: bool = True,
    ) -> None:
        """One greedy rewrite over `target` with the pattern sets added by `populate`
        (e.g. `tvector.apply_patterns_vector_lower_shape_cast`), plus canonicalization."""
        with self.at(step):
            patterns = transform.ApplyPatternsOp(target)
            with ir.InsertionPoint(patterns.patterns):
                for add in populate:
                    add()
                if canonicalize:
                    transform.apply_patterns_canonicalization()

    def canonicalize(self, target: ir.Value, step: str = "canonicalize") -> None:
        """Apply canonicalization patterns (folds single-iteration loops, static sizes)."""
        self.apply_patterns(target, step)

    def canonicalize_loops(self, target: ir.Value, step: str = "canonicalize_loops") -> None:
        """`canonicalize` plus the scf.for loop canonicalizations: min/max of loop indices
        folded from the loop bounds, and dims of loop results and iter_args resolved to
        the dims of the loop's inits. After peeling, this gives tiles that consume the
        result of an earlier loop (an epilogue after the K loop) static shapes too."""
        self.apply_patterns(target, step, loop.apply_patterns_scf_for_loop_canonicalization)

    def shrink_temporaries(self, target: ir.Value, step: str = "shrink_temporaries") -> None:
        """Canonicalize, and fold `tensor.empty` sliced by a tile into a tile-sized one, so a
        fused intermediate is allocated per tile (and stays in cache), not at full size."""
        self.apply_patterns(target, step, ttensor.apply_patterns_tensor_fold_tensor_empty)

    def tile_reduction(
        self, target: ir.Value, sizes: Sequence[int], step: str
    ) -> tuple[ir.Value, ir.Value, ir.Value]:
        """Tile reduction dims into a loop that accumulates a partial result of tile shape
        element-wise, merged once after the loop; returns (partial op, merge op, loop)."""
        with self.at(step):
            any_op = transform.AnyOpType.get()
            op = structured.TileReductionUsingForOp(
                [any_op], any_op, any_op, any_op, target, tile_sizes=list(sizes)
            )
        return op.split_op, op.combining_op, op.for_op

    def fuse_into(self, producer: ir.Value, loop_handle: ir.Value, step: str) -> ir.Value:
        """Fuse `producer` into the containing loop `loop_handle`."""
        with self.at(step):
            op = structured.FuseIntoContainingOp(producer, loop_handle)
        return op.fused_op

    def materialize_padding(
        self, function: ir.Value, rank: int, width: int, pad: int, chunk: int = 64
    ) -> None:
        """The function's tensor.pad -> a fill of the padded buffer and a linalg.copy of
        the input into it (see `materialize_pad`); `pad` is the row's padding on each side."""
        pads = self.match(function, ["tensor.pad"], step="match_pad")
        self.materialize_pad(pads, rank, width, row=width - 2 * pad, chunk=chunk)

    def materialize_pad(
        self, pad: ir.Value, rank: int, width: int, *, row: int, chunk: int = 64
    ) -> None:
        """The tensor.pad ops `pad` -> a fill of the padded buffer and a linalg.copy of the
        input into it (both of rank `rank`), each tiled into rows of at most `chunk`
        elements so that they vectorize row by row; `width` is the padded row, `row` the
        input's. The insert_slice of the copied rows stays one, so bufferization writes
        them in place."""
        with self.at("pad_in_destination_style"):
            insert = structured.RewriteInDestinationPassingStyleOp(
                transform.AnyOpType.get(), pad
            ).transformed
        fill = self.producer(insert, 1, step="match_padding_fill")
        with self.at("copy_into_padding"):
            copy = structured.InsertSliceToCopyOp(transform.AnyOpType.get(), insert).transformed
        for target, length in ((fill, width), (copy, row)):
            size = min(chunk, length)
            _, loops = self.tile(target, [1] * (rank - 1) + [size], step="padding_rows")
            if length % size:
                self.peel(loops[-1], step="peel_padding_row")

    def vectorize_function(
        self, function: ir.Value, *, reductions_to_contract: bool = True, gathers: bool = False
    ) -> ir.Value:
        """Vectorize the function's static linalg ops, fold what follows (see vectorize_linalg)."""
        with self.at("vectorize"):
            return structured.VectorizeChildrenAndApplyPatternsOp(
                function,
                disable_multi_reduction_to_contract_patterns=not reductions_to_contract,
                vectorize_nd_extract=gathers,
            ).result

    def allow_fma(self, function: ir.Value) -> None:
        """Mark the function's float multiplies and adds `contract`, so LLVM may fuse them
        into FMAs: a generalized convolution step is a separate mulf and addf, which LLVM
        keeps apart without that flag."""
        with self.at("allow_fma"):
            ops = self.match(function, ["arith.mulf", "arith.addf"], step="match_multiply_add")
            contract = ir.Attribute.parse("#arith.fastmath<contract>")
            param = transform.ParamConstantOp(transform.AnyParamType.get(), contract).param
            transform.AnnotateOp(ops, "fastmath", param=param)

    def vectorize_linalg(
        self,
        function: ir.Value,
        *,
        reductions_to_contract: bool = True,
        minor_transfers: bool = True,
        gathers: bool = False,
    ) -> None:
        """Vectorize the (static-shaped) linalg ops of the function, then fold transfers into
        the slices around them. Unlike `vectorize_function`, tensor.insert_slice ops stay as
        they are: vectorizing a cache tile's insert_slice would copy the whole tile through
        one large vector value, slow to compile and a needless copy at run time.
        `reductions_to_contract` turns multiply-and-sum reductions into vector.contract (the
        contraction micro-kernels want that; element-wise sums of products do not).
        `minor_transfers` rewrites permuted transfers as minor-identity ones plus
        transposes; without it an accumulator's read and write keep one permutation map, so
        they hoist out of a convolution's filter loops as a pair. `gathers` vectorizes a
        body's tensor.extract, for rows read (`ir.gathers.reads_rows`) and row-wise tables."""
        with self.at("vectorize"):
            linalg_ops = structured.MatchOp(
                transform.AnyOpType.get(),
                function,
                interface=structured.MatchInterfaceEnum.LinalgOp,
            ).result
            structured.VectorizeOp(linalg_ops, vectorize_nd_extract=gathers)
        contract = [tvector.apply_patterns_vector_reduction_to_contract] * reductions_to_contract
        minor = [tvector.apply_patterns_vector_transfer_permutation_patterns] * minor_transfers
        self.apply_patterns(
            function,
            "fold_transfers",
            *contract,
            *minor,
            tvector.apply_patterns_vector_fold_arith_extension,
            tvector.apply_patterns_vector_sink_ops,
            ttensor.apply_patterns_tensor_fold_tensor_subset_ops_into_vector_transfers,
        )

    def drop_leading_unit_dims(self, function: ir.Value) -> None:
        """Drop vectors' leading unit dims (batch, image rows): accumulators stay 2-D."""
        self.apply_patterns(
            function,
            "drop_leading_unit_dims",
            tvector.apply_patterns_vector_cast_away_vector_leading_one_dim,
        )

    def hoist_invariant_subsets(self, function: ir.Value) -> None:
        """Keep accumulators in registers: hoist loop-invariant read/write pairs out of loops."""
        with self.at("hoist"):
            loops = structured.MatchOp.match_op_names(function, ["scf.for"]).result
            each = transform.ForeachOp([], [loops])
            with ir.InsertionPoint(each.body):
                loop.HoistLoopInvariantSubsetsOp(each.bodyTargets[0])
                transform.YieldOp([])

    def lower_vectors(self, function: ir.Value, canonicalize: bool = True) -> None:
        """Lower contractions to outer products, i.e. broadcast + FMA, and tidy transfers.
        `canonicalize=False` leaves folding to the lowering passes, for kernels where
        broadcast lowering and canonicalization together crash the pattern driver."""
        self.apply_patterns(
            function,
            "lower_vectors",
            lambda: tvector.apply_patterns_vector_lower_contraction(
                lowering_strategy=tvector.VectorContractLowering.OuterProduct
            ),
            tvector.apply_patterns_vector_lower_outerproduct,
            lambda: tvector.apply_patterns_vector_lower_multi_reduction(
                lowering_strategy=tvector.VectorMultiReductionLowering.InnerParallel
            ),
            tvector.apply_patterns_vector_transfer_permutation_patterns,
            lambda: tvector.apply_patterns_vector_lower_transfer(max_transfer_rank=1),
            tvector.apply_patterns_vector_lower_shape_cast,
            tvector.apply_patterns_vector_lower_broadcast,
            canonicalize=canonicalize,
        )

    def lower_row_reductions(self, function: ir.Value) -> None:
        """Lower multi-reductions over the contiguous (last) dim to one horizontal reduction
        per row. Only these: the host lowering handles the remaining vector ops, and adding
        lower_vectors' shape_cast/broadcast patterns makes canonicalization loop forever on
        single-row or single-column tiles."""
        self.apply_patterns(
            function,
            "lower_row_reductions",
            lambda: tvector.apply_patterns_vector_lower_multi_reduction(
                lowering_strategy=tvector.VectorMultiReductionLowering.InnerReduction
            ),
        )
