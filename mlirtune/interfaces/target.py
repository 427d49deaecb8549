"""The Target interface: what a compilation target is, as facts.

A target names its descriptor folders, its identity for keying tuning results, the LLVM
features code for it must keep to, and its shipped spec library. It holds no per-schedule
formulas: each schedule family (mlirtune.interfaces.schedule) reads the facts it needs
from the concrete target (e.g. HostCPU's vector width, registers and caches) and chooses
its own parameters. Callers hold a Target and never branch on which one it is.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar


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

    def spec_library_name(self) -> str | None:
        """The name of the default spec library shipped for this target, if any."""
        return None
