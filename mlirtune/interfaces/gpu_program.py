"""A compiled GPU program as plain data: the PTX, each kernel launch and the arguments.

It is the cut between the two halves of GPU work: the engine (which needs MLIR) writes it,
and the CUDA runtime (which needs only the driver, through cuda-bindings) loads and runs
it, in the same process or on another machine. Nothing here imports MLIR.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from mlirtune.interfaces.errors import UsageError

FORMAT = "mlirtune-gpu-program/1"
# Shared memory a block takes without opting in to dynamic shared memory (every CUDA chip):
# a launch that needs more must opt in first.
STATIC_SHARED_BYTES = 48 * 1024


@dataclass(frozen=True)
class KernelLaunch:
    """One `gpu.launch_func`: the kernel's PTX entry, its grid and block (x, y, z), its
    dynamic shared memory, and which program arguments it takes, in order."""

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int
    arguments: tuple[int, ...]


@dataclass(frozen=True)
class ProgramArgument:
    """A payload argument in call order; outputs carry the tolerance they are checked with
    (|out - ref| <= atol + rtol * |ref|), so a runner without MLIR can verify them."""

    name: str
    shape: tuple[int, ...]
    dtype: str  # a numpy dtype name ("float32", "bfloat16" through ml_dtypes)
    is_output: bool = False
    atol: float = 0.0
    rtol: float = 0.0

    @property
    def numpy_dtype(self) -> np.dtype:
        if self.dtype == "bfloat16":
            import ml_dtypes

            return np.dtype(ml_dtypes.bfloat16)
        return np.dtype(self.dtype)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.numpy_dtype.itemsize


@dataclass(frozen=True)
class GpuProgram:
    """What runs a workload on an NVIDIA GPU: `ptx` for `chip`, `launches` in order, the
    `arguments`, and the workload, config and FLOPs it was compiled from (for reports)."""

    chip: str
    ptx: str
    launches: tuple[KernelLaunch, ...]
    arguments: tuple[ProgramArgument, ...]
    workload: dict[str, int | str | bool | float]
    parameters: dict[str, int]
    flops: int

    def __post_init__(self) -> None:
        for launch in self.launches:
            if not all(0 <= a < len(self.arguments) for a in launch.arguments):
                raise UsageError(
                    f"launch of {launch.kernel} takes arguments {launch.arguments}, but the "
                    f"program has {len(self.arguments)}",
                    stage="load",
                )

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps({"format": FORMAT, **asdict(self)}, indent=1))

    @classmethod
    def load(cls, path: str | Path) -> GpuProgram:
        """Read a saved program; a missing, malformed or foreign file is a UsageError
        naming the file and what is wrong."""
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
            raise UsageError(f"{path}: cannot read a GPU program: {error}", stage="load") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise UsageError(f"{path}: not a {FORMAT} file", stage="load")
        try:
            return cls(
                chip=data["chip"],
                ptx=data["ptx"],
                launches=tuple(
                    KernelLaunch(
                        kernel=launch["kernel"],
                        grid=_triple(launch["grid"]),
                        block=_triple(launch["block"]),
                        shared_bytes=int(launch["shared_bytes"]),
                        arguments=tuple(int(a) for a in launch["arguments"]),
                    )
                    for launch in data["launches"]
                ),
                arguments=tuple(
                    ProgramArgument(**{**argument, "shape": tuple(argument["shape"])})
                    for argument in data["arguments"]
                ),
                workload=dict(data["workload"]),
                parameters=dict(data["parameters"]),
                flops=int(data["flops"]),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise UsageError(f"{path}: malformed GPU program: {error!r}", stage="load") from None


def _triple(values: list[int]) -> tuple[int, int, int]:
    x, y, z = (int(v) for v in values)
    return x, y, z
