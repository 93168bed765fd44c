"""Plugin devices: what their PLUGGABLE_DLPackDeviceExt declares, host copies of XPU memory
(synchronised with the producer's stream), zero-copy exchange of XPU tensors within
pluggable, and zero-copy host access to a test plugin whose device memory is host memory."""
from __future__ import annotations

import numpy as np
import pytest

import pluggable
from pluggable.abi.dlpack import (
    DLPACK_FLAG_BITMASK_IS_COPIED, DLPACK_FLAG_BITMASK_READ_ONLY, DLDeviceType,
    DLManagedTensorVersioned)
from pluggable.tensors.dlpack import _PyCapsule_GetPointer, live_exports
from pluggable.errors import DLPackError
from pluggable.devices.memory import DeviceMemory

DELAY_US = 20000


def managed(capsule) -> DLManagedTensorVersioned:
    return DLManagedTensorVersioned.from_address(
        _PyCapsule_GetPointer(capsule, b"dltensor_versioned"))


def slow_product(device: str, n: int = 1 << 16):
    """A tensor made by a kernel on the device's compute stream, and its expected values."""
    values = np.arange(n, dtype=np.float32)
    x = pluggable.tensor(values, device=device)
    return x * 3.0, values * 3.0


def test_xpu_declares_ext_dev_not_host_addressable(xpu_platform):
    assert xpu_platform.dlpack_device_type == DLDeviceType.kDLExtDev
    assert xpu_platform.dlpack_flags == 0
    assert pluggable.tensor([1.0], device="/xpu:1").__dlpack_device__() == (12, 1)


def test_numpy_gets_a_host_copy_after_the_producer(stream_delay):
    """np.from_dlpack(t, device="cpu") sends dl_device=(kDLCPU, 0): a host copy, taken after
    the (slowed) kernel that produced the tensor."""
    stream_delay(DELAY_US)
    y, expected = slow_product("/xpu:0")
    host = np.from_dlpack(y, device="cpu")
    np.testing.assert_array_equal(host, expected)
    np.testing.assert_array_equal(host, y.numpy())
    capsule = y.__dlpack__(max_version=(1, 0), dl_device=(1, 0))
    assert managed(capsule).flags & DLPACK_FLAG_BITMASK_IS_COPIED
    assert managed(capsule).dl_tensor.device.device_type == DLDeviceType.kDLCPU


def test_host_copy_refused_with_copy_false():
    y = pluggable.tensor([1.0, 2.0], device="/xpu:0")
    with pytest.raises(BufferError, match="not host-addressable.*copy=False"):
        np.from_dlpack(y, device="cpu", copy=False)
    with pytest.raises(DLPackError, match="copy=False"):
        y.__dlpack__(max_version=(1, 0), dl_device=(1, 0), copy=False)
    before = live_exports()
    with pytest.raises(RuntimeError, match="Unsupported device"):
        np.from_dlpack(y)  # NumPy cannot read kDLExtDev memory; its capsule is freed unused
    assert live_exports() == before


def test_stream_none_makes_the_host_wait(stream_delay):
    """After __dlpack__(stream=None) the memory is ready for a host read right away (a
    synchronous copy, which does not wait for any stream)."""
    stream_delay(DELAY_US)
    y, expected = slow_product("/xpu:0")
    capsule = y.__dlpack__(max_version=(1, 0))
    m = managed(capsule)
    assert m.flags & DLPACK_FLAG_BITMASK_READ_ONLY
    assert (m.dl_tensor.device.device_type, m.dl_tensor.device.device_id) == (12, 0)
    assert m.dl_tensor.data == y._buffer.address
    out = np.empty_like(expected)
    xpu = pluggable.get_device("XPU:0").executor
    xpu.sync_memcpy_dtoh(out, DeviceMemory.unchecked(xpu, m.dl_tensor.data, out.nbytes))
    np.testing.assert_array_equal(out, expected)
    del capsule


def test_stream_integer_makes_that_stream_wait(stream_delay):
    """A consumer stream given by its handle waits for the producer on the device: a copy it
    enqueues right after sees the kernel's result, and the host did not wait."""
    stream_delay(DELAY_US)
    device = pluggable.get_device("XPU:0")
    y, expected = slow_product("/xpu:0")
    consumer = device.device_to_host_stream
    capsule = y.__dlpack__(max_version=(1, 0), stream=consumer.handle)
    m = managed(capsule)
    out = np.empty_like(expected)
    device.executor.memcpy_dtoh(consumer, out, DeviceMemory.unchecked(
        device.executor, m.dl_tensor.data, out.nbytes), out.nbytes)
    device.synchronize_stream(consumer)
    np.testing.assert_array_equal(out, expected)
    with pytest.raises(DLPackError, match="stream=12345 is not a stream of /device:XPU:0"):
        y.__dlpack__(max_version=(1, 0), stream=12345)
    with pytest.raises(DLPackError, match="stream must be None"):
        pluggable.tensor([1.0]).__dlpack__(stream=5)


def test_xpu_round_trip_is_zero_copy(stream_delay):
    stream_delay(DELAY_US)
    y, expected = slow_product("/xpu:1")
    before = live_exports()
    again = pluggable.from_dlpack(y)  # our own capsule: the same buffer, no host wait needed
    assert again.device == "/device:XPU:1" and again._buffer is y._buffer
    assert live_exports() == before
    np.testing.assert_array_equal((again + 1.0).numpy(), expected + 1.0)
    legacy = pluggable.from_dlpack(pluggable.to_dlpack(y))
    assert legacy._buffer is y._buffer
    copied = pluggable.from_dlpack(y, copy=True)
    assert copied._buffer is not y._buffer and copied.device == "/device:XPU:1"
    np.testing.assert_array_equal(copied.numpy(), expected)
    to_cpu = pluggable.from_dlpack(y, device="cpu")
    assert to_cpu.device == "/device:CPU:0"
    np.testing.assert_array_equal(to_cpu.numpy(), expected)
    with pytest.raises(DLPackError, match="copy=False"):
        pluggable.from_dlpack(y, device="cpu", copy=False)
    other = pluggable.from_dlpack(y, device="/xpu:0")
    assert other.device == "/device:XPU:0"
    np.testing.assert_array_equal(other.numpy(), expected)


def test_export_to_another_device_is_refused():
    y = pluggable.tensor([1.0], device="/xpu:0")
    with pytest.raises(DLPackError, match=r"exported as \(12, 0\) or as a host copy"):
        y.__dlpack__(max_version=(1, 0), dl_device=(2, 0))
    with pytest.raises(DLPackError, match="CPU tensor can be exported to the CPU only"):
        pluggable.tensor([1.0]).__dlpack__(dl_device=(12, 0))


# -- a plugin whose device memory is host memory ---------------------------------------------
def test_host_addressable_plugin_memory_reaches_numpy_without_copy(plugin_device):
    device = plugin_device(DLDeviceType.kDLExtDev, host_addressable=True)
    values = np.arange(10, dtype=np.float64)
    t = pluggable.tensor(values, device=device)
    assert t.__dlpack_device__() == (12, 0)
    host = np.from_dlpack(t, device="cpu")
    assert host.ctypes.data == t._buffer.address  # the device memory itself
    np.testing.assert_array_equal(host, values)
    assert not host.flags.writeable
    capsule = t.__dlpack__(max_version=(1, 0), dl_device=(1, 0))
    assert not managed(capsule).flags & DLPACK_FLAG_BITMASK_IS_COPIED
    forced = t.__dlpack__(max_version=(1, 0), dl_device=(1, 0), copy=True)
    assert managed(forced).flags & DLPACK_FLAG_BITMASK_IS_COPIED
    assert managed(forced).dl_tensor.data != t._buffer.address


def test_cpu_declaring_plugin_is_a_cpu_device_to_dlpack(plugin_device, torch):
    device = plugin_device(DLDeviceType.kDLCPU)
    values = np.arange(6, dtype=np.int32).reshape(2, 3)
    t = pluggable.tensor(values, device=device)
    assert t.__dlpack_device__() == (1, 0)
    assert np.from_dlpack(t).ctypes.data == t._buffer.address
    assert torch.from_dlpack(t).data_ptr() == t._buffer.address


def test_plugin_device_import_is_zero_copy_and_frees_once(plugin_device, producer):
    device = plugin_device(DLDeviceType.kDLExtDev)
    values = np.arange(12, dtype=np.float32).reshape(3, 4)
    calls = producer.deleter_calls
    capsule = producer.capsule(values, device=(12, 0))
    data = producer.data(capsule)
    t = pluggable.from_dlpack(capsule, device=device)
    assert t.device == "/device:TEST:0" and t._buffer.address == data
    np.testing.assert_array_equal(t.numpy(), values)
    assert "used_dltensor_versioned" in repr(capsule)
    del capsule
    assert producer.deleter_calls == calls
    del t
    device.executor.event_manager.synchronize()
    assert producer.deleter_calls == calls + 1


def test_plugin_device_without_dlpack_declaration(plugin_device, build_test_plugin,
                                                  private_manager):
    private_manager.load_plugin(build_test_plugin(PLATFORM_NAME="PLAIN_DEV", DEVICE_TYPE="PLAIN"))
    device = private_manager.devices.get("PLAIN:0")
    t = pluggable.tensor([1.0, 2.0], device=device)
    with pytest.raises(DLPackError, match="declares no DLPack device"):
        t.__dlpack_device__()
    np.testing.assert_array_equal(np.from_dlpack(t, device="cpu"), [1.0, 2.0])
    np.testing.assert_array_equal(pluggable.from_dlpack(t, device="cpu").numpy(), [1.0, 2.0])
    with pytest.raises(DLPackError, match="declares no DLPack device"):
        pluggable.from_dlpack(t)


def test_torch_reads_host_copy_of_xpu_tensor(torch):
    y = pluggable.tensor(np.arange(4, dtype=np.float32), device="/xpu:0")
    with pytest.raises(Exception):
        torch.from_dlpack(y)  # kDLExtDev memory is nothing PyTorch knows
    np.testing.assert_array_equal(torch.from_dlpack(np.from_dlpack(y, device="cpu")).numpy(),
                                  [0, 1, 2, 3])


def test_strided_device_memory_is_compacted_once(plugin_device, producer):
    """A strided view of host-addressable device memory: gathered into compact device memory
    once (kernels need it compact), then the producer's memory is given back."""
    device = plugin_device(DLDeviceType.kDLExtDev)
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    expected = base[1:, ::-2]
    calls = producer.deleter_calls
    capsule = producer.capsule(base, device=(12, 0), shape=expected.shape, strides=(6, -2),
                               byte_offset=(6 + 5) * 4)
    t = pluggable.from_dlpack(capsule, device=device)
    assert t.device == "/device:TEST:0" and t.shape == (3, 3)
    np.testing.assert_array_equal(t.numpy(), expected)
    assert producer.deleter_calls == calls + 1  # copied: the producer's memory went back
    with pytest.raises(DLPackError, match="not compact.*copy=False forbids"):
        pluggable.from_dlpack(producer.capsule(base, device=(12, 0), shape=(3, 3),
                                               strides=(6, -2), byte_offset=44),
                              device=device, copy=False)


def test_strided_xpu_memory_cannot_be_gathered(producer):
    capsule = producer.capsule(np.arange(8, dtype=np.float32), device=(12, 0), shape=(4,),
                               strides=(2,))
    with pytest.raises(DLPackError, match="not host-addressable, so the host cannot gather"):
        pluggable.from_dlpack(capsule)


def test_unknown_declared_device_type(build_test_plugin, private_manager):
    private_manager.load_plugin(build_test_plugin(PLATFORM_NAME="FUTURE_DEV",
                                                  DEVICE_TYPE="FUTURE", DLPACK_DEVICE_TYPE=99))
    t = pluggable.tensor([1.0], device=private_manager.devices.get("FUTURE:0"))
    assert t.__dlpack_device__() == (99, 0)
    with pytest.raises(DLPackError, match="declares unknown DLPack device type 99"):
        t.__dlpack__(max_version=(1, 0))
    np.testing.assert_array_equal(np.from_dlpack(t, device="cpu"), [1.0])


def test_short_dlpack_extension_is_rejected(build_test_plugin, private_manager):
    """PLUGGABLE_DLPackDeviceExt follows the struct_size rules: shorter than its first
    version, the plugin does not load, and the message says why."""
    path = build_test_plugin(PLATFORM_NAME="SHORT_DEV", DEVICE_TYPE="SHORT",
                             DLPACK_DEVICE_TYPE=12, DLPACK_EXT_SIZE=28)
    with pytest.raises(pluggable.PluginLoadError,
                       match="PLUGGABLE_DLPackDeviceExt.struct_size to 28, smaller than the "
                             "first published version of PLUGGABLE_DLPackDeviceExt .40 bytes"):
        private_manager.load_plugin(path)
