"""Where tensors live and ops run: the CPU device, device names, and the device scope
(``with pluggable.device("/xpu:1"):``), one per thread and asyncio task."""
from __future__ import annotations

import contextlib
import contextvars
from typing import Any, Iterator, Union

from ..base.errors import (FailedPreconditionError, InvalidArgumentError, NotFoundError,
                           PlacementWarning, warn)
from ..devices.device import PluggableDevice, parse_device_name
from ..loader import get_device, manager

__all__ = ["CPU_DEVICE", "CPUDevice", "device", "device_scope", "explicit_device",
           "placement", "resolve_device", "scoped_device"]


class CPUDevice:
    """The host's built-in CPU device: tensors there are NumPy arrays."""

    device_type = "CPU"
    subdevice_type = "CPU"
    index = 0
    name = "/device:CPU:0"
    is_closed = False

    def __repr__(self):
        return "<CPUDevice /device:CPU:0>"


CPU_DEVICE = CPUDevice()
AnyDevice = Union[CPUDevice, PluggableDevice]

# The device of the innermost ``with pluggable.device(...)`` block, per thread and asyncio
# task (set by `device`): ops run there and new tensors are made there.
device_scope: contextvars.ContextVar = contextvars.ContextVar("pluggable_device_scope",
                                                              default=None)


def scoped_device() -> AnyDevice:
    """The device of the innermost device scope, else the CPU."""
    scoped = device_scope.get()
    if scoped is None:
        return CPU_DEVICE
    if isinstance(scoped, PluggableDevice) and scoped.is_closed:
        return resolve_device(scoped.name)
    return scoped


def placement(device: Any) -> AnyDevice:
    """Where a new tensor goes: ``device`` when given, else the scope's device."""
    return scoped_device() if device is None else resolve_device(device)


def resolve_device(spec: Any) -> AnyDevice:
    """The device named by ``spec``: None (CPU), a name ("/device:XPU:0", "xpu:1", "CPU"),
    a `PhysicalDevice`, or a device object."""
    if spec is None or spec is CPU_DEVICE:
        return CPU_DEVICE
    if isinstance(spec, PluggableDevice):
        if spec.is_closed:
            raise FailedPreconditionError(f"{spec.name} is closed", call="device")
        return spec
    name = getattr(spec, "name", spec)
    device_type, index = parse_device_name(name)
    if device_type == "CPU":
        if index != 0:
            raise InvalidArgumentError(f"there is one CPU device, CPU:0, not {name!r}",
                                       call="device")
        return CPU_DEVICE
    return get_device(f"{device_type}:{index}")


# Soft placement (pluggable.config.set_soft_device_placement, on by default as in eager
# TensorFlow): a scope naming a device type no plugin provides runs its ops on the CPU.
soft_placement = {"enabled": True}
_fallen_back: set = set()  # the device types a scope fell back from, said once each


def _scope_target(name: Any) -> AnyDevice:
    try:
        return resolve_device(name)
    except NotFoundError as exc:
        if not soft_placement["enabled"] or isinstance(name, PluggableDevice):
            raise
        device_type, _ = parse_device_name(getattr(name, "name", name))
        if manager().devices.enabled_platform(device_type) is not None:
            raise  # a type that is there, an index that is not: a mistake to report
        if device_type not in _fallen_back:
            _fallen_back.add(device_type)
            warn(f"{exc}. With soft placement on, the ops of this scope run on the CPU "
                 f"instead (said once per device type); turn it off "
                 f"(pluggable.config.set_soft_device_placement(False)) to make this an "
                 f"error", PlacementWarning)
        return CPU_DEVICE


@contextlib.contextmanager
def device(name: Any) -> Iterator[Any]:
    """Runs the ops in the block on ``name`` ("/device:XPU:1", "xpu:1", "XPU", "CPU", a
    `PhysicalDevice` or a device object). Scopes nest; each thread and asyncio task has its
    own. A device type no plugin provides runs the block on the CPU, with a
    `PlacementWarning`, while soft placement is on (the default); with it off, or for a
    device number the type does not have, the scope raises `NotFoundError`."""
    target = _scope_target(name)
    token = device_scope.set(target)
    try:
        yield target
    finally:
        device_scope.reset(token)


_NO_SCOPE = contextlib.nullcontext()


def explicit_device(name: Any):
    """The scope a creation function given ``device=name`` runs its ops in: that device's,
    so an explicit device wins over the enclosing scope; nothing for None."""
    return _NO_SCOPE if name is None else device(name)
