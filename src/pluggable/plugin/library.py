"""A plugin's shared library: checking the file before it is opened, opening it, and
looking up its entry points (``SE_InitPlugin`` or ``SE_InitializePlugin``, ``TF_InitKernel``,
``TF_InitProfiler``, ``TF_InitGraph``); a library that exports any one of them is a plugin.

Before ``dlopen`` every candidate is resolved to its absolute real path and checked ("file
check"): dangling links, files that are not regular, world-writable files or directories and
files of another user are refused, and so are links on the way to the file that sit in such a
directory or belong to another user (`limits.unsafe_plugins_allowed` lets these through), as
is a file built for another machine.
"""
from __future__ import annotations

import ctypes
import os
import stat

from ..base import limits, plugin_log
from . import dependencies, elf

TYPE_CHECKING = False  # typing's constant, without importing typing at start-up
if TYPE_CHECKING:
    from typing import List, Optional, Tuple

INIT_SYMBOLS = ("SE_InitPlugin", "SE_InitializePlugin")
ENTRY_POINTS = (*INIT_SYMBOLS, "TF_InitKernel", "TF_InitGraph", "TF_InitProfiler")

_InitFn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)


class PluginCallError(Exception):
    """A plugin call failed during loading; carries the step for the load error."""

    def __init__(self, step: str, reason: str):
        super().__init__(reason)
        self.step = step
        self.reason = reason


class PluginLibrary:
    """A plugin's shared library, opened and with its entry points looked up."""

    def __init__(self, path: str):
        self.path = path
        tree = dependencies.tree_of(path)
        if tree.tensorflow:
            raise PluginCallError("dependencies", refusal_of_tensorflow(tree))
        try:
            self.cdll = ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
        except OSError as exc:
            reason = str(exc)
            if tree.missing:
                reason += (f"; {len(tree.missing)} of the libraries it needs are missing: "
                           f"{tree.describe_missing()}. Install them or add their folders to "
                           f"LD_LIBRARY_PATH")
            unprovided = unprovided_symbols(tree)
            if unprovided:
                reason += (f"; its tree uses {len(unprovided)} C API function(s) the host "
                           f"runtime does not provide: "
                           f"{dependencies.describe_missing_symbols(unprovided)}")
            raise PluginCallError("dlopen", reason) from None
        if _logs(tree):
            plugin_log.start()
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
        self.graph_init = self._symbol("TF_InitGraph")
        # Any one entry point makes a plugin, as TensorFlow's load_pluggable_device_library
        # has it: kernel-only, graph-only and profiler-only libraries are plugins too.
        if self.init_fn is None and self.kernel_init is None and self.profiler_init is None \
                and self.graph_init is None:
            raise PluginCallError(
                "symbol lookup", f"the library exports none of the plugin entry points "
                                 f"({', '.join(ENTRY_POINTS)})")

    def _symbol(self, name: str) -> Optional[int]:
        try:
            return ctypes.cast(getattr(self.cdll, name), ctypes.c_void_p).value
        except AttributeError:
            return None



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
        _check_links(absolute)
        _check_ownership(real, info)
    from .elf import check_compatible

    try:
        problem = check_compatible(real)
    except OSError as exc:
        raise PluginCallError("file check", f"cannot read the file: {exc.strerror}") from None
    if problem is not None:
        raise PluginCallError("file check", problem)
    return real, info


_MAX_LINKS = 40  # as the kernel's own limit on links followed in one path


def _check_links(path: str) -> None:
    """Each symbolic link on the way from ``path`` to the file obeys the rules of the file
    itself: a link that another user owns, or that sits in a directory anyone may write to,
    could be pointed elsewhere by someone else."""
    for _ in range(_MAX_LINKS):
        try:
            info = os.lstat(path)
        except OSError:
            return
        if not stat.S_ISLNK(info.st_mode):
            return
        _check_owner(path, info, "the link")
        _check_directory(os.path.dirname(path), "the link")
        path = os.path.join(os.path.dirname(path), os.readlink(path))


def _check_owner(path: str, info: os.stat_result, what: str) -> None:
    me = os.geteuid() if hasattr(os, "geteuid") else 0
    if info.st_uid not in (0, me):
        raise PluginCallError(
            "file check", f"{what} {path} belongs to user {info.st_uid}, neither you ({me}) "
                          f"nor root; another user could change what this process runs")


def _check_directory(directory: str, what: str) -> None:
    try:
        dir_info = os.stat(directory)
    except OSError:
        return
    if dir_info.st_mode & stat.S_IWOTH and not dir_info.st_mode & stat.S_ISVTX:
        raise PluginCallError(
            "file check", f"the directory {directory} of {what} is world-writable without the "
                          f"sticky bit; anyone could replace {what} (chmod o-w the directory)")


def _check_ownership(real: str, info: os.stat_result) -> None:
    _check_owner(real, info, "the file")
    if info.st_mode & stat.S_IWOTH:
        raise PluginCallError(
            "file check", f"{real} is world-writable (mode {stat.filemode(info.st_mode)}); "
                          f"anyone could change what this process runs (chmod o-w it)")
    _check_directory(os.path.dirname(real), "the plugin")


def unprovided_symbols(tree: "dependencies.Tree") -> List[str]:
    """The C API functions the libraries of ``tree`` use that neither the tree nor the host's
    runtime library defines."""
    from ..base import native

    return sorted(name for name in tree.missing_symbols(())
                  if not hasattr(native.lib, name))


def refusal_of_tensorflow(tree: "dependencies.Tree") -> str:
    """Why a plugin that links TensorFlow's own libraries is not loaded, and what to do;
    every library of its tree that is missing besides."""
    missing = (f". Besides, {len(tree.missing)} of the libraries its tree needs "
               f"{'are' if len(tree.missing) > 1 else 'is'} missing here: "
               f"{tree.describe_missing()}" if tree.missing else "")
    return (f"{dependencies.tensorflow_build(tree)}. TensorFlow's libraries carry their own "
            f"implementation of the C API, so loading this plugin here would put two "
            f"implementations in one process, each handed the other's objects. Use it inside "
            f"TensorFlow, or rebuild it against pluggable.get_include() without linking "
            f"TensorFlow (its headers alone are enough){missing}")


def _logs(tree: "dependencies.Tree") -> bool:
    """Whether the plugin, or a library it brings that is not the system's, calls
    tensorflow/c/logging.h."""
    system = tuple(dependencies.system_folders())
    for lib in tree.libraries:
        if lib.path is None or (lib is not tree.libraries[0] and lib.path.startswith(system)):
            continue
        try:
            if elf.dynamic_info(lib.path, plugin_log.LOGGING_FUNCTIONS).undefined:
                return True
        except (OSError, ValueError):
            continue
    return False
