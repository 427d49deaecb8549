"""Compilation targets: the host CPU (with feature detection) and NVIDIA GPUs."""

from __future__ import annotations

from collections.abc import Callable

from mlirtune.targets.base import Target
from mlirtune.targets.host_cpu import CpuFeatures, HostCPU, detect_features


def _nvidia_gpu() -> Target:
    # Imported on use: the GPU target pulls in the pipeline driver, which imports this package.
    from mlirtune.targets.nvidia_gpu import NvidiaGPU

    return NvidiaGPU()


# Target names (as the CLI's --target takes them) and how to make each with its defaults.
TARGETS: dict[str, Callable[[], Target]] = {HostCPU.name: HostCPU, "nvidia-gpu": _nvidia_gpu}

__all__ = ["TARGETS", "CpuFeatures", "HostCPU", "Target", "detect_features"]
