"""The common runtime interface and the two device families that plug into it.

A runtime is an *instance*: two GPUs of one class are two objects told apart by `index`.
Every tensor argument declares a `Placement`, i.e. where it lives when timing starts.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np


class Placement(StrEnum):
    """Where an argument lives when the timer starts."""

    HOST = "host"
    DEVICE = "device"


@dataclass
class Buffer:
    """One allocated argument. `host` is the host-side array; `handle` is runtime-specific."""

    name: str
    host: np.ndarray
    placement: Placement
    runtime: Runtime
    handle: object = field(default=None, repr=False)


class Runtime(ABC):
    """What every runtime provides: allocation, transfers, synchronisation, required libraries."""

    kind: str = "abstract"

    def __init__(self, index: int = 0) -> None:
        if index < 0:
            raise ValueError(f"device index must be >= 0, got {index}")
        self.index = index

    @property
    def name(self) -> str:
        return f"{self.kind}:{self.index}"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"

    @abstractmethod
    def allocate(self, name: str, initial: np.ndarray, placement: Placement) -> Buffer:
        """Allocate a buffer holding a copy of `initial`, placed as requested."""

    @abstractmethod
    def release(self, buffer: Buffer) -> None:
        """Free what `allocate` obtained."""

    @abstractmethod
    def to_host(self, buffer: Buffer) -> np.ndarray:
        """The buffer's current contents as a host array (copies back from a device)."""

    def synchronize(self) -> None:  # noqa: B027 - a no-op is the right default
        """Wait for outstanding work; the host has none."""

    def requirements(self) -> list[str]:
        """Shared libraries this runtime needs loaded into the execution engine."""
        return []


class AcceleratorDevice(Runtime, ABC):
    """A device with its own memory driven by the host (e.g. a GPU)."""

    kind = "accelerator"

    @abstractmethod
    def copy_to_device(self, buffer: Buffer) -> None:
        """Upload `buffer.host` into device memory."""

    @abstractmethod
    def copy_to_host(self, buffer: Buffer) -> None:
        """Download device memory into `buffer.host`."""


class EmbeddedDevice(Runtime, ABC):
    """A separate processor that runs a whole program image (e.g. a DSP or simulator)."""

    kind = "embedded"

    @abstractmethod
    def load_image(self, image_path: str) -> None:
        """Load the compiled program image onto the device."""
