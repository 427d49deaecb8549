"""Runtime interface: device instances, placement, allocation."""

import numpy as np
import pytest

from mlirtune.interfaces.workload import ArgSpec
from mlirtune.runtime import AcceleratorDevice, EmbeddedDevice, HostRuntime, Placement, Runtime
from mlirtune.workloads import Matmul


def test_devices_are_instances_with_an_index():
    first, second = HostRuntime(0), HostRuntime(1)
    assert first is not second
    assert (first.name, second.name) == ("host:0", "host:1")
    with pytest.raises(ValueError, match="index"):
        HostRuntime(-1)


def test_device_families_are_abstract():
    for family in (Runtime, AcceleratorDevice, EmbeddedDevice):
        with pytest.raises(TypeError):
            family(0)


def test_host_allocation_is_aligned_copy_with_placement():
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    buffer = HostRuntime().allocate("x", data, Placement.DEVICE)
    assert buffer.host.ctypes.data % 64 == 0
    np.testing.assert_array_equal(buffer.host, data)
    assert buffer.host is not data
    assert buffer.placement is Placement.DEVICE


@pytest.mark.jit
def test_allocate_places_arguments_and_poisons_outputs(engine):
    workload = Matmul(M=4, N=4, K=4)
    with workload.allocate(engine) as buffers:
        assert [b.name for b in buffers] == ["A", "B", "C"]
        assert all(b.placement is Placement.HOST for b in buffers)
        assert np.isnan(buffers[-1].host).all()  # an unwritten output cannot verify
        assert workload.get_input_arrays(engine) is buffers
    with pytest.raises(Exception, match="outside allocate"):
        workload.get_input_arrays(engine)


def test_argspec_carries_placement():
    from mlirtune.interfaces.dtype import DTYPES

    spec = ArgSpec("w", (2, 3), DTYPES["f32"], placement=Placement.DEVICE)
    assert spec.placement is Placement.DEVICE and spec.nbytes == 24
