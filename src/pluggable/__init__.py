"""pluggable: run TensorFlow PluggableDevice plugins written in C, without TensorFlow.

Plugins are found lazily, on first use::

    import pluggable
    pluggable.config.list_physical_devices()
    device = pluggable.get_device("XPU:0")

See `pluggable.config` for the ``tf.config``-like front end, and `get_include()` for the C
headers plugin authors build against.
"""
from __future__ import annotations

import os

from . import config, errors
from .device import PluggableDevice
from .errors import PluggableError, PluginLoadError, PluginLoadWarning
from .loader import get_platform, load_plugin, manager

__version__ = "0.1.0"

__all__ = ["config", "errors", "get_include", "load_plugin", "get_platform", "get_device",
           "PluggableDevice", "PluggableError", "PluginLoadError", "PluginLoadWarning"]


def get_include() -> str:
    """The directory holding the C headers plugins build against (``-I`` it)."""
    here = os.path.dirname(os.path.abspath(__file__))
    installed = os.path.join(here, "include")
    if os.path.isdir(installed):
        return installed
    # An editable install: the headers stay in the source tree.
    return os.path.join(os.path.dirname(os.path.dirname(here)), "include")


def get_device(name: str) -> PluggableDevice:
    """The device ``name`` ("XPU:0", "/device:XPU:0", "xpu"), created on first use."""
    m = manager()
    m.ensure_discovered()
    return m.devices.get(name)
