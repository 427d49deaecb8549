"""What a tuning record is keyed on: workload, target fingerprint, toolchain and pipeline.

Two records are comparable only when their keys match, so a result measured on another CPU
or with another MLIR build is kept but never taken as current.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mlirtune.toolchain import digest


@dataclass(frozen=True)
class TuningKey:
    """Everything except the params that identifies a tuning record.

    workload: {"name", "kind", "shapes", "dtypes", "payload_hash", "options"}
    target: the target's fingerprint (CPU model, ISA flags, caches)
    toolchain: MLIR/LLVM wheel versions plus mlirtune's own version
    pipeline: the descriptor's name; pipeline_hash covers its stages and schedule
    """

    workload: dict[str, Any]
    target: dict[str, Any]
    toolchain: dict[str, str]
    pipeline: str
    pipeline_hash: str

    @property
    def workload_hash(self) -> str:
        return digest(self.workload)

    @property
    def target_hash(self) -> str:
        return digest(self.target)

    @property
    def toolchain_hash(self) -> str:
        return digest(self.toolchain)
