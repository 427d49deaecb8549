"""The knobs of IREE's llvm-cpu lowering config for a contraction root, and their space.

IREE's CPU pipeline for matmuls (DoubleTilingExpert) reads four tile levels from a root op's
`#iree_cpu.lowering_config`: `distribution` (a workgroup's tile), `cache_parallel` (the
tile kept in cache), `vector_common_parallel` (the register tile, unrolled into vector ops)
and `vector_reduction` (the K steps one vector op takes). The knobs, per contraction role:

- TILE_M, TILE_N: the workgroup's tile of the innermost M and N loops, which is also its
  cache tile (IREE's own configs give both levels the same sizes);
- VEC_M, VEC_N, VEC_K: the register tile and the K steps of each vector contraction.

Batch loops and outer M or N loops get tiles of one, K no parallel tile. A config of all
zeros is IREE's own choice: the payload compiled without a spec, the tuner's baseline.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import z3

from mlirtune.interfaces.dtype import element_bytes
from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.schedule import Config, Constraint
from mlirtune.schedules.cpu_model import ceil_div, seconds, step_cycles, vectors
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.tune.space import SearchSpace

KNOBS = ("TILE_M", "TILE_N", "VEC_M", "VEC_N", "VEC_K")
IREE_DEFAULT: Config = dict.fromkeys(KNOBS, 0)
# The translation pipeline IREE gives each kind of root, with its options; the contraction
# pipeline's cache level is the workgroup's tile again (IREE's configs have it so).
PIPELINES = {
    "contraction": "#iree_codegen.translation_info<pipeline = "
    "#iree_cpu.pipeline<DoubleTilingExpert>, {enable_loop_peeling}>",
    "convolution": "#iree_codegen.translation_info<pipeline = "
    "#iree_cpu.pipeline<ConvTileAndDecomposeExpert>>",
}
TILE_CHOICES = (8, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512)
ROW_CHOICES = (1, 2, 3, 4, 6, 8, 12, 16)
K_CHOICES = (1, 2, 4, 8, 16)
# IREE 3.13's llvm-cpu fails a dispatch with a vector of this many bytes or more: a
# vector.contract of 8 x 32 x 16 f32 (16384 bytes of products) was refused, 4 x 32 x 16 and
# 8 x 16 x 16 (8192) compiled.
LARGE_VECTOR_BYTES = 16384


@dataclass(frozen=True)
class IreeRoot:
    """A dispatch's root op, as the spec tool read it from IREE's dumped configuration."""

    file: str  # the dumped configuration holding the dispatch
    dispatch: str  # its function's name
    op_name: str
    loops: tuple[int, ...]
    dtypes: tuple[str, ...]
    kind: str | None  # contraction, convolution; None: a root the knobs do not cover
    roles: dict[str, tuple[int, ...]] | None  # its batch / m / n / k loops
    matched: bool = False  # compiled with a spec: whether the spec set its config

    @classmethod
    def from_json(cls, found: dict) -> IreeRoot:
        roles = found.get("roles")
        return cls(
            found["file"],
            found["dispatch"],
            found["root"],
            tuple(found["loops"]),
            tuple(found["dtypes"]),
            found.get("kind"),
            {role: tuple(loops) for role, loops in roles.items()} if roles else None,
            bool(found.get("matched")),
        )

    @property
    def tunable(self) -> bool:
        """Whether the knobs cover it: a contraction or convolution with M, N and K loops
        (a depthwise convolution has no K: its channels are parallel)."""
        return self.roles is not None and all(self.roles[r] for r in ("m", "n", "k"))

    def size(self, role: str) -> int:
        """The innermost loop of `role` (m, n or k): the one the knobs tile."""
        assert self.roles is not None
        return self.loops[self.roles[role][-1]]

    @property
    def flops(self) -> int:
        """A multiply and an add per point of its loops (a contraction's or convolution's)."""
        return 2 * math.prod(self.loops)

    def describe(self) -> str:
        return f"{self.op_name} {'x'.join(map(str, self.loops))} {self.dtypes[0]}"


def lowering_config(root: IreeRoot, config: Config) -> str:
    """The `#iree_cpu.lowering_config` attribute that `config` sets on `root`."""
    assert root.roles is not None
    parallel = [1] * len(root.loops)
    vector = [1] * len(root.loops)
    reduction = [0] * len(root.loops)
    for loop in root.roles["k"]:
        parallel[loop] = vector[loop] = 0
        reduction[loop] = 1
    for role in ("m", "n"):
        innermost = root.roles[role][-1]
        parallel[innermost] = config[f"TILE_{role.upper()}"]
        vector[innermost] = config[f"VEC_{role.upper()}"]
    reduction[root.roles["k"][-1]] = config["VEC_K"]
    levels = {"distribution": parallel}
    if root.kind == "contraction":
        levels["cache_parallel"] = parallel
    levels |= {"vector_common_parallel": vector, "vector_reduction": reduction}
    body = ", ".join(f"{name} = [{', '.join(map(str, sizes))}]" for name, sizes in levels.items())
    return f"#iree_cpu.lowering_config<{body}>"


def search_space(root: IreeRoot, target: HostCPU) -> SearchSpace:
    """The knobs' candidate values for `root` on `target`, and their constraints."""
    if not root.tunable:
        raise UsageError(
            f"dispatch {root.dispatch} ({root.describe()}): only contraction and convolution "
            "roots are tuned for IREE so far",
            stage="space",
        )
    lanes = target.lanes(root.dtypes[-1])
    m, n, k = (root.size(role) for role in ("m", "n", "k"))
    domains = {
        "TILE_M": (0, *(t for t in TILE_CHOICES if t < 2 * m)),
        "TILE_N": (0, *(t for t in TILE_CHOICES if t < 2 * n)),
        "VEC_M": (0, *(r for r in ROW_CHOICES if r <= m)),
        "VEC_N": (0, *(v * lanes for v in (1, 2, 3, 4) if v * lanes < 2 * n)),
        "VEC_K": (0, *(s for s in K_CHOICES if s <= k)),
    }
    knobs = {name: z3.Int(name) for name in domains}
    space = SearchSpace(
        "iree_cpu_contraction",
        domains,
        constraints(knobs, lanes, target.features.vector_registers, element_bytes(root.dtypes[-1])),
        lambda config: cost(config, m, n, k, root.dtypes[-1], target),
    )
    space.check()
    return space


def constraints(
    knobs: dict[str, z3.ArithRef], lanes: int, registers: int, bytes_per_element: int
) -> list[Constraint]:
    """What DoubleTilingExpert accepts, and what keeps its register tile in registers."""
    tile_m, tile_n, vec_m, vec_n, vec_k = (knobs[name] for name in KNOBS)
    chosen = z3.And(*(knobs[name] > 0 for name in KNOBS))
    iree_default = z3.And(*(knobs[name] == 0 for name in KNOBS))
    accumulators = vec_m * vectors(vec_n, lanes)
    return [
        Constraint(
            "all_or_none",
            "every knob set (a spec), or none (IREE's own config)",
            z3.Or(chosen, iree_default),
        ),
        Constraint(
            "vector_rows_divide_tile",
            "the workgroup tile is whole register tiles along M",
            z3.Implies(chosen, tile_m % vec_m == 0),
        ),
        Constraint(
            "vector_columns_divide_tile",
            "the workgroup tile is whole register tiles along N",
            z3.Implies(chosen, tile_n % vec_n == 0),
        ),
        Constraint(
            "accumulators_fit",
            "the register tile's accumulators, one row of B vectors and a broadcast fit in "
            "the vector registers (beyond that LLVM spills the tile)",
            z3.Implies(chosen, accumulators + vectors(vec_n, lanes) + 1 <= registers),
        ),
        Constraint(
            "vector_product_fits",
            f"the products of one vector contraction (VEC_M x VEC_N x VEC_K elements) stay "
            f"under {LARGE_VECTOR_BYTES} bytes: IREE's llvm-cpu refuses larger vectors",
            z3.Implies(chosen, vec_m * vec_n * vec_k * bytes_per_element < LARGE_VECTOR_BYTES),
        ),
    ]


def cost(config: Config, m: int, n: int, k: int, dtype: str, target: HostCPU) -> float:
    """Estimated seconds per call, by the host model the project's families share
    (schedules/cpu_model): the register tiles over the workgroup tiles (partial ones padded),
    each K step of one priced by `step_cycles`, the K loop unrolled by VEC_K. IREE's own
    config is priced as a mid-sized tile."""
    if not any(config.values()):
        lanes = target.lanes(dtype)
        config = {"TILE_M": 64, "TILE_N": 64, "VEC_M": 8, "VEC_N": lanes, "VEC_K": 8}
    rows = ceil_div(m, config["TILE_M"]) * config["TILE_M"]
    columns = ceil_div(n, config["TILE_N"]) * config["TILE_N"]
    tiles = rows * columns / (config["VEC_M"] * config["VEC_N"])
    step = step_cycles(config["VEC_M"], config["VEC_N"], target, dtype, unroll=config["VEC_K"])
    return seconds(tiles * k * step, target)
