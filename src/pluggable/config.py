"""The front end, modelled on ``tf.config``: physical devices, their details, the plugins
found, and which plugin serves a device type."""
from __future__ import annotations

import operator
import os

from .base.record import record
from .devices.device import parse_device_name
from .base.errors import InvalidArgumentError, NotFoundError
from .loader.plugin_manager import PluginRecord, manager

TYPE_CHECKING = False  # typing's constant, without importing typing at start-up
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional, Union

__all__ = ["PhysicalDevice", "list_physical_devices", "get_device_details", "list_plugins",
           "set_subdevice_mapping", "set_memory_growth", "get_memory_growth",
           "set_memory_limit", "get_memory_limit", "get_memory_info", "reset_memory_stats",
           "set_soft_device_placement", "get_soft_device_placement",
           "set_log_device_placement", "get_log_device_placement", "set_sync_every_op",
           "get_sync_every_op", "KernelInfo",
           "list_kernels"]
__all__ += ["LogicalDevice", "list_logical_devices", "set_visible_devices",
            "get_visible_devices", "kernel_coverage", "experimental"]


@record(frozen=True)
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
    import copy

    return [copy.copy(r) for r in _manager().records]


def set_subdevice_mapping(device_type: str, subdevice_type: str) -> None:
    """Makes the plugin whose platform is ``subdevice_type`` serve ``device_type``.

    Only before any device of that type is created; afterwards raises `RuntimeError`."""
    if not isinstance(device_type, str) or not isinstance(subdevice_type, str):
        raise InvalidArgumentError("device_type and subdevice_type must be strings",
                                   call="set_subdevice_mapping")
    _manager().devices.set_subdevice_mapping(device_type.upper(), subdevice_type)


def _executor(device: Union[PhysicalDevice, str]):
    name = device.name if isinstance(device, PhysicalDevice) else device
    device_type, index = parse_device_name(name)
    if device_type != "CPU":
        _manager().devices.check_visible(device_type, index, name)
    if device_type == "CPU":
        raise InvalidArgumentError(
            f"{name!r} is the host CPU, whose memory pluggable does not pool; pass a plugin "
            f"device such as '/physical_device:XPU:0'", call="memory configuration")
    platform = _manager().devices.enabled_platform(device_type)
    if platform is None:
        raise NotFoundError(f"no plugin provides device type {device_type} ({name!r})",
                            call="memory configuration")
    return platform.executor(index)


def _set_allocator_option(device, option: str, value, what: str) -> None:
    executor = _executor(device)
    if executor.allocator_created:
        raise RuntimeError(
            f"{what} of {executor.name} cannot change: its memory is already in use (the "
            f"allocator was created on first use). Configure devices right after import, "
            f"before creating tensors on them")
    executor.allocator_options[option] = value


def set_memory_growth(device: Union[PhysicalDevice, str], enable: bool) -> None:
    """With growth, the device's allocator starts small and doubles its reserve as needed;
    without, it reserves its whole limit at first use. Before first use only."""
    _set_allocator_option(device, "allow_growth", bool(enable), "memory growth")


def get_memory_growth(device: Union[PhysicalDevice, str]) -> bool:
    executor = _executor(device)
    if executor.allocator_created:
        return executor.allocator.allow_growth
    return executor.allocator_options.get("allow_growth",
                                          executor.platform.force_memory_growth)


def set_memory_limit(device: Union[PhysicalDevice, str], limit_bytes: int) -> None:
    """Caps the device memory pluggable's allocator may reserve. Before first use only."""
    try:
        limit = operator.index(limit_bytes)
    except TypeError:
        raise TypeError(f"the memory limit must be an integer number of bytes, not "
                        f"{type(limit_bytes).__name__}") from None
    if limit <= 0:
        raise InvalidArgumentError(f"the memory limit must be positive, got {limit}",
                                   call="set_memory_limit")
    _set_allocator_option(device, "memory_limit", limit, "the memory limit")


def get_memory_limit(device: Union[PhysicalDevice, str]) -> int:
    return _executor(device).allocator.memory_limit


def get_memory_info(device: Union[PhysicalDevice, str]) -> Dict[str, int]:
    """``{'current': bytes in use, 'peak': peak bytes in use}`` of the device's allocator,
    like ``tf.config.experimental.get_memory_info``."""
    executor = _executor(device)
    if not executor.allocator_created:
        return {"current": 0, "peak": 0}
    return executor.allocator.memory_info()


def reset_memory_stats(device: Union[PhysicalDevice, str]) -> None:
    """Sets the peak of `get_memory_info` to the current use."""
    executor = _executor(device)
    if executor.allocator_created:
        executor.allocator.reset_peak()


def set_soft_device_placement(enabled: bool) -> None:
    """With soft placement (the default) an op whose device has no kernel for it runs on the
    CPU, with a warning once per op, and so do the ops of a ``pluggable.device`` scope naming
    a device type no plugin provides (a warning once per type); without, both raise
    `NotFoundError`."""
    from .eager import dispatch

    dispatch.set_soft_device_placement(enabled)


def get_soft_device_placement() -> bool:
    from .eager import dispatch

    return dispatch.get_soft_device_placement()


def set_log_device_placement(enabled: bool) -> None:
    """Logs the device every op runs on (logger ``pluggable.placement``)."""
    from .eager import dispatch

    dispatch.set_log_device_placement(enabled)


def get_log_device_placement() -> bool:
    from .eager import dispatch

    return dispatch.get_log_device_placement()


def set_sync_every_op(enabled: bool) -> None:
    """Every op on a plugin device waits for the device and raises the error of failed
    work naming the op (a debugging mode; ``PLUGGABLE_SYNC_EVERY_OP=1`` at start-up)."""
    from .eager import dispatch

    dispatch.set_sync_every_op(enabled)


def get_sync_every_op() -> bool:
    from .eager import dispatch

    return dispatch.get_sync_every_op()


@record(frozen=True)
class KernelInfo:
    """One kernel: the op it implements, where, and for which types."""

    op: str
    device_type: str
    kernel_name: str
    type_constraints: Dict[str, tuple]  # attribute -> dtype names
    host_memory: tuple
    priority: int
    label: str
    source: str  # the plugin's path, or "pluggable (NumPy reference)"


def list_kernels(op: Optional[str] = None, device_type: Optional[str] = None) -> List[KernelInfo]:
    """The kernels registered for ``op`` on ``device_type`` (all when None), the CPU's NumPy
    reference kernels (priority 0) and the CPU kernels of plugins included: the coverage
    matrix."""
    from .base.dtypes import type_names
    from .kernels.registry import registered_kernels
    from .eager import OPS

    _manager()
    wanted_type = device_type.upper() if device_type else None
    out: List[KernelInfo] = []
    if wanted_type in (None, "CPU"):
        from .kernels.plugin_ops import plugin_of  # ops of plugins have no NumPy reference

        for name, definition in sorted(OPS.items()):
            if (op is None or op == name) and plugin_of(definition) is None:
                constraints = {a.name: tuple(t.name for t in a.allowed)
                               for a in definition.attrs if a.kind == "type" and a.allowed}
                out.append(KernelInfo(name, "CPU", f"{name}Op", constraints, (), 0, "",
                                      "pluggable (NumPy reference)"))
    plugin_kernels = registered_kernels(op, wanted_type)  # CPU kernels of plugins too
    for r in plugin_kernels:
        constraints = {attr: type_names(codes) for attr, codes in sorted(r.constraints.items())}
        out.append(KernelInfo(r.op, r.device_type, r.kernel_name, constraints,
                              tuple(sorted(r.host_memory)), r.priority, r.label, r.plugin))
    return out


def list_refused(plugin: Optional[str] = None) -> List[Any]:
    """Every kernel and op that plugins registered and the host does not use, each with its
    reason (``Refusal(plugin, what, name, op, device_type, reason)``, ``what`` "kernel" or
    "op"); those of the plugin at path ``plugin`` when given. A plugin's load warning counts
    them and names the first few; this is the full list."""
    from .kernels.registry import refusals

    _manager()
    return refusals(plugin)


__all__ += ["list_refused"]


# -- reliability limits (README, "Reliability") ----------------------------------------------
def set_probe_timeout(seconds: Optional[float]) -> None:
    """Seconds the child-process probe of a plugin may take (None: back to
    ``PLUGGABLE_PROBE_TIMEOUT``, default 10)."""
    from .base import limits

    limits.set_probe_timeout(seconds)


def get_probe_timeout() -> float:
    from .base import limits

    return limits.probe_timeout()


def set_deadline(seconds: Optional[float]) -> None:
    """Seconds any host wait on plugin work may take before `DeadlineExceededError` (0: no
    deadline; None: back to ``PLUGGABLE_DEADLINE``, default 600)."""
    from .base import limits

    limits.set_deadline(seconds)


def get_deadline() -> float:
    from .base import limits

    return limits.deadline()


__all__ += ["set_probe_timeout", "get_probe_timeout", "set_deadline", "get_deadline"]
# -- logical and visible devices (tf.config's) ----------------------------------------------
@record(frozen=True)
class LogicalDevice:
    """A device ops can run on, as ``tf.config.LogicalDevice``: one per visible physical
    device."""

    name: str
    device_type: str


def get_visible_devices(device_type: Optional[str] = None) -> List[PhysicalDevice]:
    """The physical devices ops may use: all of them unless `set_visible_devices` hid some."""
    registry = _manager().devices
    return [d for d in list_physical_devices(device_type)
            if d.device_type == "CPU"
            or registry.is_visible(d.device_type, int(d.name.rsplit(":", 1)[1]))]


def set_visible_devices(devices: Union[PhysicalDevice, List[PhysicalDevice], None],
                        device_type: Optional[str] = None) -> None:
    """Makes only ``devices`` visible (of ``device_type`` only, when given: devices of other
    types stay as they are). A hidden device is never created: no streams, no memory, and
    naming it in a device scope or a tensor is a `NotFoundError`. The CPU stays visible.
    Before the devices concerned are first used; afterwards a `RuntimeError`."""
    if devices is None:
        devices = []
    elif isinstance(devices, PhysicalDevice):
        devices = [devices]
    devices = list(devices)
    for d in devices:
        if not isinstance(d, PhysicalDevice):
            raise TypeError(f"set_visible_devices takes PhysicalDevice objects (from "
                            f"list_physical_devices), not {type(d).__name__} {d!r}")
    wanted = device_type.upper() if device_type else None
    physical = list_physical_devices(wanted)
    known = {d.name for d in physical}
    for d in devices:
        if d.name not in known:
            raise InvalidArgumentError(
                f"{d.name} is not a physical device{' of type ' + wanted if wanted else ''}; "
                f"list_physical_devices() shows them", call="set_visible_devices")
    chosen = {d.name for d in devices}
    if wanted in (None, "CPU") and "/physical_device:CPU:0" not in chosen:
        raise InvalidArgumentError(
            "the CPU cannot be hidden: it runs the ops other devices have no kernel for. "
            "Include list_physical_devices('CPU')[0], or pass device_type='XPU' to configure "
            "one device type only", call="set_visible_devices")
    types = {d.device_type for d in physical if d.device_type != "CPU"}
    hidden = {(d.device_type, int(d.name.rsplit(":", 1)[1])) for d in physical
              if d.device_type != "CPU" and d.name not in chosen}
    _manager().devices.set_hidden(hidden, types)


def list_logical_devices(device_type: Optional[str] = None) -> List[LogicalDevice]:
    """The devices ops can run on ("/device:CPU:0", "/device:XPU:0", ...): the visible
    physical devices."""
    return [LogicalDevice(d.name.replace("/physical_device:", "/device:"), d.device_type)
            for d in get_visible_devices(device_type)]


def kernel_coverage(device_type: Optional[str] = None):
    """The coverage matrix: for every op, the element types each device type's kernels take
    (``{op: {device_type: (dtype names)}}``), the CPU's NumPy kernels included; only
    ``device_type`` (and nothing for ops it lacks) when given."""
    from .base.dtypes import op_dtype, type_names
    from .eager import OPS

    def principal(op: str):
        # The element type that names a kernel: the first type attribute of its inputs and
        # outputs that is not an index type (shapes, axes, seeds), else a fixed type.
        definition = OPS.get(op)
        if definition is None:
            return None
        args = definition.inputs + definition.outputs
        for a in args:
            if a.type_attr:
                allowed = definition.attr(a.type_attr).allowed or ()
                if not allowed or not all(t.is_integer for t in allowed):
                    return a
        return next((a for a in args if a.dtype is not None or a.type_attr), None)

    matrix: Dict[str, Dict[str, tuple]] = {name: {} for name in sorted(OPS)}
    for k in list_kernels(device_type=device_type):
        if k.op not in OPS:  # a kernel for an op pluggable does not define: it cannot run
            continue
        types = set(matrix.setdefault(k.op, {}).get(k.device_type, ()))
        arg = principal(k.op)
        if arg is not None and arg.dtype is not None:
            types.add(arg.dtype.name)
        elif arg is not None and arg.type_attr in k.type_constraints:
            types.update(k.type_constraints[arg.type_attr])
        else:
            for values in k.type_constraints.values():
                types.update(values)
        matrix[k.op][k.device_type] = type_names(op_dtype(t).code for t in types)
    return matrix


class _Experimental:
    """``pluggable.config.experimental``: the names ``tf.config.experimental`` gives the
    same functions."""

    def __init__(self):
        self.set_memory_growth = set_memory_growth
        self.get_memory_growth = get_memory_growth
        self.get_memory_info = get_memory_info
        self.reset_memory_stats = reset_memory_stats
        self.get_device_details = get_device_details
        self.list_physical_devices = list_physical_devices
        self.list_logical_devices = list_logical_devices
        self.set_visible_devices = set_visible_devices
        self.get_visible_devices = get_visible_devices
        self.set_memory_limit = set_memory_limit
        self.get_memory_limit = get_memory_limit

    def __dir__(self):
        return sorted(self.__dict__)

    def __repr__(self):
        return "<pluggable.config.experimental: " + ", ".join(sorted(self.__dict__)) + ">"


experimental = _Experimental()
