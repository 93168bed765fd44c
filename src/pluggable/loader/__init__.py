"""The plugin manager: runs every loading step of a plugin (its library, platform, kernels,
profiler and graph optimizers) and owns the registries of what was loaded."""
from .plugin_manager import (PluginManager, PluginRecord, get_device,  # noqa: F401
                             get_platform, load_plugin, manager)
