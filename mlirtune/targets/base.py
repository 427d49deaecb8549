"""The Target interface: each target owns its descriptor lookup, parameter selector and pipeline.

Callers (CLI, engine, tuner) hold a Target and never branch on which one it is.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mlirtune.ir.roots import OpInfo

if TYPE_CHECKING:
    from mlirtune.engine.base import Engine
    from mlirtune.pipeline.descriptor import Descriptor

Observer = Callable[[str, Any], None]


class Target(ABC):
    """A compilation target."""

    name: str = "abstract"

    @abstractmethod
    def descriptor_search_path(self) -> list[str]:
        """Packaged descriptor folders to search, most specific first, e.g.
        ["x86_64/avx512", "x86_64", "generic"]."""

    @abstractmethod
    def select_parameters(self, schedule: str, op: OpInfo) -> dict[str, int]:
        """Analytic choice of the parameters of `schedule` for the root op `op`."""

    @abstractmethod
    def fingerprint(self) -> dict[str, Any]:
        """Identity of the hardware, for keying tuning results (model, ISA flags, ...)."""

    def engine(self, pipeline: str | Path | Descriptor | None = None, **options: Any) -> Engine:
        """An engine that lowers with this target's pipelines and runs on the host (JIT);
        `options` go to MlirJitEngine (e.g. specs=..., use_specs=False)."""
        from mlirtune.engine.mlir_jit import MlirJitEngine

        return MlirJitEngine(target=self, pipeline=pipeline, **options)

    def llvm_target_features(self) -> list[str]:
        """LLVM target features (e.g. "-avx512f") the JIT must compile with on this host so
        that code stays within this target's ISA; empty when the host's own are right."""
        return []

    def spec_library_name(self) -> str | None:
        """The name of the default spec library shipped for this target, if any."""
        return None

    def lower(
        self,
        workload: Any,
        parameters: dict[str, int] | None = None,
        *,
        pipeline: str | Path | Descriptor | None = None,
        observer: Observer | None = None,
        print_after_all: bool = False,
        **engine_options: Any,
    ) -> None:
        """Lower `workload` for inspection (`mlirtune opt`), reporting stages to `observer`."""
        self.engine(pipeline, **engine_options).lower_payload(
            workload, parameters, observer=observer, print_after_all=print_after_all
        )
