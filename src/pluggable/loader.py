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

Before ``dlopen`` every candidate is resolved to its absolute real path (what is loaded and
listed, with the link it was found through) and checked ("file check"): relative entries of
``PLUGGABLE_PLUGIN_PATH``, dangling links, files that are not regular, world-writable files
or directories and files of another user are refused (`limits.unsafe_plugins_allowed` lets
the last two through), as is a file built for another machine. A discovered plugin is then
probed in a child process (`probe`) before its first in-process load.
"""
from __future__ import annotations

import atexit
import ctypes
import os
import site
import stat
import sys
import sysconfig
import threading
import warnings

from . import _native  # noqa: F401  (loads the runtime library, RTLD_GLOBAL, before plugins)
from . import limits
from ._record import record
from .errors import PluggableError, PluginLoadError, PluginLoadWarning
from .platform import Platform, PlatformRegistry, PluginCallError

TYPE_CHECKING = False  # typing's constant, without importing typing at start-up
if TYPE_CHECKING:
    from typing import Dict, Iterator, List, Optional, Tuple
    from .plugin_profiler import PluginProfiler

PLUGIN_DIRECTORY = "tensorflow-plugins"
ENTRY_POINT_GROUP = "pluggable.plugins"
PATH_VARIABLE = "PLUGGABLE_PLUGIN_PATH"
DISABLE_VARIABLE = "PLUGGABLE_DISABLE_AUTOLOAD"
INIT_SYMBOLS = ("SE_InitPlugin", "SE_InitializePlugin")
_SHARED_LIBRARY_SUFFIXES = (".so", ".dylib", ".dll")

_InitFn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)

_ADVICE = {
    "file check": "see the README's Reliability section; "
                  f"{limits.ALLOW_UNSAFE_VARIABLE}=1 allows files other users can change",
    "dlopen": "check that the file is a shared library built for this machine and that the "
              "libraries it needs are installed (`ldd` lists them)",
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
        self.kernel_init = self._symbol("TF_InitKernel")
        self.profiler_init = self._symbol("TF_InitProfiler")
        # A library may provide only a profiler, as TensorFlow allows.
        if self.init_fn is None and self.profiler_init is None:
            raise PluginCallError(
                "symbol lookup", f"the library exports neither {INIT_SYMBOLS[0]} nor "
                                 f"{INIT_SYMBOLS[1]} (nor TF_InitProfiler)")
        self.graph_init = self._symbol("TF_InitGraph")

    def _symbol(self, name: str) -> Optional[int]:
        try:
            return ctypes.cast(getattr(self.cdll, name), ctypes.c_void_p).value
        except AttributeError:
            return None


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
    # Links (dangling ones too) and other non-directories are candidates: the file check
    # reports what is wrong with them instead of leaving them out silently.
    return [os.path.join(directory, n) for n in names
            if n.endswith(_SHARED_LIBRARY_SUFFIXES)
            and not os.path.isdir(os.path.join(directory, n))]


def check_file(path: str) -> Tuple[str, os.stat_result]:
    """The absolute real path of the plugin file ``path`` and its `os.stat`; raises
    `PluginCallError` ("file check") naming what makes it unsafe or unloadable. Nothing is
    opened before the file is known to be regular (a FIFO would block ``open``)."""
    absolute = os.path.abspath(path)
    real = os.path.realpath(absolute)
    try:
        info = os.stat(real)
    except OSError as exc:
        if os.path.islink(absolute):
            raise PluginCallError("file check", f"it is a dangling link (to "
                                                f"{os.readlink(absolute)!r})") from None
        raise PluginCallError("file check", f"cannot read the file: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        kind = ("a FIFO" if stat.S_ISFIFO(info.st_mode) else "a directory"
                if stat.S_ISDIR(info.st_mode) else "a socket" if stat.S_ISSOCK(info.st_mode)
                else "a device" if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode)
                else "not a regular file")
        raise PluginCallError("file check", f"{real} is {kind}, not a shared library file")
    if not limits.unsafe_plugins_allowed():
        _check_ownership(real, info)
    from .elf import check_compatible

    try:
        problem = check_compatible(real)
    except OSError as exc:
        raise PluginCallError("file check", f"cannot read the file: {exc.strerror}") from None
    if problem is not None:
        raise PluginCallError("file check", problem)
    return real, info


def _check_ownership(real: str, info: os.stat_result) -> None:
    me = os.geteuid() if hasattr(os, "geteuid") else 0
    if info.st_uid not in (0, me):
        raise PluginCallError(
            "file check", f"{real} belongs to user {info.st_uid}, neither you ({me}) nor root; "
                          f"another user could change what this process runs")
    if info.st_mode & stat.S_IWOTH:
        raise PluginCallError(
            "file check", f"{real} is world-writable (mode {stat.filemode(info.st_mode)}); "
                          f"anyone could change what this process runs (chmod o-w it)")
    directory = os.path.dirname(real)
    try:
        dir_info = os.stat(directory)
    except OSError:
        return
    if dir_info.st_mode & stat.S_IWOTH and not dir_info.st_mode & stat.S_ISVTX:
        raise PluginCallError(
            "file check", f"its directory {directory} is world-writable without the sticky "
                          f"bit; anyone could replace the plugin (chmod o-w the directory)")


def discover_candidates() -> Iterator[Tuple[str, str]]:
    """``(path, source)`` for every plugin file the three discovery routes name, in order."""
    for directory in _site_directories():
        for path in _libraries_in(os.path.join(directory, PLUGIN_DIRECTORY)):
            yield path, "site-packages"
    for entry in os.environ.get(PATH_VARIABLE, "").split(os.pathsep):
        if not entry:
            continue
        if not os.path.isabs(entry):
            warnings.warn(
                f"pluggable: {PATH_VARIABLE} entry {entry!r} is relative and is ignored: "
                f"relative entries would load whatever the working directory holds. Write "
                f"it as an absolute path, e.g. {os.path.abspath(entry)!r}",
                PluginLoadWarning, stacklevel=4)
            continue
        if os.path.isdir(entry):
            for path in _libraries_in(entry):
                yield path, PATH_VARIABLE
        else:
            yield entry, PATH_VARIABLE
    yield from _entry_point_candidates()


def _entry_point_candidates() -> Iterator[Tuple[str, str]]:
    from . import _entry_points

    if _entry_points.needs_importlib():  # an archive on sys.path: only importlib reads it
        from importlib import metadata

        try:
            points = metadata.entry_points(group=ENTRY_POINT_GROUP)
        except TypeError:  # Python < 3.10
            points = metadata.entry_points().get(ENTRY_POINT_GROUP, [])
    else:  # the default: read entry_points.txt directly, without importing importlib.metadata
        points = _entry_points.entry_points(ENTRY_POINT_GROUP)
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
                    isolate: bool = False) -> Platform:
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
            from . import probe

            result = probe.verdict(real, report=False)
            if not result.ok:
                return self._fail(record, key, result.step, result.reason, explicit)
            record.probe = "passed (cached)" if result.cached else "passed"
        try:
            library = PluginLibrary(real)
            record.provides_kernels = library.kernel_init is not None
            record.provides_profiler = library.profiler_init is not None
            if library.init_fn is None:  # a profiler and no device
                self._load_profiler(library, record)
                if record.profiler_type is not None:
                    record.status = "loaded"
                else:
                    record.step, _, record.reason = record.profiler_reason.partition(": ")
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
            warnings.warn(message, PluginLoadWarning, stacklevel=4)
        if library.kernel_init is not None:  # its device type is registered: now its kernels
            from .kernels import load_kernels

            load_kernels(platform, {p.device_type for p in self.platforms.all()})
        self._load_profiler(library, record)
        if library.graph_init is not None:
            self._init_graph(library, record, platform.device_type)
        return platform

    def _load_profiler(self, library: PluginLibrary, record: PluginRecord) -> None:
        """Calls the library's TF_InitProfiler; a profiler that fails is skipped with a
        warning and the library's devices stay usable."""
        from .plugin_profiler import ProfilerLoadError, load_profiler

        try:
            profiler = load_profiler(library.path, library.profiler_init)
        except ProfilerLoadError as exc:
            record.profiler_reason = f"{exc.step}: {exc.reason}"
            advice = _ADVICE[exc.step]
            warnings.warn(
                f"pluggable: plugin {record.path} ({record.source}): {exc.step} failed: "
                f"{exc.reason}. {advice}. Its profiler is left out of profiles; its devices "
                f"still work. `python -m pluggable plugins` lists every plugin and its status",
                PluginLoadWarning, stacklevel=5)
            return
        if profiler is not None:
            record.profiler_type = profiler.device_type
            self.profilers.append(profiler)

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
                isolate: bool = False) -> Optional[Platform]:
    """Loads the plugin at ``path`` (or returns its platform if it is loaded already).

    ``priority`` decides between plugins of the same device type (higher wins; default: what
    the plugin declares, else 0). ``isolate=True`` probes the plugin in a child process first
    (`pluggable.probe`), so that a plugin that crashes, exits or hangs while loading raises
    `PluginLoadError` instead of taking this process down. Raises `PluginLoadError` naming
    the step that failed. A library with a profiler and no device returns None; a profiler
    that fails its checks is a `PluginLoadWarning` (steps "profiler init", "profiler
    validation"), not an error.
    """
    return manager().load_plugin(path, priority, isolate)


def get_platform(name: str) -> Platform:
    """The loaded platform named ``name`` (TensorFlow's subdevice type, e.g. "REF_XPU")."""
    m = manager()
    m.ensure_discovered()
    return m.platforms.get(name)
