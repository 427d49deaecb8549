"""The Target interface: what a compilation target is, as facts.

A target names its descriptor folders, its identity for keying tuning results, the hardware
class tuned results carry over within, the LLVM features code for it must keep to, and its
shipped spec libraries. It holds no per-schedule formulas: each schedule family
(mlirtune.interfaces.schedule) reads the facts it needs from the concrete target (e.g.
HostCPU's vector width, registers and caches) and chooses its own parameters. Callers
hold a Target and never branch on which one it is.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

# The hardware class of a target that cannot tell which one it is.
UNKNOWN_CLASS = "unknown"


class Target(ABC):
    """A compilation target; `name` is also its kind, which schedule families key on."""

    name: ClassVar[str] = "abstract"

    @abstractmethod
    def descriptor_search_path(self) -> list[str]:
        """Packaged descriptor folders to search, most specific first, e.g.
        ["x86_64/avx512", "x86_64", "generic"]."""

    @abstractmethod
    def fingerprint(self) -> dict[str, Any]:
        """Identity of the hardware, for keying tuning results (model, ISA flags, ...):
        JSON values only."""

    def llvm_target_features(self) -> list[str]:
        """LLVM target features (e.g. "-avx512f") the JIT must compile with on this host so
        that code stays within this target's ISA; empty when the host's own are right."""
        return []

    def pipeline_values(self) -> dict[str, int | str]:
        """Descriptor slots the target fills itself (e.g. an NVIDIA chip name for
        `nvvm-attach-target`), with source "target"; a run cannot override them."""
        return {}

    def accepts(self, slot: str, value: int | str) -> bool:
        """Whether a config may set `slot`, one of `pipeline_values`, to `value`: by
        default only to the target's own value (a tuned config restates every slot)."""
        return self.pipeline_values().get(slot) == value

    def hardware_class(self) -> str:
        """A short stable name of the hardware class tuned configs carry over within (the
        same core design and cache hierarchy, e.g. "amd-zen4"); UNKNOWN_CLASS when the
        target cannot tell. Spec entries record it; entries of another class are not
        applied (see mlirtune.specs.specset)."""
        return UNKNOWN_CLASS

    def spec_library_name(self) -> str | None:
        """The stem of the spec libraries shipped for this target's ISA, if any: one per
        hardware class they were tuned on, `<stem>-<class>.mlir` (e.g. x86_64-avx512)."""
        return None
