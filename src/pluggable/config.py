"""The front end, modelled on ``tf.config``: physical devices, their details, the plugins
found, and which plugin serves a device type."""
from __future__ import annotations

import dataclasses
import os
from typing import Any, Dict, List, Optional, Union

from .device import parse_device_name
from .errors import InvalidArgumentError, NotFoundError
from .loader import PluginRecord, manager

__all__ = ["PhysicalDevice", "list_physical_devices", "get_device_details", "list_plugins",
           "set_subdevice_mapping"]


@dataclasses.dataclass(frozen=True)
class PhysicalDevice:
    """A device the host can see, as ``tf.config.PhysicalDevice`` describes it."""

    name: str
    device_type: str
    subdevice_type: str


def _manager():
    m = manager()
    m.ensure_discovered()
    return m


def list_physical_devices(device_type: Optional[str] = None) -> List[PhysicalDevice]:
    """The host's CPU and every device of the enabled plugin of each device type.

    ``device_type`` ("CPU", "XPU", ...; any case) keeps only that type.
    """
    wanted = device_type.upper() if device_type else None
    devices = [PhysicalDevice("/physical_device:CPU:0", "CPU", "CPU")]
    for platform in _manager().devices.enabled_platforms():
        for ordinal in range(platform.device_count):
            devices.append(PhysicalDevice(
                f"/physical_device:{platform.device_type}:{ordinal}", platform.device_type,
                platform.name))
    return [d for d in devices if wanted is None or d.device_type == wanted]


def _cpu_details() -> Dict[str, Any]:
    details: Dict[str, Any] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    details["device_name"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        details["memory_total"] = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        pass
    return details


def get_device_details(device: Union[PhysicalDevice, str]) -> Dict[str, Any]:
    """What the plugin says about ``device``: ``device_name``, ``vendor``, ``pci_bus_id``,
    ``numa_node``, ``memory_bandwidth`` (bytes/s), ``gflops``, ``memory_total`` (bytes).
    Keys the plugin gives nothing for are absent."""
    name = device.name if isinstance(device, PhysicalDevice) else device
    device_type, index = parse_device_name(name)
    if device_type == "CPU":
        if index != 0:
            raise NotFoundError(f"there is one CPU device, CPU:0, not {name!r}",
                                call="get_device_details")
        return _cpu_details()
    platform = _manager().devices.enabled_platform(device_type)
    if platform is None:
        raise NotFoundError(f"no plugin provides device type {device_type} ({name!r})",
                            call="get_device_details")
    return platform.executor(index).details()


def list_plugins() -> List[PluginRecord]:
    """One record per plugin file found or loaded: path, status ("loaded", "disabled",
    "skipped"), reason, device type, platform name, API version, priority, and whether it
    provides kernels and a profiler."""
    return [dataclasses.replace(r) for r in _manager().records]


def set_subdevice_mapping(device_type: str, subdevice_type: str) -> None:
    """Makes the plugin whose platform is ``subdevice_type`` serve ``device_type``.

    Only before any device of that type is created; afterwards raises `RuntimeError`."""
    if not isinstance(device_type, str) or not isinstance(subdevice_type, str):
        raise InvalidArgumentError("device_type and subdevice_type must be strings",
                                   call="set_subdevice_mapping")
    _manager().devices.set_subdevice_mapping(device_type.upper(), subdevice_type)
