"""Loading plugins: the plugin manager runs every step of a plugin's load and keeps what was
loaded (records, platforms, devices).

Discovery is lazy (on first use of anything that needs plugins), happens once, and is safe
from several threads. It looks in:

1. every ``tensorflow-plugins`` directory under the interpreter's site-packages directories
   (the user site included) and beside the installed `pluggable` package;
2. the files and directories listed in ``PLUGGABLE_PLUGIN_PATH`` (``os.pathsep``-separated);
3. the entry-point group ``pluggable.plugins``: each entry point yields the path of a shared
   library (or a callable returning one).

``PLUGGABLE_DISABLE_AUTOLOAD=1`` turns discovery off; `load_plugin` always works. A file
reached twice (a symlink, two site directories) is loaded once. A plugin that fails any step
is skipped with a `PluginLoadWarning` naming the file, the step and the reason; `load_plugin`
raises `PluginLoadError` with the same message instead. Plugins are never unloaded: objects
made from them may live until the interpreter exits.

Before ``dlopen`` every candidate is resolved to its absolute real path (what is loaded and
listed, with the link it was found through) and checked ("file check"): relative entries of
``PLUGGABLE_PLUGIN_PATH``, dangling links, files that are not regular, world-writable files
or directories and files of another user are refused (`limits.unsafe_plugins_allowed` lets
the last two through), as is a file built for another machine. A discovered plugin is then
probed in a child process (`probe`) before its first in-process load.
"""
from __future__ import annotations

import atexit
import os
import threading

from ..base.errors import warn
from ..base import native as _native  # noqa: F401  (loads the runtime library, RTLD_GLOBAL, before plugins)
from ..base import limits
from ..base.limits import safe_text
from ..base.record import record
from ..base.errors import PluggableError, PluginLoadError, PluginLoadWarning
from ..devices.platform import Platform, PlatformRegistry
from ..plugin.discovery import DISABLE_VARIABLE, discover_candidates
from ..plugin.library import PluginCallError, PluginLibrary, check_file

TYPE_CHECKING = False  # typing's constant, without importing typing at start-up
if TYPE_CHECKING:
    from typing import Dict, List, Optional, Tuple
    from ..plugin.profiler import PluginProfiler
    from ..devices.device import PluggableDevice


_ADVICE = {
    "file check": "see the README's Reliability section; "
                  f"{limits.ALLOW_UNSAFE_VARIABLE}=1 allows files other users can change",
    "dlopen": "check that the file is a shared library built for this machine and that the "
              "libraries it needs are installed (`python -m pluggable doctor PATH` lists its "
              "whole dependency tree)",
    "dependencies": "the plugin was built on TensorFlow's own libraries; the message says "
                    "which and what to do",
    "symbol lookup": "a StreamExecutor plugin must export SE_InitPlugin (or "
                     "SE_InitializePlugin) with C linkage",
    "init": "the plugin's own message above says why it refused to start",
    "validation": "the plugin does not follow the C API; rebuild it against "
                  "pluggable.get_include() and see include/ABI.md",
    "device creation": "the plugin failed to create its devices; its message above says why",
    "registration": "another loaded plugin already provides it; remove one of the two",
    "device count": "the plugin's get_device_count failed or reported a count outside the "
                    "documented range; its message says which",
    "kernels": "the plugin's TF_InitKernel crashed, hung or failed; check it with "
               "`python -m pluggable doctor PATH`",
    "profiler": "the plugin's TF_InitProfiler crashed, hung or failed; check it with "
                "`python -m pluggable doctor PATH`",
    "shutdown": "the plugin crashed or hung while its devices were destroyed; check it with "
                "`python -m pluggable doctor PATH`",
    "start": "the probe's child process could not start this plugin's check; run "
             "`python -m pluggable doctor PATH` to see why",
    "profiler init": "the plugin's own message above says why its profiler refused to start",
    "profiler validation": "the plugin's TF_InitProfiler does not follow the profiler C API; "
                           "rebuild it against pluggable.get_include() and see include/ABI.md",
}


@record
class PluginRecord:
    """What happened to one discovered or explicitly loaded plugin file."""

    path: str
    source: str
    status: str = "skipped"  # "loaded", "disabled" or "skipped"
    reason: str = ""
    step: str = ""
    device_type: Optional[str] = None
    platform_name: Optional[str] = None
    api_version: Optional[str] = None
    priority: Optional[int] = None
    device_count: Optional[int] = None
    provides_kernels: bool = False
    provides_profiler: bool = False
    plugin_version: Optional[str] = None
    profiler_type: Optional[str] = None  # TP_Profiler.device_type once TF_InitProfiler passed
    profiler_reason: str = ""  # why the library's profiler was skipped
    found_as: Optional[str] = None  # the path or link it was found through, when not `path`
    probe: Optional[str] = None  # "passed", "passed (cached)", or None when not probed
    # TF_InitGraph (grappler.h): what it registered, or why it was refused
    graph_optimizer: Optional[object] = None
    graph_optimizer_error: str = ""


class PluginManager:
    """Everything loaded: plugin records, platforms and device types. One per process."""

    def __init__(self):
        from ..devices.device import DeviceRegistry

        self._lock = threading.RLock()
        self._discovered = False
        self._discovering = False
        self.records: List[PluginRecord] = []
        self._by_key: Dict[Tuple[int, int], PluginRecord] = {}
        self._errors: Dict[Tuple[int, int], PluginLoadError] = {}
        self._platform_by_key: Dict[Tuple[int, int], Platform] = {}
        self.profilers: List["PluginProfiler"] = []
        self.platforms = PlatformRegistry()
        self.devices = DeviceRegistry(self)

    def ensure_discovered(self) -> None:
        if self._discovered:
            return
        with self._lock:
            # `_discovering` stops re-entry from this thread (an entry point that uses
            # pluggable); other threads wait on the lock until discovery is complete.
            if self._discovered or self._discovering:
                return
            self._discovering = True
            try:
                if os.environ.get(DISABLE_VARIABLE, "") in ("", "0"):
                    for path, source in discover_candidates():
                        self._load(path, source, priority=None, explicit=False)
            finally:
                self._discovering = False
                self._discovered = True

    def load_plugin(self, path: str, priority: Optional[int] = None,
                    isolate: Optional[bool] = None) -> Platform:
        self.ensure_discovered()
        with self._lock:
            return self._load(os.fspath(path), "load_plugin", priority, explicit=True,
                              isolate=isolate)

    def _load(self, path: str, source: str, priority: Optional[int],
              explicit: bool, isolate: Optional[bool] = None) -> Optional[Platform]:
        record = PluginRecord(path=path, source=source)
        try:
            real, info = check_file(path)
        except PluginCallError as exc:
            return self._fail(record, None, exc.step, exc.reason, explicit)
        if real != path:
            record.path, record.found_as = real, path
        key = (info.st_dev, info.st_ino)
        if key in self._by_key:  # the same file by another route
            if key in self._platform_by_key:
                return self._platform_by_key[key]
            if explicit and key in self._errors:
                raise self._errors[key]
            return None
        self._by_key[key] = record
        self.records.append(record)
        if isolate if isolate is not None else limits.probing_enabled():
            from ..plugin import probe

            result = probe.verdict(real, report=False)
            if not result.ok:
                return self._fail(record, key, result.step, result.reason, explicit)
            record.probe = "passed (cached)" if result.cached else "passed"
        try:
            library = PluginLibrary(real)
            record.provides_kernels = library.kernel_init is not None
            record.provides_profiler = library.profiler_init is not None
            if library.init_fn is None:  # kernels, a graph optimizer or a profiler; no device
                self._load_without_device(library, record)
                return None
            platform = Platform(library, library.init_fn, library.init_symbol)
            record.platform_name = platform.name
            record.device_type = platform.device_type
            record.api_version = ".".join(map(str, platform.api_version))
            record.plugin_version = platform.plugin_version
            record.device_count = platform.device_count
            record.priority = platform.default_priority if priority is None else int(priority)
            try:
                self.platforms.check_available(platform)
                platform.create_first_executor()
                self.platforms.register(platform)
            except PluggableError as exc:
                platform.destroy()
                raise PluginCallError("registration", str(exc)) from None
            except PluginCallError:
                platform.destroy()
                raise
        except PluginCallError as exc:
            return self._fail(record, key, exc.step, exc.reason, explicit)
        self._platform_by_key[key] = platform
        record.status = "loaded"
        for message in self.devices.add_platform(platform, record.priority, record):
            warn(message, PluginLoadWarning)
        if library.kernel_init is not None:  # its device type is registered: now its kernels
            from ..kernels.registry import register_kernels

            register_kernels(platform, {p.device_type for p in self.platforms.all()})
        self._load_profiler(library, record)
        if library.graph_init is not None:
            self._init_graph(library, record, platform.device_type)
        return platform

    def _load_without_device(self, library: PluginLibrary, record: PluginRecord) -> None:
        """A library with no SE_InitPlugin, loaded as TensorFlow loads it: its kernels serve
        the device types they name ("CPU" included), its graph optimizer and its profiler
        are registered. It is loaded when one of them is; a library with nothing but a
        profiler that fails is skipped with the profiler's reason."""
        if library.kernel_init is not None:
            from ..kernels.registry import register_kernels

            register_kernels(library, {p.device_type for p in self.platforms.all()})
        if library.graph_init is not None:
            self._init_graph(library, record, None)
        if library.profiler_init is not None:
            self._load_profiler(library, record)
        if library.kernel_init is not None or record.graph_optimizer is not None \
                or record.profiler_type is not None:
            record.status = "loaded"
        elif record.profiler_reason:
            record.step, _, record.reason = record.profiler_reason.partition(": ")
        else:
            record.step, record.reason = "graph optimizer", record.graph_optimizer_error

    def _load_profiler(self, library: PluginLibrary, record: PluginRecord) -> None:
        """Calls the library's TF_InitProfiler; a profiler that fails is skipped with a
        warning and the library's devices stay usable."""
        from ..plugin.profiler import ProfilerLoadError, load_profiler

        try:
            profiler = load_profiler(library.path, library.profiler_init)
        except ProfilerLoadError as exc:
            record.profiler_reason = f"{exc.step}: {exc.reason}"
            advice = _ADVICE[exc.step]
            warn(
                f"pluggable: plugin {record.path} ({record.source}): {exc.step} failed: "
                f"{exc.reason}. {advice}. Its profiler is left out of profiles; its devices "
                f"still work. `python -m pluggable plugins` lists every plugin and its status",
                PluginLoadWarning)
            return
        if profiler is not None:
            record.profiler_type = profiler.device_type
            self.profilers.append(profiler)

    def _init_graph(self, library: PluginLibrary, record: PluginRecord,
                    device_type: Optional[str]) -> None:
        """Calls and validates TF_InitGraph (``device_type``: the plugin's own, None for a
        library without a device); a refusal is a warning, not a failed load."""
        from ..plugin.graph_optimizers import init_graph
        from ..plugin.validation import ValidationError

        try:
            record.graph_optimizer = init_graph(library.graph_init, library.path, device_type)
        except ValidationError as exc:
            record.graph_optimizer_error = str(exc)
            warn(f"pluggable: plugin {record.path}: its graph optimizer is refused: "
                 f"{exc}. The plugin's devices and kernels are usable; pluggable runs "
                 f"no graphs, so the optimizer would not run here anyway",
                 PluginLoadWarning)

    def _fail(self, record: PluginRecord, key, step: str, reason: str,
              explicit: bool) -> None:
        # Every reason carries plugin text (a status message, a library name the loader could
        # not find, the probe child's output): escaped here, once for every route. Reasons
        # already made safe pass unchanged (a cut one is within the larger limit).
        step = safe_text(step, 200)
        reason = safe_text(reason, 4 * limits.MAX_MESSAGE_CHARS)
        record.status, record.step, record.reason = "skipped", step, reason
        if key is None:
            self.records.append(record)
        # "device creation 3" (the probe names the device) has the advice of "device creation".
        advice = _ADVICE.get(" ".join(step.split(" ")[:2]) if step.startswith("device creation")
                             else step, "")
        message = f"cannot load plugin {record.path}: {step} failed: {reason}"
        if advice:
            message += f" ({advice})"
        error = PluginLoadError(message, path=record.path, step=step, reason=reason)
        if key is not None:
            self._errors[key] = error
        if explicit:
            raise error
        warn(
            f"pluggable: skipped plugin {record.path} ({record.source}): {step} failed: "
            f"{reason}. {advice + '. ' if advice else ''}To silence this, remove the file or "
            f"set {DISABLE_VARIABLE}=1 and load plugins with pluggable.load_plugin(); "
            f"`python -m pluggable plugins` lists every plugin and its status",
            PluginLoadWarning)
        return None

    def shutdown(self) -> None:
        """Closes every device and executor, so no plugin thread outlives the interpreter."""
        with self._lock:
            from ..kernels import registry as kernels  # kernel instances may hold device memory: first

            kernels.close_all()
            profilers, self.profilers = self.profilers, []
            for profiler in profilers:
                try:
                    profiler.destroy()
                except Exception:  # at exit nothing can be reported usefully
                    pass
            self.devices.close_all()
            for platform in self.platforms.all():
                for executor in platform.executors:
                    try:  # bounded: a plugin that never finishes cannot hang the exit
                        executor.close(limits.exit_timeout())
                    except Exception:  # at exit nothing can be reported usefully
                        pass


_manager: Optional[PluginManager] = None
_manager_lock = threading.Lock()


def manager() -> PluginManager:
    """The process's plugin manager, created on first use (discovery runs on first need)."""
    global _manager
    if _manager is None:
        with _manager_lock:
            if _manager is None:
                _manager = PluginManager()
                atexit.register(_manager.shutdown)
    return _manager


def load_plugin(path, priority: Optional[int] = None,
                isolate: Optional[bool] = None) -> Optional[Platform]:
    """Loads the plugin at ``path`` (or returns its platform if it is loaded already).

    ``priority`` decides between plugins of the same device type (higher wins; default: what
    the plugin declares, else 0). The plugin is probed in a child process first
    (`pluggable.plugin.probe`), as discovered plugins are, so that a plugin that crashes,
    exits or hangs while loading raises `PluginLoadError` instead of taking this process
    down; the verdict is cached per build of the file and its dependencies, so a second load
    costs no child. ``isolate=False`` (or ``PLUGGABLE_PROBE=0``) loads it directly, with no
    probe; ``isolate=True`` probes even when ``PLUGGABLE_PROBE=0``. Raises `PluginLoadError`
    naming the step that failed. A library with a profiler and no device returns None; a profiler
    that fails its checks is a `PluginLoadWarning` (steps "profiler init", "profiler
    validation"), not an error.
    """
    return manager().load_plugin(path, priority, isolate)


def get_platform(name: str) -> Platform:
    """The loaded platform named ``name`` (TensorFlow's subdevice type, e.g. "REF_XPU")."""
    m = manager()
    m.ensure_discovered()
    return m.platforms.get(name)


def get_device(name: str) -> "PluggableDevice":
    """The device ``name`` ("XPU:0", "/device:XPU:0", "xpu"), created on first use."""
    m = manager()
    m.ensure_discovered()
    return m.devices.get(name)
