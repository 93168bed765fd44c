"""PluggableDevice and the registry of device types.

A plugin registers one device type ("XPU", "GPU", ...) under its platform name (the subdevice
type, "REF_XPU"). When several plugins register the same device type, one is enabled: the
one with the highest priority, or the first loaded at equal priority (with a warning naming
both); the others are listed as disabled. `pluggable.config.set_subdevice_mapping` enables
another one, as long as no device of that type has been created yet.

A `PluggableDevice` is what runs work: it owns its executor's compute stream and the
host-to-device, device-to-host and device-to-device copy streams, as TensorFlow's does.
"""
from __future__ import annotations

import threading

from ..base import native as _native
from ..base.record import record
from ..base.errors import FailedPreconditionError, InvalidArgumentError, NotFoundError

TYPE_CHECKING = False  # typing's constant, without importing typing at start-up
if TYPE_CHECKING:
    from typing import Dict, List, Optional, Tuple
    from .executor import StreamExecutor
    from ..loader.plugin_manager import PluginManager, PluginRecord
    from .platform import Platform
    from .stream import Stream


class PluggableDevice:
    """A device of the enabled plugin of its type, with its four streams.

    Get one with ``pluggable.get_device("XPU:0")``. ``close()`` (or leaving a ``with``
    block) destroys its streams; the executor stays for the next user.
    """

    def __init__(self, device_type: str, index: int, executor: "StreamExecutor"):
        self.device_type = device_type
        self.index = index
        self.executor = executor
        self.platform = executor.platform
        self.name = f"/device:{device_type}:{index}"
        self._lock = threading.Lock()
        streams = []
        try:
            for _ in range(4):
                streams.append(executor.create_stream())
        except BaseException:
            for stream in streams:
                stream.close()
            raise
        (self.compute_stream, self.host_to_device_stream, self.device_to_host_stream,
         self.device_to_device_stream) = streams
        self._name_streams()
        self._closed = False
        self._copier = None  # tensors._copier: small copies in C, made on first use

    # Names of the four streams, in `streams` order: profiles name their timelines so.
    STREAM_ROLES = ("compute", "host_to_device", "device_to_host", "device_to_device")

    def _name_streams(self) -> None:
        for role, stream in zip(self.STREAM_ROLES, self.streams):
            if getattr(stream, "name", None) != role:
                self.executor.name_stream(stream, role)

    @property
    def subdevice_type(self) -> str:
        return self.platform.name

    @property
    def streams(self) -> Tuple["Stream", ...]:
        return (self.compute_stream, self.host_to_device_stream, self.device_to_host_stream,
                self.device_to_device_stream)

    @property
    def is_closed(self) -> bool:
        return self._closed

    def synchronize(self) -> None:
        """Waits until every stream of the device is done; raises the error of failed work
        once, after replacing the streams that failure left unusable."""
        marks = [(stream._ledger, stream._ledger.mark()) for stream in self.streams]
        try:
            self.executor.synchronize_all_activity()
            # Failed work a plugin reports only in its streams' statuses.
            for stream in self.streams:
                if not stream.is_closed:
                    stream.raise_if_error()
        except Exception:
            if not self._closed:
                self.recover_streams()
            raise
        for ledger, mark in marks:
            ledger.verified(mark)

    def synchronize_stream(self, stream: "Stream") -> None:
        """Waits for one of the device's streams; raises the error of failed work on it,
        after replacing the streams that failure left unusable."""
        try:
            stream.synchronize()
        except Exception:
            self.recover_streams()
            raise

    def check_stream(self, stream: "Stream") -> None:
        """Raises if work on ``stream`` failed (after replacing the failed streams)."""
        try:
            stream.raise_if_error()
        except Exception:
            self.recover_streams()
            raise

    def recover_streams(self) -> None:
        """Replaces every stream of the device whose status is an error (a plugin's stream
        errors are sticky): the error was reported once, the device goes on working."""
        with self._lock:
            streams = list(self.streams)
            names = ("compute_stream", "host_to_device_stream", "device_to_host_stream",
                     "device_to_device_stream")
            failed = []
            for i, stream in enumerate(streams):
                if stream.is_closed:
                    continue
                state = stream.status()
                if state.ok:
                    continue
                streams[i] = self.executor.create_stream()
                stream._ledger.fail(f"{self.name}'s {names[i]} failed ({state.message})")
                # Other threads may still hold it: tell them what happened, not "closed".
                stream.closed_because = (
                    f"{self.name}'s {names[i]} failed ({state.message}) and was replaced by a "
                    f"new stream; use {self.name}.{names[i]} again (or pluggable.get_device("
                    f"{self.name!r}).{names[i]}) for further work")
                failed.append(stream)
            (self.compute_stream, self.host_to_device_stream, self.device_to_host_stream,
             self.device_to_device_stream) = streams
            self._name_streams()
            # The streams are replaced first, plans told next, the old streams closed last:
            # a plan checked in between is stale for good, none runs on a closed stream.
            _native.compiled.invalidate()
            for stream in failed:
                stream.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        _native.compiled.invalidate()  # after the flag: a plan checked meanwhile is found stale
        for stream in self.streams:
            stream.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"<PluggableDevice {self.name} ({self.subdevice_type})>"


@record
class _Provider:
    platform: "Platform"
    priority: int
    order: int
    record: "PluginRecord"




def parse_device_name(spec: str) -> Tuple[str, int]:
    """``("XPU", 1)`` from "/device:XPU:1", "/physical_device:XPU:1", "xpu:1", "XPU" (index 0),
    or a TensorFlow full name ending in ".../device:XPU:1"."""
    if not isinstance(spec, str) or not spec.strip():
        raise InvalidArgumentError(f"a device name must be a non-empty string, not {spec!r}",
                                   call="device name")
    text = spec.strip()
    # What follows the last path component that starts with "device:" or "physical_device:"
    # ("/my_device:0" is device type MY_DEVICE: "device:" counts only as a whole component).
    components = text.split("/")
    for i in range(len(components) - 1, -1, -1):
        component = components[i]
        if component.startswith(("device:", "physical_device:")):
            components[i] = component.partition("device:")[2]
            text = "/".join(components[i:])
            break
    text = text.lstrip("/")
    parts = text.split(":")
    try:
        if len(parts) == 1:
            kind, index = parts[0], 0
        elif len(parts) == 2:
            kind, index = parts[0], int(parts[1])
        else:
            raise ValueError
        if not kind or index < 0:
            raise ValueError
    except ValueError:
        raise InvalidArgumentError(
            f"cannot parse device name {spec!r}; use forms like '/device:XPU:0', 'xpu:0' or "
            f"'XPU'", call="device name") from None
    return kind.upper(), index


class DeviceRegistry:
    """Device types and the plugins that provide them; enabled devices by name."""

    def __init__(self, manager: "PluginManager"):
        self._manager = manager
        self._lock = threading.RLock()
        self._providers: Dict[str, List[_Provider]] = {}
        self._enabled: Dict[str, "Platform"] = {}
        self._devices: Dict[Tuple[str, int], PluggableDevice] = {}
        self._order = 0
        self._hidden: set = set()  # (device type, index) hidden by set_visible_devices

    def add_platform(self, platform: "Platform", priority: int,
                     record: "PluginRecord") -> List[str]:
        """Registers ``platform``'s device type; returns warnings to give the user."""
        warnings_out: List[str] = []
        with self._lock:
            self._order += 1
            providers = self._providers.setdefault(platform.device_type, [])
            provider = _Provider(platform, priority, self._order, record)
            providers.append(provider)
            current = self._enabled.get(platform.device_type)
            if current is None:
                self._enabled[platform.device_type] = platform
                return warnings_out
            current_provider = next(p for p in providers if p.platform is current)
            if priority > current_provider.priority and not self._has_devices(
                    platform.device_type):
                self._enabled[platform.device_type] = platform
                current_provider.record.status = "disabled"
                current_provider.record.reason = (
                    f"{platform.path} provides device type {platform.device_type} with a "
                    f"higher priority ({priority} > {current_provider.priority})")
                return warnings_out
            record.status = "disabled"
            if priority == current_provider.priority:
                record.reason = (
                    f"{current.path} was loaded first with the same priority ({priority}) for "
                    f"device type {platform.device_type}")
                warnings_out.append(
                    f"pluggable: two plugins provide device type {platform.device_type} with "
                    f"priority {priority}: {current.path} (platform {current.name}, enabled, "
                    f"loaded first) and {platform.path} (platform {platform.name}, disabled). "
                    f"Choose with pluggable.config.set_subdevice_mapping("
                    f"{platform.device_type!r}, {platform.name!r}) or give a priority to "
                    f"pluggable.load_plugin()")
            else:
                record.reason = (
                    f"{current.path} provides device type {platform.device_type} with a "
                    f"{'higher' if current_provider.priority > priority else 'equal'} priority "
                    f"({current_provider.priority} vs {priority})"
                    + ("" if current_provider.priority > priority else
                       "; devices of that type already exist"))
        return warnings_out

    def _has_devices(self, device_type: str) -> bool:
        return any(key[0] == device_type for key in self._devices)

    def set_subdevice_mapping(self, device_type: str, subdevice_type: str) -> None:
        with self._lock:
            providers = self._providers.get(device_type)
            if not providers:
                known = ", ".join(sorted(self._providers)) or "none"
                raise NotFoundError(
                    f"no plugin provides device type {device_type!r} (device types: {known})",
                    call="set_subdevice_mapping")
            chosen = next((p for p in providers if p.platform.name == subdevice_type), None)
            if chosen is None:
                names = ", ".join(p.platform.name for p in providers)
                raise NotFoundError(
                    f"no plugin provides device type {device_type!r} as subdevice type "
                    f"{subdevice_type!r} (available: {names})", call="set_subdevice_mapping")
            current = self._enabled[device_type]
            if current is chosen.platform:
                return
            if self._has_devices(device_type):
                raise FailedPreconditionError(
                    f"devices of type {device_type} already exist on {current.name}; the "
                    f"subdevice mapping must be set before the first {device_type} device is "
                    f"used (call set_subdevice_mapping right after import)")
            for p in providers:
                if p.platform is current:
                    p.record.status = "disabled"
                    p.record.reason = (f"set_subdevice_mapping({device_type!r}, "
                                       f"{subdevice_type!r}) chose {chosen.platform.path}")
            chosen.record.status, chosen.record.reason = "loaded", ""
            self._enabled[device_type] = chosen.platform

    def enabled_platforms(self) -> List["Platform"]:
        with self._lock:
            return list(self._enabled.values())

    def enabled_platform(self, device_type: str) -> Optional["Platform"]:
        with self._lock:
            return self._enabled.get(device_type)

    def get(self, spec: str) -> PluggableDevice:
        device_type, index = parse_device_name(spec)
        with self._lock:
            device = self._devices.get((device_type, index))
            if device is not None and not device.is_closed:
                return device
            platform = self._enabled.get(device_type)
            if platform is None:
                known = ", ".join(sorted(self._enabled)) or "none"
                raise NotFoundError(
                    f"no plugin provides device type {device_type} for {spec!r} (loaded device "
                    f"types: {known}; `python -m pluggable plugins` shows what was skipped)",
                    call="get_device")
            if index >= platform.device_count:
                raise NotFoundError(
                    f"{spec!r}: {platform.label} has {platform.device_count} {device_type} "
                    f"device(s), numbered from 0", call="get_device")
            self.check_visible(device_type, index, spec)
            executor = platform.executor(index)
            if executor.is_closed:
                raise FailedPreconditionError(f"{executor.name} was closed",
                                              call="get_device")
            device = PluggableDevice(device_type, index, executor)
            self._devices[(device_type, index)] = device
            return device

    def check_visible(self, device_type: str, index: int, spec: str) -> None:
        if (device_type, index) in self._hidden:
            raise NotFoundError(
                f"{spec!r} ({device_type}:{index}) is hidden by "
                f"pluggable.config.set_visible_devices; it has no streams or memory. "
                f"pluggable.config.get_visible_devices() lists the visible devices",
                call="get_device")

    def is_visible(self, device_type: str, index: int) -> bool:
        return (device_type, index) not in self._hidden

    def set_hidden(self, hidden: set, device_types: set) -> None:
        """Hides the (device type, index) pairs ``hidden`` and shows the other devices of
        ``device_types``; only before a device whose visibility changes was created."""
        with self._lock:
            new = {key for key in self._hidden if key[0] not in device_types} | set(hidden)
            changed = new ^ self._hidden
            used = sorted(f"{t}:{i}" for t, i in changed
                          if (t, i) in self._devices and not self._devices[(t, i)].is_closed)
            if used:
                raise RuntimeError(
                    f"Visible devices cannot be modified after being initialized: "
                    f"{', '.join(used)} already in use. Call set_visible_devices right after "
                    f"import, before creating tensors or running ops")
            self._hidden = new

    def close_all(self) -> None:
        with self._lock:
            for device in self._devices.values():
                device.close()
