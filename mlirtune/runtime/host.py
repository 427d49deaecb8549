"""The host runtime: buffers are numpy arrays in host memory, so placement is trivially honoured."""

from __future__ import annotations

import numpy as np

from mlirtune.interfaces.runtime import Buffer, Placement, Runtime


class HostRuntime(Runtime):
    """Runs kernels on the host CPU in-process."""

    kind = "host"

    def allocate(self, name: str, initial: np.ndarray, placement: Placement) -> Buffer:
        # 64-byte alignment keeps vector loads aligned regardless of numpy's allocator.
        raw = np.empty(initial.nbytes + 64, dtype=np.uint8)
        offset = (-raw.ctypes.data) % 64
        array = raw[offset : offset + initial.nbytes].view(initial.dtype).reshape(initial.shape)
        array[...] = initial
        return Buffer(name=name, host=array, placement=placement, runtime=self)

    def release(self, buffer: Buffer) -> None:
        buffer.host = np.empty(0, dtype=buffer.host.dtype)

    def to_host(self, buffer: Buffer) -> np.ndarray:
        return buffer.host
