"""Runtimes own memory and placement: HostRuntime here, CudaDevice (mlirtune.runtime.cuda) for
NVIDIA GPUs; embedded devices later."""

from mlirtune.interfaces.runtime import (
    AcceleratorDevice,
    Buffer,
    EmbeddedDevice,
    Placement,
    Runtime,
)
from mlirtune.runtime.host import HostRuntime

__all__ = [
    "AcceleratorDevice",
    "Buffer",
    "EmbeddedDevice",
    "HostRuntime",
    "Placement",
    "Runtime",
]
