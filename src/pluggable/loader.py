"""Finding and loading plugins.

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
"""
from __future__ import annotations

import atexit
import ctypes
import dataclasses
import os
import site
import sys
import sysconfig
import threading
import warnings
from typing import Dict, Iterator, List, Optional, Tuple

from . import _native  # noqa: F401  (loads the runtime library, RTLD_GLOBAL, before plugins)
from .errors import PluggableError, PluginLoadError, PluginLoadWarning
from .platform import Platform, PlatformRegistry, PluginCallError

PLUGIN_DIRECTORY = "tensorflow-plugins"
ENTRY_POINT_GROUP = "pluggable.plugins"
PATH_VARIABLE = "PLUGGABLE_PLUGIN_PATH"
DISABLE_VARIABLE = "PLUGGABLE_DISABLE_AUTOLOAD"
INIT_SYMBOLS = ("SE_InitPlugin", "SE_InitializePlugin")
_SHARED_LIBRARY_SUFFIXES = (".so", ".dylib", ".dll")

_InitFn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)

_ADVICE = {
    "dlopen": "check that the file is a shared library built for this machine and that the "
              "libraries it needs are installed (`ldd` lists them)",
    "symbol lookup": "a StreamExecutor plugin must export SE_InitPlugin (or "
                     "SE_InitializePlugin) with C linkage",
    "init": "the plugin's own message above says why it refused to start",
    "validation": "the plugin does not follow the C API; rebuild it against "
                  "pluggable.get_include() and see include/ABI.md",
    "device creation": "the plugin failed to create its devices; its message above says why",
    "registration": "another loaded plugin already provides it; remove one of the two",
}


@dataclasses.dataclass
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
    # TF_InitGraph (grappler.h): what it registered, or why it was refused
    graph_optimizer: Optional[object] = None
    graph_optimizer_error: str = ""


class PluginLibrary:
    """A plugin's shared library, opened and with its entry points looked up."""

    def __init__(self, path: str):
        self.path = path
        try:
            self.cdll = ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
        except OSError as exc:
            raise PluginCallError("dlopen", str(exc)) from None
        self.init_symbol = None
        self.init_fn = None
        for symbol in INIT_SYMBOLS:
            fn = self._symbol(symbol)
            if fn is not None:
                self.init_symbol = symbol
                self.init_fn = _InitFn(fn)
                break
        if self.init_fn is None:
            raise PluginCallError(
                "symbol lookup", f"the library exports neither {INIT_SYMBOLS[0]} nor "
                                 f"{INIT_SYMBOLS[1]}")
        self.kernel_init = self._symbol("TF_InitKernel")
        self.profiler_init = self._symbol("TF_InitProfiler")
        self.graph_init = self._symbol("TF_InitGraph")

    def _symbol(self, name: str) -> Optional[int]:
        try:
            return ctypes.cast(getattr(self.cdll, name), ctypes.c_void_p).value
        except AttributeError:
            return None


def _file_key(path: str) -> Tuple[int, int]:
    info = os.stat(path)
    return (info.st_dev, info.st_ino)


def _site_directories() -> List[str]:
    dirs: List[str] = []
    try:
        dirs.extend(site.getsitepackages())
    except AttributeError:  # some virtualenv versions lack it
        pass
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    paths = sysconfig.get_paths()
    dirs.extend(paths[k] for k in ("purelib", "platlib") if k in paths)
    # Beside the package itself: site-packages for an install, src/ for an editable one.
    dirs.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    dirs.extend(p for p in sys.path if p and os.path.basename(p) == "site-packages")
    seen, out = set(), []
    for d in dirs:
        if d not in seen:
            seen.add(d)
            out.append(d)
    return out


def _libraries_in(directory: str) -> List[str]:
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    return [os.path.join(directory, n) for n in names
            if n.endswith(_SHARED_LIBRARY_SUFFIXES) and os.path.isfile(os.path.join(directory, n))]


def discover_candidates() -> Iterator[Tuple[str, str]]:
    """``(path, source)`` for every plugin file the three discovery routes name, in order."""
    for directory in _site_directories():
        for path in _libraries_in(os.path.join(directory, PLUGIN_DIRECTORY)):
            yield path, "site-packages"
    for entry in os.environ.get(PATH_VARIABLE, "").split(os.pathsep):
        if not entry:
            continue
        if os.path.isdir(entry):
            for path in _libraries_in(entry):
                yield path, PATH_VARIABLE
        else:
            yield entry, PATH_VARIABLE
    yield from _entry_point_candidates()


def _entry_point_candidates() -> Iterator[Tuple[str, str]]:
    from importlib import metadata

    try:
        points = metadata.entry_points(group=ENTRY_POINT_GROUP)
    except TypeError:  # Python < 3.10
        points = metadata.entry_points().get(ENTRY_POINT_GROUP, [])
    for point in points:
        source = f"entry point {point.name} ({point.value})"
        try:
            value = point.load()
            if callable(value):
                value = value()
            yield os.fspath(value), source
        except Exception as exc:
            warnings.warn(
                f"pluggable: the entry point {point.name!r} of group {ENTRY_POINT_GROUP!r} "
                f"({point.value}) could not give a plugin path: {type(exc).__name__}: {exc}. "
                f"Fix or uninstall the package that declares it, or set {DISABLE_VARIABLE}=1",
                PluginLoadWarning, stacklevel=4)


class PluginManager:
    """Everything loaded: plugin records, platforms and device types. One per process."""

    def __init__(self):
        from .devices import DeviceRegistry

        self._lock = threading.RLock()
        self._discovered = False
        self._discovering = False
        self.records: List[PluginRecord] = []
        self._by_key: Dict[Tuple[int, int], PluginRecord] = {}
        self._errors: Dict[Tuple[int, int], PluginLoadError] = {}
        self._platform_by_key: Dict[Tuple[int, int], Platform] = {}
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

    def load_plugin(self, path: str, priority: Optional[int] = None) -> Platform:
        self.ensure_discovered()
        with self._lock:
            return self._load(os.fspath(path), "load_plugin", priority, explicit=True)

    def _load(self, path: str, source: str, priority: Optional[int],
              explicit: bool) -> Optional[Platform]:
        record = PluginRecord(path=path, source=source)
        try:
            key = _file_key(path)
        except OSError as exc:
            return self._fail(record, None, "dlopen", f"cannot read the file: {exc.strerror}",
                              explicit)
        if key in self._by_key:  # the same file by another route
            if key in self._platform_by_key:
                return self._platform_by_key[key]
            if explicit:
                raise self._errors[key]
            return None
        self._by_key[key] = record
        self.records.append(record)
        try:
            library = PluginLibrary(path)
            record.provides_kernels = library.kernel_init is not None
            record.provides_profiler = library.profiler_init is not None
            platform = Platform(library, library.init_fn, library.init_symbol)
            record.platform_name = platform.name
            record.device_type = platform.device_type
            record.api_version = ".".join(map(str, platform.api_version))
            record.plugin_version = platform.plugin_version
            record.device_count = platform.device_count
            record.priority = platform.default_priority if priority is None else int(priority)
            try:
                self.platforms.check_available(platform)
                platform.create_executors()
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
            warnings.warn(message, PluginLoadWarning, stacklevel=4)
        if library.kernel_init is not None:  # its device type is registered: now its kernels
            from .kernels import load_kernels

            load_kernels(platform, {p.device_type for p in self.platforms.all()})
        if library.graph_init is not None:
            self._init_graph(library, record, platform.device_type)
        return platform

    def _init_graph(self, library: PluginLibrary, record: PluginRecord,
                    device_type: str) -> None:
        """Calls and validates TF_InitGraph; a refusal is a warning, not a failed load."""
        from .graph_optimizers import init_graph
        from .validation import ValidationError

        try:
            record.graph_optimizer = init_graph(library.graph_init, library.path, device_type)
        except ValidationError as exc:
            record.graph_optimizer_error = str(exc)
            warnings.warn(f"pluggable: plugin {record.path}: its graph optimizer is refused: "
                          f"{exc}. The plugin's devices and kernels are usable; pluggable runs "
                          f"no graphs, so the optimizer would not run here anyway",
                          PluginLoadWarning, stacklevel=5)

    def _fail(self, record: PluginRecord, key, step: str, reason: str,
              explicit: bool) -> None:
        record.status, record.step, record.reason = "skipped", step, reason
        if key is None:
            self.records.append(record)
        advice = _ADVICE.get(step, "")
        message = f"cannot load plugin {record.path}: {step} failed: {reason}"
        if advice:
            message += f" ({advice})"
        error = PluginLoadError(message, path=record.path, step=step, reason=reason)
        if key is not None:
            self._errors[key] = error
        if explicit:
            raise error
        warnings.warn(
            f"pluggable: skipped plugin {record.path} ({record.source}): {step} failed: "
            f"{reason}. {advice + '. ' if advice else ''}To silence this, remove the file or "
            f"set {DISABLE_VARIABLE}=1 and load plugins with pluggable.load_plugin(); "
            f"`python -m pluggable plugins` lists every plugin and its status",
            PluginLoadWarning, stacklevel=5)
        return None

    def shutdown(self) -> None:
        """Closes every device and executor, so no plugin thread outlives the interpreter."""
        with self._lock:
            from . import kernels  # kernel instances may hold device memory: first

            kernels.close_all()
            self.devices.close_all()
            for platform in self.platforms.all():
                for executor in platform.executors:
                    try:
                        executor.close()
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


def load_plugin(path, priority: Optional[int] = None) -> Platform:
    """Loads the plugin at ``path`` (or returns its platform if it is loaded already).

    ``priority`` decides between plugins of the same device type (higher wins; default: what
    the plugin declares, else 0). Raises `PluginLoadError` naming the step that failed.
    """
    return manager().load_plugin(path, priority)


def get_platform(name: str) -> Platform:
    """The loaded platform named ``name`` (TensorFlow's subdevice type, e.g. "REF_XPU")."""
    m = manager()
    m.ensure_discovered()
    return m.platforms.get(name)
