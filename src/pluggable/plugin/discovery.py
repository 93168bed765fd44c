"""Where plugins are found: ``tensorflow-plugins`` directories, ``PLUGGABLE_PLUGIN_PATH`` and
the ``pluggable.plugins`` entry-point group (the loader's docstring says in which order and
how each is treated).
"""
from __future__ import annotations

import os
import site
import sys
import sysconfig

from ..base.errors import warn
from ..base.errors import PluginLoadWarning
from ..base.limits import safe_text

TYPE_CHECKING = False  # typing's constant, without importing typing at start-up
if TYPE_CHECKING:
    from typing import Iterator, List, Tuple

PLUGIN_DIRECTORY = "tensorflow-plugins"
ENTRY_POINT_GROUP = "pluggable.plugins"
PATH_VARIABLE = "PLUGGABLE_PLUGIN_PATH"
DISABLE_VARIABLE = "PLUGGABLE_DISABLE_AUTOLOAD"
_SHARED_LIBRARY_SUFFIXES = (".so", ".dylib", ".dll")


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
    dirs.append(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
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



def discover_candidates() -> Iterator[Tuple[str, str]]:
    """``(path, source)`` for every plugin file the three discovery routes name, in order."""
    for directory in _site_directories():
        for path in _libraries_in(os.path.join(directory, PLUGIN_DIRECTORY)):
            yield path, "site-packages"
    for entry in os.environ.get(PATH_VARIABLE, "").split(os.pathsep):
        if not entry:
            continue
        if not os.path.isabs(entry):
            warn(
                f"pluggable: {PATH_VARIABLE} entry {entry!r} is relative and is ignored: "
                f"relative entries would load whatever the working directory holds. Write "
                f"it as an absolute path, e.g. {os.path.abspath(entry)!r}",
                PluginLoadWarning)
            continue
        if os.path.isdir(entry):
            for path in _libraries_in(entry):
                yield path, PATH_VARIABLE
        else:
            yield entry, PATH_VARIABLE
    yield from _entry_point_candidates()


def _entry_point_candidates() -> Iterator[Tuple[str, str]]:
    from . import entry_points as _entry_points

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
            path = os.fspath(value)
        except Exception as exc:
            warn(
                f"pluggable: the entry point {point.name!r} of group {ENTRY_POINT_GROUP!r} "
                f"({point.value}) could not give a plugin path: {type(exc).__name__}: "
                f"{safe_text(str(exc))}. "
                f"Fix or uninstall the package that declares it, or set {DISABLE_VARIABLE}=1",
                PluginLoadWarning)
            continue
        # Relative to what? The working directory changes from run to run, and a path found
        # there could load whatever that directory holds; TensorFlow's discovery only reads
        # absolute directories. The package knows where it lives: it gives the full path.
        if not os.path.isabs(path):
            warn(
                f"pluggable: the entry point {point.name!r} of group {ENTRY_POINT_GROUP!r} "
                f"({point.value}) gave the relative path {path!r}, which is ignored: it would "
                f"be looked up in the working directory. Return an absolute path, e.g. "
                f"os.path.join(os.path.dirname(__file__), {os.path.basename(path)!r})",
                PluginLoadWarning)
            continue
        yield path, source


