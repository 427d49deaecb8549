"""Compilation targets as facts: the host CPU (with feature detection) and NVIDIA GPUs."""

from __future__ import annotations

from collections.abc import Callable

from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.target import Target
from mlirtune.targets.host_cpu import CpuFeatures, HostCPU, detect_features
from mlirtune.targets.nvidia_gpu import NvidiaGPU

# Target names (as the CLI's --target takes them) and how to make each with its defaults.
TARGETS: dict[str, Callable[[], Target]] = {HostCPU.name: HostCPU, NvidiaGPU.name: NvidiaGPU}


def target_named(name: str) -> Target:
    """A new target of kind `name` with its defaults (the host's are detected)."""
    try:
        return TARGETS[name]()
    except KeyError:
        raise UsageError(
            f"unknown target {name!r}; known: {', '.join(TARGETS)}", stage="target"
        ) from None


__all__ = ["TARGETS", "CpuFeatures", "HostCPU", "NvidiaGPU", "detect_features", "target_named"]
