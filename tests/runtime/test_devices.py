"""PluggableDevice and the tf.config-like front end on the installed XPU plugin."""
from __future__ import annotations

import pytest

import pluggable
from pluggable import config
from pluggable.errors import NotFoundError


def test_list_physical_devices():
    devices = config.list_physical_devices()
    assert devices[0] == config.PhysicalDevice("/physical_device:CPU:0", "CPU", "CPU")
    xpus = config.list_physical_devices("xpu")
    assert [(d.name, d.device_type, d.subdevice_type) for d in xpus] == [
        ("/physical_device:XPU:0", "XPU", "REF_XPU"), ("/physical_device:XPU:1", "XPU", "REF_XPU")]
    assert config.list_physical_devices("GPU") == []


def test_device_details():
    details = config.get_device_details(config.list_physical_devices("XPU")[1])
    assert details["device_name"] == "XPU reference device"
    assert details["pci_bus_id"].endswith(":00.0")
    assert details["memory_total"] == 1 << 30
    assert details["memory_bandwidth"] > 0 and details["gflops"] > 0
    assert details["numa_node"] >= 0
    assert set(details) <= {"device_name", "vendor", "pci_bus_id", "numa_node",
                            "memory_bandwidth", "gflops", "memory_total"}
    assert config.get_device_details("/xpu:0")["pci_bus_id"] != details["pci_bus_id"]
    with pytest.raises(NotFoundError):
        config.get_device_details("/physical_device:XPU:5")
    with pytest.raises(NotFoundError):
        config.get_device_details("/physical_device:CPU:1")


def test_list_plugins_record():
    (record,) = [r for r in config.list_plugins() if r.platform_name == "REF_XPU"]
    assert (record.status, record.device_type, record.api_version, record.device_count) == \
        ("loaded", "XPU", "0.0.1", 2)
    assert record.priority == 0 and record.reason == ""


def test_pluggable_device_owns_four_streams():
    device = pluggable.get_device("/device:XPU:1")
    assert pluggable.get_device("xpu:1") is device
    assert device.name == "/device:XPU:1" and device.subdevice_type == "REF_XPU"
    assert len({id(s) for s in device.streams}) == 4
    assert device.executor is pluggable.get_platform("REF_XPU").executor(1)
    with device.executor.allocate(8) as memory:
        device.executor.memcpy_htod(device.host_to_device_stream, memory, b"12345678")
        device.host_to_device_stream.synchronize()
        out = bytearray(8)
        device.executor.memcpy_dtoh(device.device_to_host_stream, out, memory)
        device.synchronize()
    assert out == b"12345678"


def test_closed_device_is_replaced_on_next_use():
    device = pluggable.get_device("XPU:0")
    streams = device.executor.live_handles()["streams"]
    device.close()
    device.close()
    assert device.is_closed
    assert device.executor.live_handles()["streams"] == streams - 4
    again = pluggable.get_device("XPU:0")
    assert again is not device and not again.is_closed


def test_subdevice_mapping_after_devices_exist_raises():
    pluggable.get_device("XPU:0")
    # Mapping to the platform already serving the type is accepted.
    config.set_subdevice_mapping("XPU", "REF_XPU")
    with pytest.raises(NotFoundError, match="available: REF_XPU"):
        config.set_subdevice_mapping("XPU", "OTHER_XPU")
