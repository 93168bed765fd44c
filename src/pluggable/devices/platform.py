"""Platforms: one per loaded StreamExecutor plugin, and the registry of them by name.

A `Platform` runs the plugin's ``SE_InitPlugin``, checks everything the plugin filled
(struct sizes, versions, names, callbacks, the device count; see `validation`), creates a
`StreamExecutor` for a device when it is first used (device 0 at load, as a check) and keeps
the plugin's structs alive for as long as any of them is used.
"""
from __future__ import annotations

import ctypes
import threading
import weakref

from ..base import native as _native
from ..abi import plugin_ext
from ..abi.stream_executor import (
    SE_MAJOR, SE_MINOR, SE_PATCH, SE_PlatformRegistrationParams, SP_Platform, SP_PlatformFns,
    SP_TimerFns)
from ..base.errors import AlreadyExistsError, NotFoundError, UnavailableError
from ..base import limits
from ..base.limits import MAX_DEVICES
from ..plugin.library import PluginCallError
from ..plugin.validation import (
    ValidationError, alloc_struct, negotiate, optional_callback, read_c_string, read_name,
    require_callbacks)

TYPE_CHECKING = False  # typing's constant, without importing typing at start-up
if TYPE_CHECKING:
    from typing import Callable, Dict, List, Optional
    from .executor import StreamExecutor
    from ..loader.plugin_manager import PluginLibrary

# Every platform made, to be told when its plugin is found stuck (`limits.on_plugin_stuck`).
_platforms: "weakref.WeakSet[Platform]" = weakref.WeakSet()


def _on_plugin_stuck(path: str, reason: str) -> None:
    for platform in list(_platforms):
        if platform.path == path:
            platform.mark_stuck(reason)


class Platform:
    """A StreamExecutor platform provided by one plugin (TensorFlow's subdevice type).

    ``name`` is the platform name (``"REF_XPU"``), ``device_type`` the device type it
    registers (``"XPU"``). Platforms are made by the loader; use `pluggable.config` or
    `get_platform` to reach them.
    """

    def __init__(self, library: "PluginLibrary", init_fn, init_symbol: str,
                 progress: Optional[Callable[[str], None]] = None):
        self.library = library
        self.path = library.path
        self._init_symbol = init_symbol
        self._executors: Dict[int, "StreamExecutor"] = {}
        self._executors_lock = threading.RLock()
        self._destroy_platform = self._destroy_platform_fns = None
        # Told each step before it starts: the probe child writes it down, so that a crash
        # in the step is reported with its name.
        self._progress = progress or (lambda step: None)
        _platforms.add(self)
        try:
            self._progress("init")
            self._initialize(init_fn)
        except PluginCallError:
            self.destroy()
            raise

    # -- loading ---------------------------------------------------------------------------
    def _initialize(self, init_fn) -> None:
        params = alloc_struct(SE_PlatformRegistrationParams)
        platform = alloc_struct(SP_Platform)
        platform_fns = alloc_struct(SP_PlatformFns)
        # The host's version; the plugin overwrites it with the one it was built for.
        params.major_version, params.minor_version, params.patch_version = (
            SE_MAJOR, SE_MINOR, SE_PATCH)
        params.platform = ctypes.pointer(platform)
        params.platform_fns = ctypes.pointer(platform_fns)
        self._params_storage = (params, platform, platform_fns)

        status = _native.Status()
        init_fn(ctypes.byref(params), status.address)
        if not status.ok:
            raise PluginCallError(
                "init", f"{self._init_symbol} returned {_code_name(status.code)}: "
                        f"{status.message or '(no message)'}")

        self._progress("validation")
        try:
            where = self._init_symbol
            params_view = negotiate(SE_PlatformRegistrationParams, params, where)
            if params_view.major_version != SE_MAJOR:
                raise ValidationError(
                    f"the plugin implements StreamExecutor C API "
                    f"{params_view.major_version}.{params_view.minor_version}."
                    f"{params_view.patch_version} but this host implements "
                    f"{SE_MAJOR}.{SE_MINOR}.{SE_PATCH}; the major versions must match. "
                    f"Rebuild the plugin against pluggable.get_include()")
            self.api_version = (int(params_view.major_version), int(params_view.minor_version),
                                int(params_view.patch_version))
            self._destroy_platform = params_view.destroy_platform or None
            self._destroy_platform_fns = params_view.destroy_platform_fns or None
            self._platform_view = negotiate(SP_Platform, platform, where)
            self._platform_fns_view = negotiate(SP_PlatformFns, platform_fns, where)
            require_callbacks(SP_PlatformFns, self._platform_fns_view,
                              SP_PlatformFns.required_callbacks(), where)
            pv = self._platform_view
            self.name = read_name(pv.name, "SP_Platform.name")
            self.device_type = read_name(pv.type, "SP_Platform.type")
            if self.device_type == "CPU":
                raise ValidationError(
                    "SP_Platform.type is 'CPU', the host's own device type; a plugin must "
                    "register another one (for example 'XPU' or 'MY_DEVICE')")
            self.supports_unified_memory = bool(pv.supports_unified_memory)
            self.use_bfc_allocator = bool(pv.use_bfc_allocator)
            self.force_memory_growth = bool(pv.force_memory_growth)
            self._read_extensions(pv.ext)
        except ValidationError as exc:
            raise PluginCallError("validation", str(exc)) from None

        # The plugin keeps the addresses it was given; they are what must be passed back.
        self._platform = platform
        self._platform_ref = ctypes.byref(platform)
        self._platform_fns = self._platform_fns_view
        self._timer_fns = self._create_timer_fns()
        self._progress("device count")
        self.device_count = self._get_device_count()

    def _read_extensions(self, ext_address) -> None:
        self.capabilities = 0
        self.plugin_version: Optional[str] = None
        self.default_priority = 0
        # PLUGGABLE_DLPackDeviceExt: the DLDeviceType of the platform's memory, or None.
        self.dlpack_device_type: Optional[int] = None
        self.dlpack_flags = 0
        for link in plugin_ext.walk_ext_chain(ext_address or 0):
            if link.type == plugin_ext.PLUGGABLE_EXT_DLPACK_DEVICE:
                dl = negotiate(plugin_ext.PLUGGABLE_DLPackDeviceExt,
                               plugin_ext.PLUGGABLE_DLPackDeviceExt.from_address(link.address),
                               "SP_Platform.ext")
                self.dlpack_device_type = int(dl.device_type)
                self.dlpack_flags = int(dl.flags)
                continue
            if link.type != plugin_ext.PLUGGABLE_EXT_PLATFORM_INFO:
                continue
            info = negotiate(plugin_ext.PLUGGABLE_PlatformInfoExt,
                             plugin_ext.PLUGGABLE_PlatformInfoExt.from_address(link.address),
                             "SP_Platform.ext")
            self.capabilities = int(info.flags)
            size = int(info.struct_size)
            cls = plugin_ext.PLUGGABLE_PlatformInfoExt
            if cls.field_present("plugin_version", size) and info.plugin_version:
                self.plugin_version = read_c_string(
                    info.plugin_version, "PLUGGABLE_PlatformInfoExt.plugin_version")
            if cls.field_present("default_priority", size):
                self.default_priority = int(info.default_priority)

    def _create_timer_fns(self):
        create = optional_callback(SP_PlatformFns, self._platform_fns, "create_timer_fns")
        if create is None:
            return None
        timer_fns = alloc_struct(SP_TimerFns)
        status = _native.Status()
        create(self._platform_ref, ctypes.byref(timer_fns), status.address)
        if not status.ok:
            raise PluginCallError("init", f"SP_PlatformFns.create_timer_fns failed: "
                                          f"{status.message}")
        try:
            view = negotiate(SP_TimerFns, timer_fns, "SP_PlatformFns.create_timer_fns")
            require_callbacks(SP_TimerFns, view, ("nanoseconds",),
                              "SP_PlatformFns.create_timer_fns")
        except ValidationError as exc:
            raise PluginCallError("validation", str(exc)) from None
        self._timer_fns_storage = timer_fns
        return view

    def _get_device_count(self) -> int:
        count = ctypes.c_int(-1)
        status = _native.Status()
        self._platform_fns.get_device_count(self._platform_ref, ctypes.byref(count),
                                            status.address)
        if not status.ok:
            raise PluginCallError("device creation",
                                  f"SP_PlatformFns.get_device_count failed: {status.message}")
        if count.value < 0:
            raise PluginCallError("validation",
                                  f"SP_PlatformFns.get_device_count gave {count.value} devices; "
                                  f"the count must be 0 or more")
        if count.value > MAX_DEVICES:
            raise PluginCallError("validation",
                                  f"SP_PlatformFns.get_device_count gave {count.value} devices; "
                                  f"the host accepts at most {MAX_DEVICES} per plugin")
        return count.value

    def create_first_executor(self) -> None:
        """Creates device 0's StreamExecutor, as part of loading ("device creation"): a
        plugin that cannot create devices is refused at load. The other devices are created
        when first used."""
        if self.device_count:
            self._create_executor(0)

    def _create_executor(self, ordinal: int) -> "StreamExecutor":
        from .executor import StreamExecutor

        with self._executors_lock:
            executor = self._executors.get(ordinal)
            if executor is None:
                self._progress(f"device creation {ordinal}")
                executor = StreamExecutor(self, ordinal)
                self._executors[ordinal] = executor
                if self.stuck:  # found stuck while the device was made
                    executor._mark_stuck(self.stuck)
            return executor

    #: Why the plugin is no longer called: a call was abandoned inside it; "" while usable.
    stuck = ""

    def mark_stuck(self, reason: str) -> None:
        """Makes the platform unusable for the rest of the process, without calling the
        plugin: every device's executor refuses every call (`UnavailableError` naming
        ``reason``, the call that got stuck), and no device is created. Called through
        `limits.mark_plugin_stuck`, which also refuses the library's kernels and profiler."""
        if self.stuck:
            return
        self.stuck = reason
        for executor in self.executors:
            executor._mark_stuck(reason)
        _native.compiled.invalidate()  # plans and copiers of its devices are stale

    def _check_usable(self, call: str) -> None:
        if self.stuck:
            raise UnavailableError(limits.unusable_message(self.label, call, self.stuck),
                                   plugin=self.label, call=call)

    def destroy(self) -> None:
        """Gives the plugin back its platform structs after a failed load (not to a plugin
        found stuck: nothing is called in it again)."""
        for executor in self.executors:
            executor.close()
        self._executors = {}
        if self.stuck:
            return
        platform, platform_fns = self._params_storage[1], self._params_storage[2]
        if self._destroy_platform_fns is not None:
            self._destroy_platform_fns(ctypes.byref(platform_fns))
            self._destroy_platform_fns = None
        if self._destroy_platform is not None:
            self._destroy_platform(ctypes.byref(platform))
            self._destroy_platform = None

    # -- public ----------------------------------------------------------------------------
    @property
    def label(self) -> str:
        """How messages name this plugin: platform name and file."""
        return f"{self.name} plugin ({self.path})"

    def executor(self, ordinal: int) -> "StreamExecutor":
        """The StreamExecutor of device ``ordinal``, created on first use."""
        if not 0 <= ordinal < self.device_count:
            raise NotFoundError(
                f"{self.label} has {self.device_count} device(s); there is no device "
                f"{ordinal}", plugin=self.label, call="executor")
        executor = self._executors.get(ordinal)
        if executor is not None:
            return executor
        self._check_usable(f"creating device {ordinal}")
        try:
            return self._create_executor(ordinal)
        except PluginCallError as exc:
            raise UnavailableError(
                f"{self.label}: creating device {ordinal} failed ({exc.step}): {exc.reason}",
                plugin=self.label, call="create_device", plugin_message=exc.reason) from None

    @property
    def executors(self) -> List["StreamExecutor"]:
        """The executors created so far, by ordinal."""
        with self._executors_lock:
            return [self._executors[k] for k in sorted(self._executors)]

    def has_capability(self, flag: int) -> bool:
        return bool(self.capabilities & flag)

    def __repr__(self):
        return (f"<Platform {self.name} device_type={self.device_type} "
                f"devices={self.device_count} path={self.path!r}>")


def _code_name(code: int) -> str:
    from ..abi.tf_status import TF_Code
    try:
        return TF_Code(code).name
    except ValueError:
        return f"code {code}"


class PlatformRegistry:
    """Platforms by name (TensorFlow's subdevice type). Names are unique."""

    def __init__(self):
        self._lock = threading.Lock()
        self._by_name: Dict[str, Platform] = {}

    def check_available(self, platform: Platform) -> None:
        """Raises if another plugin already registered ``platform``'s name."""
        existing = self._by_name.get(platform.name)
        if existing is not None:
            raise AlreadyExistsError(
                f"platform name {platform.name!r} is already registered by "
                f"{existing.path}; a second plugin cannot register it again",
                plugin=platform.path, call="registration")

    def register(self, platform: Platform) -> None:
        with self._lock:
            self.check_available(platform)
            self._by_name[platform.name] = platform

    def get(self, name: str) -> Platform:
        with self._lock:
            try:
                return self._by_name[name]
            except KeyError:
                known = ", ".join(sorted(self._by_name)) or "none"
                raise NotFoundError(
                    f"no platform named {name!r} is registered (registered: {known})",
                    call="get_platform") from None

    def all(self) -> List[Platform]:
        with self._lock:
            return list(self._by_name.values())


limits.on_plugin_stuck(_on_plugin_stuck)
