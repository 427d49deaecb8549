"""NVIDIA GPUs through the CUDA driver API (cuda-bindings), with no MLIR in the process.

`CudaDevice` is an AcceleratorDevice: one object per GPU, told apart by its index. Every
buffer has a page-locked host mirror and a device allocation; its placement says whether
the timed call copies it (an input placed on the host is uploaded in every call, an output
placed on the host downloaded) or finds it on the device already. `load` turns a
GpuProgram's PTX into a module; its timer launches a CUDA graph of back-to-back calls
between two CUDA events, so no Python runs between the launches of a sample.

Where no driver or GPU exists, `cuda_devices()` is empty and asking for a device is an
error that says why.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Mapping
from types import ModuleType

import numpy as np

from mlirtune.bench.harness import NativeTimer
from mlirtune.interfaces.errors import MlirtuneError, UsageError
from mlirtune.interfaces.gpu_program import STATIC_SHARED_BYTES, GpuProgram, KernelLaunch
from mlirtune.interfaces.runtime import AcceleratorDevice, Buffer, Placement

STAGE = "cuda"
# A graph captures its buffers' addresses and placements: (device, pinned host, placement).
_BufferKey = tuple[tuple[int, int, Placement], ...]


class CudaError(MlirtuneError):
    """A driver call failed: names the call and the driver's error."""


@functools.cache
def _driver_and_reason() -> tuple[ModuleType | None, str | None]:
    """The initialised driver module, or None and why there is none."""
    try:
        from cuda.bindings import driver
    except ImportError as error:
        return None, f"cuda-bindings is not installed ({error}); install mlirtune[gpu]"
    try:
        (status,) = driver.cuInit(0)
    except RuntimeError as error:  # the driver library itself is missing
        return None, f"no NVIDIA driver: {error}"
    if status != driver.CUresult.CUDA_SUCCESS:
        return None, f"cuInit failed: {status.name}"
    return driver, None


def cuda_unavailable() -> str | None:
    """Why no CUDA device can be used here, or None when the driver initialised."""
    return _driver_and_reason()[1]


def device_count() -> int:
    """GPUs the driver sees; 0 where there is no driver."""
    return _call("cuDeviceGetCount") if cuda_unavailable() is None else 0


def cuda_devices() -> list[CudaDevice]:
    """Every GPU the driver sees, by index; empty without a driver or GPU."""
    return [CudaDevice(index) for index in range(device_count())]


def _call(name: str, *arguments: object) -> object:
    """Call driver function `name`; its result without the status, which must be success."""
    driver, reason = _driver_and_reason()
    if driver is None:
        raise UsageError(f"no CUDA device: {reason}", stage=STAGE)
    status, *results = getattr(driver, name)(*arguments)
    if status != driver.CUresult.CUDA_SUCCESS:
        raise CudaError(f"{name} failed: {status.name}", stage=STAGE)
    return results[0] if len(results) == 1 else tuple(results) or None


def _attribute(device: object, name: str) -> int:
    driver = _driver_and_reason()[0]
    return int(_call("cuDeviceGetAttribute", getattr(driver.CUdevice_attribute, name), device))


class CudaDevice(AcceleratorDevice):
    """GPU `index`, with its primary context made current. `placements` override the
    workload's declared placement per argument name (e.g. {"B": Placement.DEVICE} for
    weights uploaded ahead of time)."""

    kind = "cuda"

    def __init__(self, index: int = 0, placements: Mapping[str, Placement] | None = None):
        super().__init__(index)
        count = device_count()
        if index >= count:
            reason = cuda_unavailable() or f"this host has {count} GPU(s)"
            raise UsageError(f"no CUDA device {index}: {reason}", stage=STAGE)
        self._device = _call("cuDeviceGet", index)
        self._context = _call("cuDevicePrimaryCtxRetain", self._device)
        self.activate()
        self.model = _call("cuDeviceGetName", 256, self._device).split(b"\0")[0].decode()
        self.compute_capability = (
            _attribute(self._device, "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR"),
            _attribute(self._device, "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR"),
        )
        self.sms = _attribute(self._device, "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT")
        self.shared_bytes_per_block = _attribute(
            self._device, "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"
        )
        self.memory_bytes = int(_call("cuDeviceTotalMem", self._device))
        self.placements = dict(placements or {})

    def __repr__(self) -> str:
        return f"<CudaDevice {self.index}: {self.model}, {self.chip}, {self.sms} SMs>"

    @property
    def chip(self) -> str:
        """The compute capability as an NVPTX chip name (sm_90 for an H100 or H200)."""
        major, minor = self.compute_capability
        return f"sm_{major}{minor}"

    def fingerprint(self) -> dict[str, str | int]:
        """What tuning records are keyed on: the part, its chip and the driver."""
        return {"gpu": self.model, "chip": self.chip, "driver": int(_call("cuDriverGetVersion"))}

    def activate(self) -> None:
        _call("cuCtxSetCurrent", self._context)

    # --- buffers ------------------------------------------------------------------------

    def allocate(self, name: str, initial: np.ndarray, placement: Placement) -> Buffer:
        placement = self.placements.get(name, placement)
        nbytes = max(initial.nbytes, 1)
        pinned = int(_call("cuMemAllocHost", nbytes))
        raw = (ctypes.c_byte * nbytes).from_address(pinned)
        host = np.frombuffer(raw, np.uint8, initial.nbytes).view(initial.dtype)
        host = host.reshape(initial.shape)
        host[...] = initial
        device = _call("cuMemAlloc", nbytes)
        buffer = Buffer(name, host, placement, self, handle=(device, pinned))
        self.copy_to_device(buffer)
        return buffer

    def release(self, buffer: Buffer) -> None:
        device, pinned = buffer.handle
        buffer.host = np.empty(0, dtype=buffer.host.dtype)
        _call("cuMemFree", device)
        _call("cuMemFreeHost", pinned)

    def copy_to_device(self, buffer: Buffer) -> None:
        _call("cuMemcpyHtoD", buffer.handle[0], buffer.handle[1], buffer.host.nbytes)

    def copy_to_host(self, buffer: Buffer) -> None:
        _call("cuMemcpyDtoH", buffer.handle[1], buffer.handle[0], buffer.host.nbytes)

    def to_host(self, buffer: Buffer) -> np.ndarray:
        self.copy_to_host(buffer)
        return buffer.host

    def synchronize(self) -> None:
        _call("cuCtxSynchronize")

    # --- programs -----------------------------------------------------------------------

    def load(self, program: GpuProgram) -> LoadedProgram:
        """The program's module loaded (the driver compiles its PTX for this GPU)."""
        return LoadedProgram(self, program)


def _allow_shared_memory(device: CudaDevice, function: object, launch: KernelLaunch) -> None:
    """Opt the kernel in to the dynamic shared memory its launch asks for, where that is
    past the static 48 KiB; refuse more than the device has."""
    if launch.shared_bytes <= STATIC_SHARED_BYTES:
        return
    if launch.shared_bytes > device.shared_bytes_per_block:
        raise UsageError(
            f"kernel {launch.kernel} needs {launch.shared_bytes} bytes of shared memory; "
            f"{device.model} ({device.chip}) gives a block at most "
            f"{device.shared_bytes_per_block}",
            stage=STAGE,
        )
    driver = _driver_and_reason()[0]
    limit = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    _call("cuFuncSetAttribute", function, limit, launch.shared_bytes)


class LoadedProgram:
    """A GpuProgram's kernels on one device, with a stream and two events for timing.
    Use as a context manager, or `close()` it: that unloads the module."""

    def __init__(self, device: CudaDevice, program: GpuProgram) -> None:
        self.device, self.program = device, program
        device.activate()
        self._module = _call("cuModuleLoadData", program.ptx.encode() + b"\0")
        try:
            self._functions = [
                _call("cuModuleGetFunction", self._module, launch.kernel.encode())
                for launch in program.launches
            ]
            for function, launch in zip(self._functions, program.launches, strict=True):
                _allow_shared_memory(device, function, launch)
        except (CudaError, UsageError):
            _call("cuModuleUnload", self._module)
            raise
        self._stream = _call("cuStreamCreate", 0)
        self._events = (_call("cuEventCreate", 0), _call("cuEventCreate", 0))
        self._graphs: dict[tuple[_BufferKey, int], object] = {}

    def __enter__(self) -> LoadedProgram:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        for graph in self._graphs.values():
            _call("cuGraphExecDestroy", graph)
        self._graphs.clear()
        for event in self._events:
            _call("cuEventDestroy", event)
        _call("cuStreamDestroy", self._stream)
        _call("cuModuleUnload", self._module)

    def launch(self, buffers: list[Buffer]) -> None:
        """One call on the device-side buffers (no copies), then wait for it."""
        self._enqueue_kernels(_Parameters(self.program.launches, buffers))
        _call("cuStreamSynchronize", self._stream)

    def timer(self, buffers: list[Buffer]) -> NativeTimer:
        """(iterations, samples) -> nanoseconds per sample, read off CUDA events around a
        graph of `iterations` calls; a call copies the host-placed arguments as well."""
        parameters = _Parameters(self.program.launches, buffers)
        key = tuple((int(b.handle[0]), b.handle[1], b.placement) for b in buffers)
        start, end = self._events

        def time(iterations: int, samples: int) -> np.ndarray:
            graph = self._graph(key, parameters, iterations)
            nanoseconds = np.empty(samples, dtype=np.int64)
            for sample in range(samples):
                _call("cuEventRecord", start, self._stream)
                _call("cuGraphLaunch", graph, self._stream)
                _call("cuEventRecord", end, self._stream)
                _call("cuEventSynchronize", end)
                nanoseconds[sample] = round(_call("cuEventElapsedTime", start, end) * 1e6)
            return nanoseconds

        return time

    def _graph(self, key: _BufferKey, parameters: _Parameters, iterations: int) -> object:
        """The executable graph of `iterations` calls, captured once per buffers and count."""
        if (key, iterations) not in self._graphs:
            driver = _driver_and_reason()[0]
            mode = driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
            _call("cuStreamBeginCapture", self._stream, mode)
            try:
                for _ in range(iterations):
                    self._enqueue_call(parameters)
            finally:
                graph = _call("cuStreamEndCapture", self._stream)
            self._graphs[key, iterations] = _call("cuGraphInstantiate", graph, 0)
            _call("cuGraphDestroy", graph)
        return self._graphs[key, iterations]

    def _enqueue_call(self, parameters: _Parameters) -> None:
        """Upload the host-placed inputs, run the kernels, download host-placed outputs."""
        outputs = {i for i, a in enumerate(self.program.arguments) if a.is_output}
        for i, buffer in enumerate(parameters.buffers):
            if buffer.placement == Placement.HOST and i not in outputs:
                device, pinned = buffer.handle
                _call("cuMemcpyHtoDAsync", device, pinned, buffer.host.nbytes, self._stream)
        self._enqueue_kernels(parameters)
        for i in sorted(outputs):
            buffer = parameters.buffers[i]
            if buffer.placement == Placement.HOST:
                device, pinned = buffer.handle
                _call("cuMemcpyDtoHAsync", pinned, device, buffer.host.nbytes, self._stream)

    def _enqueue_kernels(self, parameters: _Parameters) -> None:
        for function, launch, packed in zip(
            self._functions, self.program.launches, parameters.packed, strict=True
        ):
            _call(
                "cuLaunchKernel",
                function,
                *launch.grid,
                *launch.block,
                launch.shared_bytes,
                self._stream,
                ctypes.addressof(packed),
                0,
            )


class _Parameters:
    """Each launch's kernel parameters as the driver takes them: an array of pointers to
    the values, here the device addresses of the launch's buffers (kernels take bare
    pointers). The ctypes arrays live as long as this object."""

    def __init__(self, launches: tuple[KernelLaunch, ...], buffers: list[Buffer]) -> None:
        self.buffers = buffers
        self._values = []
        self.packed = []
        for launch in launches:
            values = (ctypes.c_void_p * len(launch.arguments))(
                *(int(buffers[a].handle[0]) for a in launch.arguments)
            )
            size = ctypes.sizeof(ctypes.c_void_p)
            pointers = (ctypes.c_void_p * len(values))(
                *(ctypes.addressof(values) + i * size for i in range(len(values)))
            )
            self._values.append(values)
            self.packed.append(pointers)
