"""An NVIDIA GPU target, as facts: its compute capability, PTX features and device index.

The chip and features are validated up front, because LLVM's NVPTX backend aborts the
process (rather than reporting a diagnostic) on some bad values. Lowering is elsewhere:
the `gpu_contraction` schedule family (mlirtune.schedules), the packaged descriptors under
`nvidia/` and the PtxEngine (mlirtune.engine.ptx), composed by mlirtune.api; the CUDA runtime
(mlirtune.runtime.cuda) runs what it compiles.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar

from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.gpu_program import STATIC_SHARED_BYTES
from mlirtune.interfaces.target import Target

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
# Shared memory a block may take by opting in to dynamic shared memory, per compute
# capability (CUDA programming guide); past STATIC_SHARED_BYTES a kernel must opt in.
SHARED_OPT_IN_BYTES = {
    "sm_70": 96 * 1024,
    "sm_72": 96 * 1024,
    "sm_75": 64 * 1024,
    "sm_80": 163 * 1024,
    "sm_86": 99 * 1024,
    "sm_87": 163 * 1024,
    "sm_89": 99 * 1024,
    "sm_90": 227 * 1024,
    "sm_90a": 227 * 1024,
}
_CHIP = re.compile(r"sm_\d+[af]?")
_FEATURE = re.compile(r"[+-][A-Za-z0-9_.]+")
_PTX_FEATURE = re.compile(r"\+ptx(\d+)")


@dataclass(frozen=True)
class GpuFacts:
    """What a cost model needs to know about a GPU besides its chip. The chip name does
    not say how many SMs a part has or how fast its memory is, so the defaults describe an
    A100-class part (sm_80): estimates from them rank the configs of one op; they are not
    predictions for a given card. Give the real figures to model another part."""

    sms: int = 108
    ghz: float = 1.41
    fma_warps_per_cycle: float = 2.0  # FP32 FMA warp instructions an SM issues per cycle
    load_warps_per_cycle: float = 1.0  # 32-bit load warp instructions per cycle (L1 hit)
    mma_per_cycle: float = 0.5  # bf16 mma.sync.m16n8k16 (2048 FMAs) an SM issues per cycle
    dram_bytes_per_s: float = 1.5e12
    l2_bytes_per_s: float = 4.0e12
    threads_per_sm: int = 2048
    blocks_per_sm: int = 32


class NvidiaGPU(Target):
    """An NVIDIA GPU named by its compute capability (`chip`, e.g. "sm_80") and PTX
    features (e.g. "+ptx76"); `index` picks the CUDA device that runs the kernels; `facts`
    describe the part for cost models (nominal by default)."""

    name = "nvidia-gpu"
    # True of every chip since sm_20: the CUDA limit on a block, and threads per warp.
    max_threads_per_block: ClassVar[int] = 1024
    warp_size: ClassVar[int] = 32

    def __init__(
        self,
        chip: str = "sm_80",
        features: str | None = None,
        index: int = 0,
        facts: GpuFacts | None = None,
    ) -> None:
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
        self.facts = facts or GpuFacts()

    @property
    def shared_bytes_per_block(self) -> int:
        """Shared memory one block may use on this chip (static, or opted in)."""
        return SHARED_OPT_IN_BYTES.get(self.chip, STATIC_SHARED_BYTES)

    def __repr__(self) -> str:
        return f"NvidiaGPU(chip={self.chip!r}, features={self.features!r}, index={self.index})"

    def descriptor_search_path(self) -> list[str]:
        """Only the NVIDIA folder: a payload it has no pipeline for must fail there, never
        fall back to a CPU pipeline."""
        return ["nvidia"]

    def fingerprint(self) -> dict[str, Any]:
        return {"target": self.name, "chip": self.chip, "features": self.features}

    def pipeline_values(self) -> dict[str, int | str]:
        """Descriptor slots this target fills: `$chip` and `$features` of
        `nvvm-attach-target` in nvidia/lower_gpu.yaml."""
        return {"chip": self.chip, "features": self.features}
