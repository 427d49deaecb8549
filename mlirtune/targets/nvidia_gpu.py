"""A compile-only NVIDIA GPU target: matmul payloads lowered through the gpu dialect to PTX.

The route is upstream MLIR only. A transform schedule tiles the matmul into a grid of
blocks and a block of threads (`scf.forall` with `#gpu.block`/`#gpu.thread` mappings),
bufferizes and maps the foralls onto a `gpu.launch`. Passes then outline the kernel,
attach an `#nvvm.target`, lower to the NVVM and LLVM dialects and serialize the kernel
module with `gpu-module-to-binary{format=isa}`, whose PTX text needs neither ptxas nor a
GPU. Nothing here runs a kernel.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from mlir import ir
from mlir.dialects import gpu
from mlir.dialects import transform as tr
from mlir.dialects.bufferization import LayoutMapOption
from mlir.dialects.transform import bufferization as tbufferization
from mlir.dialects.transform import gpu as tgpu
from mlir.dialects.transform import structured

from mlirtune.errors import MlirtuneError, UsageError
from mlirtune.ir.context import new_context, run_passes
from mlirtune.ir.roots import OpInfo, find_roots
from mlirtune.pipeline.driver import apply_schedule
from mlirtune.schedules.builder import ScheduleBuilder
from mlirtune.targets.base import Target

if TYPE_CHECKING:
    from mlirtune.workload import Workload

# The lowest PTX ISA version (x10) LLVM 22's NVPTX backend accepts for each chip it knows,
# read off the `.version` it emits when no PTX feature is given. A lower `+ptxNN` aborts
# the process inside LLVM (a fatal error, not a diagnostic), so it is refused up front.
MIN_PTX = {
    **dict.fromkeys(("sm_20", "sm_21", "sm_30", "sm_35"), 32),
    **{"sm_32": 40, "sm_37": 41, "sm_50": 40, "sm_52": 41, "sm_53": 42},
    **dict.fromkeys(("sm_60", "sm_61", "sm_62"), 50),
    **{"sm_70": 60, "sm_72": 61, "sm_75": 63, "sm_80": 70, "sm_86": 71, "sm_87": 74},
    **{"sm_88": 90, "sm_89": 78, "sm_90": 78, "sm_90a": 80},
    **dict.fromkeys(("sm_100", "sm_100a", "sm_101", "sm_101a"), 86),
    **dict.fromkeys(("sm_100f", "sm_101f", "sm_103", "sm_103a", "sm_103f"), 88),
    **dict.fromkeys(("sm_110", "sm_110a", "sm_110f"), 90),
    **{"sm_120": 87, "sm_120a": 87},
    **dict.fromkeys(("sm_120f", "sm_121", "sm_121a", "sm_121f"), 88),
}
DEFAULT_PTX = 76
_CHIP = re.compile(r"sm_\d+[af]?")
_FEATURE = re.compile(r"[+-][A-Za-z0-9_.]+")
_PTX_FEATURE = re.compile(r"\+ptx(\d+)")

# Largest tiles the selector picks: 64x64 outputs per block, 4x4 per thread (256 threads).
BLOCK_CAP = 64
THREAD_CAP = 4
MAX_THREADS_PER_BLOCK = 1024
PARAMETER_NAMES = ("block_m", "block_n", "thread_m", "thread_n")


class NvidiaGPU(Target):
    """An NVIDIA GPU named by its compute capability (`chip`, e.g. "sm_80") and PTX
    features (e.g. "+ptx76"); `index` picks the device once execution exists."""

    name = "nvidia-gpu"

    def __init__(self, chip: str = "sm_80", features: str | None = None, index: int = 0) -> None:
        if not _CHIP.fullmatch(chip):
            raise UsageError(f"bad NVIDIA chip {chip!r}: expected sm_<NN>[a|f]", stage="target")
        if features is None:  # PTX 7.6, or the chip's minimum where that is newer
            features = f"+ptx{max(DEFAULT_PTX, MIN_PTX.get(chip, 0))}"
        flags = [f for f in features.split(",") if f]
        if not all(_FEATURE.fullmatch(f) for f in flags):
            # LLVM asserts on a flag without a leading +/-; refuse it here instead.
            raise UsageError(f"bad features {features!r}: expected e.g. '+ptx76'", stage="target")
        for flag in flags:
            ptx = _PTX_FEATURE.fullmatch(flag)
            if ptx and chip in MIN_PTX and int(ptx.group(1)) < MIN_PTX[chip]:
                raise UsageError(
                    f"{chip} needs PTX {MIN_PTX[chip] / 10:.1f} or newer, got {flag!r}",
                    stage="target",
                )
        if index < 0:
            raise UsageError(f"bad device index {index}", stage="target")
        self.chip, self.features, self.index = chip, ",".join(flags), index

    def __repr__(self) -> str:
        return f"NvidiaGPU(chip={self.chip!r}, features={self.features!r}, index={self.index})"

    # --- Target interface ------------------------------------------------------------------

    def descriptor_search_path(self) -> list[str]:
        return ["nvidia", "generic"]

    def fingerprint(self) -> dict[str, Any]:
        return {"target": self.name, "chip": self.chip, "features": self.features}

    def select_parameters(self, schedule: str, op: OpInfo) -> dict[str, int]:
        """Block and thread tiles for a matmul: the largest divisors of M and N up to
        BLOCK_CAP per block and THREAD_CAP per thread, so that every tile is full."""
        if schedule != "contraction" or op.kind != "matmul":
            raise UsageError(
                f"{self.name} selects parameters for 'contraction' on matmul only, "
                f"not {schedule!r} on {op.kind}",
                stage="select",
            )
        block_m = _largest_divisor(op.dims["M"], BLOCK_CAP)
        block_n = _largest_divisor(op.dims["N"], BLOCK_CAP)
        return {
            "block_m": block_m,
            "block_n": block_n,
            "thread_m": _largest_divisor(block_m, THREAD_CAP),
            "thread_n": _largest_divisor(block_n, THREAD_CAP),
        }

    # --- compilation -----------------------------------------------------------------------

    def engine(self, pipeline=None, **options):
        """No GPU runtime yet: this target compiles (`mlirtune opt`) but cannot execute."""
        raise MlirtuneError(
            f"{self.name} is compile-only for now; use `mlirtune opt --target {self.name}` "
            "to see the PTX",
            stage="target",
        )

    def lower(
        self,
        workload,
        parameters=None,
        *,
        pipeline=None,
        observer=None,
        print_after_all=False,
        **engine_options,
    ) -> None:
        """Compile to PTX and hand the text to `observer` as stage "ptx" (spec libraries
        are for CPU targets; `engine_options` are ignored)."""
        if pipeline is not None:
            raise MlirtuneError(
                f"{self.name} has a fixed pipeline; drop --pipeline/--schedule", stage="target"
            )
        ptx = self.compile_to_ptx(workload, parameters)
        if observer:
            observer("ptx", ptx)

    def compile_to_ptx(self, workload: Workload, parameters: dict[str, int] | None = None) -> str:
        """Lower `workload` (a matmul, optionally with a fused epilogue) to PTX text.

        `parameters` overrides the selector's block/thread tiles. Kernel memrefs are passed
        as bare pointers, which needs static shapes (as every workload payload has).
        Failures raise MlirtuneError whose stage names the step: schedule, gpu-outline,
        gpu-target, gpu-lower or gpu-serialize, with MLIR's diagnostics in the message.
        """
        with new_context(), ir.Location.unknown():
            module = workload.payload_module()
            op = _single_matmul(module)
            tiles = {**self.select_parameters("contraction", op), **(parameters or {})}
            _check_tiles(tiles)
            apply_schedule(module, _gpu_schedule(module, tiles))
            for stage, pipeline in self.pipeline_stages():
                run_passes(module, pipeline, stage=stage)
                if stage == "gpu-outline":
                    _prepare_kernels(module)
            return extract_ptx(module)

    def pipeline_stages(self) -> list[tuple[str, str]]:
        """(stage, textual pipeline) pairs run after the schedule, in order."""
        target = f"chip={self.chip} O=3" + (f" features={self.features}" if self.features else "")
        stages = {
            "gpu-outline": [
                "canonicalize",
                "cse",
                "func.func(convert-linalg-to-loops)",
                "func.func(promote-buffers-to-stack{max-rank-of-allocated-memref=3})",
                "gpu-launch-sink-index-computations",
                "gpu-kernel-outlining",
            ],
            "gpu-target": [f"nvvm-attach-target{{{target}}}"],
            "gpu-lower": [
                "expand-strided-metadata",
                "lower-affine",
                "convert-scf-to-cf",
                "canonicalize",
                "cse",
                "gpu.module(convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=true},canonicalize,cse)",
                "convert-nvvm-to-llvm",
                "gpu-to-llvm{use-bare-pointers-for-kernels=true}",
                "convert-index-to-llvm",
                "convert-cf-to-llvm",
                "reconcile-unrealized-casts",
            ],
            "gpu-serialize": ["gpu-module-to-binary{format=isa}"],
        }
        return [(stage, f"builtin.module({','.join(p)})") for stage, p in stages.items()]


def extract_ptx(module: ir.Module) -> str:
    """The PTX text of the module's `gpu.binary` objects, read through `#gpu.object`."""
    objects: list[gpu.ObjectAttr] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "gpu.binary":
            objects.extend(gpu.ObjectAttr(a) for a in ir.ArrayAttr(op.attributes["objects"]))
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    if not objects:
        raise MlirtuneError("lowering produced no gpu.binary", stage="gpu-serialize")
    formats = {gpu.CompilationTarget(o.format) for o in objects}
    if formats != {gpu.CompilationTarget.Assembly}:
        raise MlirtuneError(
            f"expected PTX (assembly) objects, got {formats}", stage="gpu-serialize"
        )
    return "\n".join(o.object.decode() for o in objects)


def _gpu_schedule(module: ir.Module, tiles: dict[str, int]) -> ir.Module:
    """Tile the last linalg op (the matmul, or its epilogue) into blocks, then threads,
    fusing its producers into both levels; bufferize and map the foralls to a gpu.launch.

    Producers are fused consumer-first so each fusion finds its user already in the loop.
    """
    names = [op.name for op in _linalg_ops(module)]
    anchor_name, producers = names[-1], list(dict.fromkeys(reversed(names[:-1])))
    blocks = _mapping("block")
    threads = _mapping("thread")
    with ScheduleBuilder("nvidia_gpu") as s:
        anchor = s.match(s.root, [anchor_name], "match_anchor")
        handles = [s.match(s.root, [name], f"match_{name}") for name in producers]
        # Blocks take fixed tile sizes; threads split each block tile into a fixed count of
        # pieces, so the thread forall keeps a static trip count even in partial tiles.
        tile_x, tile_y, _ = _block_dims(tiles)
        for level, split, mapping in (
            ("blocks", {"tile_sizes": [tiles["block_m"], tiles["block_n"]]}, blocks),
            ("threads", {"num_threads": [tile_y, tile_x]}, threads),
        ):
            with s.at(f"tile_{level}"):
                tiled = structured.TileUsingForallOp(anchor, mapping=mapping, **split)
            anchor = tiled.tiled_op
            handles = [s.fuse_into(h, tiled.forall_op, f"fuse_{level}") for h in handles]
        _cleanup(s, s.root, "before_bufferize")
        with s.at("bufferize"):
            bufferized = tbufferization.OneShotBufferizeOp(
                s.root,
                bufferize_function_boundaries=True,
                function_boundary_type_conversion=LayoutMapOption.IdentityLayoutMap,
            ).transformed
        function = _cleanup(s, bufferized, "after_bufferize")
        with s.at("map_blocks"):
            launch = tgpu.MapForallToBlocks(function, generate_gpu_launch=True).result
        with s.at("map_threads"):
            tgpu.MapNestedForallToThreads(
                launch, block_dims=_block_dims(tiles), sync_after_distribute=False
            )
    return s.module


def _prepare_kernels(module: ir.Module) -> None:
    """Let LLVM contract a*b+c into FMA inside kernels, as nvcc does by default
    (--fmad=true), and mark kernel memref arguments noalias where every launch passes
    distinct arguments of the host function, whose `restrict` views promise no aliasing
    (this keeps accumulators in registers and lets loads use the read-only cache)."""
    distinct: dict[tuple[str, ...], bool] = {}
    kernels: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "gpu.launch_func":
            key = tuple(ir.SymbolRefAttr(op.attributes["kernel"]).value)
            distinct[key] = distinct.get(key, True) and _distinct_arguments(
                op.opview.kernelOperands
            )
        elif op.name == "gpu.func" and "gpu.kernel" in op.attributes:
            kernels.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    for kernel in kernels:
        kernel.walk(_allow_contraction)
        key = tuple(ir.StringAttr(o.attributes["sym_name"]).value for o in (kernel.parent, kernel))
        if distinct.get(key):
            _add_noalias(kernel)


def _allow_contraction(op: ir.Operation) -> ir.WalkResult:
    if op.name in ("arith.mulf", "arith.addf", "arith.subf"):
        op.attributes["fastmath"] = ir.Attribute.parse("#arith.fastmath<contract>")
    return ir.WalkResult.ADVANCE


def _distinct_arguments(values) -> bool:
    memrefs = [v for v in values if isinstance(v.type, ir.MemRefType)]
    if not all(isinstance(v, ir.BlockArgument) for v in memrefs):
        return False
    return len({v.arg_number for v in memrefs}) == len(memrefs)


def _add_noalias(kernel: ir.Operation) -> None:
    arguments = kernel.regions[0].blocks[0].arguments
    old = kernel.attributes.get("arg_attrs", None)
    attrs = []
    for i, argument in enumerate(arguments):
        entries = {a.name: a.attr for a in ir.DictAttr(old[i])} if old is not None else {}
        if isinstance(argument.type, ir.MemRefType):
            entries["llvm.noalias"] = ir.UnitAttr.get()
        attrs.append(ir.DictAttr.get(entries))
    kernel.attributes["arg_attrs"] = ir.ArrayAttr.get(attrs)


def _cleanup(s: ScheduleBuilder, scope: ir.Value, step: str) -> ir.Value:
    """Canonicalize and CSE the functions under `scope`: drops the untiled producers left
    dead by fusion and the self-copies bufferization leaves for in-place forall writes."""
    function = s.match(scope, ["func.func"], f"match_function_{step}")
    s.canonicalize(function, f"canonicalize_{step}")
    with s.at(f"cse_{step}"):
        tr.ApplyCommonSubexpressionEliminationOp(function)
    return function


def _linalg_ops(module: ir.Module) -> list[ir.Operation]:
    ops: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name.startswith("linalg.") and op.name != "linalg.yield":
            ops.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return ops


def _single_matmul(module: ir.Module) -> OpInfo:
    matmuls = [info for _, info in find_roots(module) if info.kind == "matmul"]
    if len(matmuls) != 1:
        raise UsageError(
            f"NvidiaGPU compiles payloads with exactly one matmul, found {len(matmuls)}",
            stage="gpu-schedule",
        )
    return matmuls[0]


def _check_tiles(tiles: dict[str, int]) -> None:
    unknown = sorted(set(tiles) - set(PARAMETER_NAMES))
    if unknown or not all(_positive_int(tiles[k]) for k in PARAMETER_NAMES):
        raise UsageError(
            f"GPU tiles must be positive integers {', '.join(PARAMETER_NAMES)}; got {tiles}",
            stage="gpu-schedule",
        )
    dims = _block_dims(tiles)
    if dims[0] * dims[1] > MAX_THREADS_PER_BLOCK:
        raise UsageError(
            f"{dims[0]}x{dims[1]} threads per block exceeds {MAX_THREADS_PER_BLOCK}",
            stage="gpu-schedule",
        )


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _block_dims(tiles: dict[str, int]) -> list[int]:
    """Threads per block (x over N, y over M, z = 1): one thread per thread tile."""
    return [-(-tiles["block_n"] // tiles["thread_n"]), -(-tiles["block_m"] // tiles["thread_m"]), 1]


def _mapping(kind: str) -> ir.ArrayAttr:
    """[#gpu.<kind><y>, #gpu.<kind><x>]: rows (M) on y, columns (N) on x, the contiguous
    dimension of B and C, so that consecutive threads of a warp read nearby addresses."""
    return ir.ArrayAttr.get([ir.Attribute.parse(f"#gpu.{kind}<{d}>") for d in "yx"])


def _largest_divisor(n: int, cap: int) -> int:
    return next(d for d in range(min(n, cap), 0, -1) if n % d == 0)
