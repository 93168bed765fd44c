"""Entry points of one group, read straight from the installed distributions' metadata files.

`importlib.metadata` answers the same question but costs 30-50 ms to import on this project's
machine (it pulls in email, zipfile, pathlib, csv and more), which is most of what plugin
discovery would add to a process's start. Plugin discovery only needs one thing: the
``[group]`` section of every ``entry_points.txt`` in a ``*.dist-info`` or ``*.egg-info``
directory on ``sys.path``. This module reads exactly that, with the rules of
`importlib.metadata`: ``sys.path`` order, the first distribution of a (normalised) name wins,
and an entry point's value is ``module[:attr.attr] [extras]``.

A ``sys.path`` entry that is a file (a zip or egg archive) holds metadata this reader does not
open; for such paths the caller falls back to `importlib.metadata` (`needs_importlib`).
"""
from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing's constant, without importing typing at start-up
if TYPE_CHECKING:
    from typing import Iterable, List, Optional

_METADATA_SUFFIXES = (".dist-info", ".egg-info")


class EntryPoint:
    """One ``name = value`` line of an ``entry_points.txt`` group (the attributes and `load`
    of `importlib.metadata.EntryPoint` that discovery uses)."""

    __slots__ = ("name", "value", "group")

    def __init__(self, name: str, value: str, group: str):
        self.name = name
        self.value = value
        self.group = group

    def load(self):
        """Imports the module the value names and returns the attribute it names."""
        import importlib

        target = self.value.split("[", 1)[0].strip()  # drop "[extras]"
        module_name, _, attrs = target.partition(":")
        obj = importlib.import_module(module_name.strip())
        for attr in filter(None, attrs.strip().split(".")):
            obj = getattr(obj, attr)
        return obj

    def __repr__(self) -> str:
        return f"EntryPoint(name={self.name!r}, value={self.value!r}, group={self.group!r})"


def _normalised(distribution_dir: str) -> str:
    """``My_Plugin-1.0.dist-info`` -> ``my_plugin`` (PEP 503 names, as importlib compares)."""
    name = distribution_dir.rsplit(".", 1)[0].split("-", 1)[0]
    out, last_sep = [], False
    for ch in name.lower():
        sep = ch in "-_."
        if not (sep and last_sep):
            out.append("_" if sep else ch)
        last_sep = sep
    return "".join(out)


def parse_group(text: str, group: str) -> List[EntryPoint]:
    """The entry points of ``[group]`` in the text of an ``entry_points.txt`` file."""
    points: List[EntryPoint] = []
    inside = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            inside = line[1:-1].strip() == group
            continue
        if inside and "=" in line:
            name, _, value = line.partition("=")
            points.append(EntryPoint(name.strip(), value.strip(), group))
    return points


def needs_importlib(paths: Optional[Iterable[str]] = None) -> bool:
    """True when some ``sys.path`` entry is an archive, whose metadata only importlib reads."""
    return any(p and os.path.isfile(p) for p in (sys.path if paths is None else paths))


def entry_points(group: str, paths: Optional[Iterable[str]] = None) -> List[EntryPoint]:
    """Every entry point of ``group`` declared by a distribution installed on ``paths``
    (``sys.path`` by default), in path order, one distribution per name.

    What the last process read is remembered in the cache directory with what it read it
    from: the modification time of each path directory (a distribution installed or removed
    changes it), of each entry_points.txt (edited or removed) and of the metadata directory
    of each distribution without one (an entry_points.txt added changes it). When none changed the scan is
    skipped: a ``stat`` of each instead of reading a directory of hundreds of entries and
    opening every distribution's metadata."""
    from . import cache_files

    paths = list(sys.path if paths is None else paths)
    cache_file = _cache_file(group, paths)
    try:
        with open(cache_file, encoding="utf-8") as f:
            stored = cache_files.json_loads(f.read())
        if stored.get("version") == _CACHE_VERSION and _unchanged(stored["stamps"]):
            return [EntryPoint(name, value, group) for name, value in stored["points"]]
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        pass  # absent, stale or unreadable: read the metadata
    stamps: List[list] = []
    points = _scan(group, paths, stamps)
    if not _recent(stamps):
        import json

        cache_files.store(cache_file, json.dumps(
            {"version": _CACHE_VERSION, "stamps": stamps,
             "points": [[p.name, p.value] for p in points]}))
    return points


_CACHE_VERSION = 1


def _cache_file(group: str, paths: List[str]) -> str:
    from ..base import limits
    from . import cache_files

    key = "\0".join([group, os.getcwd() if "" in paths else "", *paths])
    return os.path.join(limits.cache_directory(), "entry_points",
                        f"{cache_files.fnv_name(key)}.json")


def _mtime(path: str) -> Optional[int]:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def _unchanged(stamps: List[list]) -> bool:
    """Whether every file and directory the stored scan read has the modification time (or
    absence) it had then."""
    return all(_mtime(path) == mtime for path, mtime in stamps)


def _recent(stamps: List[list]) -> bool:
    """Whether something the scan read changed within the last two seconds: a file system
    whose times are coarser could change it again without a new time, so the scan is not
    remembered."""
    import time

    now = time.time_ns()
    return any(mtime is not None and now - mtime < 2_000_000_000 for _, mtime in stamps)


def _scan(group: str, paths: List[str], stamps: List[list]) -> List[EntryPoint]:
    """The entry points, read from the metadata; ``stamps`` gets (path, modification time or
    None) of every directory and file the result depends on."""
    seen = set()
    points: List[EntryPoint] = []
    for entry in paths:
        directory = entry or os.curdir
        stamps.append([os.path.abspath(directory), _mtime(directory)])
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for name in names:
            if not name.endswith(_METADATA_SUFFIXES):
                continue
            key = _normalised(name)
            if key in seen:
                continue
            distribution = os.path.join(directory, name)
            path = os.path.join(distribution, "entry_points.txt")
            try:
                with open(path, "rb") as f:  # binary: no text layer to set up per file
                    text = f.read().decode("utf-8", "replace")
                    mtime = os.fstat(f.fileno()).st_mtime_ns
            except OSError:  # none: one made later changes the distribution's directory
                stamps.append([os.path.abspath(distribution), _mtime(distribution)])
                if os.path.isdir(distribution):
                    seen.add(key)
                continue
            stamps.append([os.path.abspath(path), mtime])  # edited or removed: it changes
            seen.add(key)
            points.extend(parse_group(text, group))
    return points
