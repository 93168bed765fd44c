"""The bounds and time limits the host holds plugins to, and the environment variables that
change them (README, "Reliability").

Nothing here imports the rest of the package: the runtime layer, the loader and the
StreamExecutor objects all read their limits from this module.

- ``PLUGGABLE_PROBE=0`` turns off the child-process probe of discovered plugins;
  ``PLUGGABLE_PROBE_TIMEOUT`` (seconds, default 10) bounds it (`set_probe_timeout`).
- ``PLUGGABLE_DEADLINE`` (seconds, default 600; 0 turns it off) bounds every host wait on
  plugin work (`set_deadline`); past it the wait raises `DeadlineExceededError`.
- ``PLUGGABLE_EXIT_TIMEOUT`` (seconds, default 10) bounds how long interpreter exit waits for
  pending device work before it warns and leaves the rest to the operating system.
- ``PLUGGABLE_ALLOW_UNSAFE_PLUGINS=1`` loads plugin files that are world-writable, sit in a
  world-writable directory or belong to another user (skipped otherwise).
- ``PLUGGABLE_CACHE_DIR`` (default ``$XDG_CACHE_HOME/pluggable`` or ``~/.cache/pluggable``)
  holds the probe's verdicts.
"""
from __future__ import annotations

import os
import threading
from time import monotonic as _monotonic

from .errors import warn

TYPE_CHECKING = False  # typing's constant, without importing typing at start-up
if TYPE_CHECKING:
    from typing import Optional

PROBE_VARIABLE = "PLUGGABLE_PROBE"
PROBE_TIMEOUT_VARIABLE = "PLUGGABLE_PROBE_TIMEOUT"
DEADLINE_VARIABLE = "PLUGGABLE_DEADLINE"
EXIT_TIMEOUT_VARIABLE = "PLUGGABLE_EXIT_TIMEOUT"
ALLOW_UNSAFE_VARIABLE = "PLUGGABLE_ALLOW_UNSAFE_PLUGINS"
CACHE_DIR_VARIABLE = "PLUGGABLE_CACHE_DIR"

DEFAULT_PROBE_TIMEOUT = 10.0
DEFAULT_DEADLINE = 600.0
DEFAULT_EXIT_TIMEOUT = 10.0

#: More devices than this from one plugin are refused at validation.
MAX_DEVICES = 4096
#: A ``struct_size`` past this is refused: no layout of the C API comes near it.
MAX_STRUCT_SIZE = 1 << 16
#: Plugin text (status messages, names) is cut to this many characters before it is shown.
MAX_MESSAGE_CHARS = 2000

_lock = threading.Lock()
_probe_timeout: Optional[float] = None
_deadline: Optional[float] = None


def _seconds(value: object, what: str, *, allow_zero: bool) -> float:
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a number of seconds, not {value!r}") from None
    if seconds != seconds or seconds < 0 or (seconds == 0 and not allow_zero):
        raise ValueError(f"{what} must be {'0 or more' if allow_zero else 'more than 0'} "
                         f"seconds, not {value!r}")
    return seconds


def _from_environment(variable: str, default: float, allow_zero: bool) -> float:
    text = os.environ.get(variable, "").strip()
    if not text:
        return default
    try:
        return _seconds(text, variable, allow_zero=allow_zero)
    except ValueError:
        from .errors import PluggableWarning

        warn(f"pluggable: {variable}={text!r} is not a number of seconds; using the "
             f"default ({default:g} s)", PluggableWarning)
        return default


def probing_enabled() -> bool:
    return os.environ.get(PROBE_VARIABLE, "1").strip() not in ("0", "no", "off", "false")


#: A whole probe may take this many times `probe_timeout` (each step may take it once).
PROBE_TOTAL_STEPS = 10


def probe_timeout() -> float:
    """Seconds a step of a probe child may take before the child is killed (the whole probe:
    `PROBE_TOTAL_STEPS` times as long)."""
    if _probe_timeout is not None:
        return _probe_timeout
    return _from_environment(PROBE_TIMEOUT_VARIABLE, DEFAULT_PROBE_TIMEOUT, False)


def set_probe_timeout(seconds: Optional[float]) -> None:
    """Sets the probe's time limit (None: back to ``PLUGGABLE_PROBE_TIMEOUT`` or 10 s)."""
    global _probe_timeout
    with _lock:
        _probe_timeout = None if seconds is None else _seconds(
            seconds, "the probe timeout", allow_zero=False)


def deadline() -> float:
    """Seconds a host wait on plugin work may last; 0 means no limit."""
    if _deadline is not None:
        return _deadline
    return _from_environment(DEADLINE_VARIABLE, DEFAULT_DEADLINE, True)


_deadline_listeners: list = []


def on_deadline_change(listener) -> None:
    """Calls ``listener(seconds)`` now and whenever `set_deadline` changes the deadline
    (the runtime library's watchdog keeps a copy)."""
    _deadline_listeners.append(listener)
    listener(deadline())


def set_deadline(seconds: Optional[float]) -> None:
    """Sets the deadline of host waits (0: none; None: back to ``PLUGGABLE_DEADLINE``)."""
    global _deadline
    with _lock:
        _deadline = None if seconds is None else _seconds(seconds, "the deadline",
                                                          allow_zero=True)
    for listener in _deadline_listeners:
        listener(deadline())


# Plugins with a call abandoned inside them (past the deadline, or by Ctrl-C): path -> what
# got stuck. Such a plugin is never called again in the process (docs/design.md, "Bounding
# calls that can block"); each floor that holds its objects listens and refuses them.
_stuck_plugins: dict = {}
_stuck_listeners: list = []


def on_plugin_stuck(listener) -> None:
    """Calls ``listener(path, reason)`` whenever a plugin is marked stuck (`mark_plugin_stuck`),
    and now for each one marked already."""
    with _lock:
        _stuck_listeners.append(listener)
        marked = list(_stuck_plugins.items())
    for path, reason in marked:
        listener(path, reason)


def mark_plugin_stuck(path: str, reason: str) -> None:
    """Marks the plugin library ``path`` unusable for the rest of the process: ``reason``
    names the call that was abandoned inside it ("kernel 'X' (op Neg) did not return from
    its compute within the deadline of 1 s"). Only the first reason is kept."""
    with _lock:
        if path in _stuck_plugins:
            return
        _stuck_plugins[path] = reason
        listeners = list(_stuck_listeners)
    for listener in listeners:
        listener(path, reason)


def plugin_stuck(path: str) -> str:
    """Why the plugin library ``path`` is no longer called, or "" while it is usable."""
    return _stuck_plugins.get(path, "")


def unusable_message(who: str, call: str, reason: str) -> str:
    """The text of the error raised instead of calling a plugin found stuck: ``who`` names
    the plugin (and device), ``call`` what was refused, ``reason`` what got stuck."""
    return (f"{who}: {call} is refused without calling the plugin: it is unusable in this "
            f"process because {reason}, and that call was abandoned inside it (it may hold "
            f"the plugin's locks or memory). Its devices, kernels and profiler are not called "
            f"again; other plugins, devices and the CPU work as before. Restart the process to "
            f"use the plugin again")


def exit_timeout() -> float:
    return _from_environment(EXIT_TIMEOUT_VARIABLE, DEFAULT_EXIT_TIMEOUT, True)


def unsafe_plugins_allowed() -> bool:
    return os.environ.get(ALLOW_UNSAFE_VARIABLE, "").strip() not in ("", "0")


def cache_directory() -> str:
    explicit = os.environ.get(CACHE_DIR_VARIABLE)
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "pluggable")


_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# Besides the C0 and C1 controls: the line and paragraph separators, which end a line in
# some terminals and editors, and the bidirectional controls, which reorder what is shown.
_INVISIBLE = frozenset(chr(c) for c in (0x2028, 0x2029, 0x200E, 0x200F, *range(0x202A, 0x202F),
                                         *range(0x2066, 0x206A)))


def _unsafe(c: str) -> bool:
    o = ord(c)
    return o < 32 or 127 <= o < 160 or c in _INVISIBLE


def safe_text(text: str, limit: int = MAX_MESSAGE_CHARS, total: Optional[int] = None) -> str:
    """Plugin text made safe to print: control characters (terminal escape codes included),
    line separators and bidirectional controls escaped, and cut to ``limit`` characters with
    a note of how much was left out. ``total``: the length of the original when ``text`` is
    already a prefix of it. Every message of a plugin goes through here before anyone sees
    it: warnings, errors, ``doctor``, ``conformance`` and profile summaries."""
    cut = len(text) > limit or (total is not None and total > len(text))
    shown = text[:limit] if cut else text
    if not shown.isprintable() and any(map(_unsafe, shown)):  # isprintable: C's speed
        shown = "".join(_ESCAPES.get(c) or (f"\\u{ord(c):04x}" if ord(c) > 255 else
                                            f"\\x{ord(c):02x}") if _unsafe(c) else c
                        for c in shown)
    if cut:
        shown += f"... [cut: {total or len(text)} in all, {min(limit, len(text))} shown]"
    return shown


def _read_int(path: str) -> Optional[int]:
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # "max": no limit


def _cgroup_memory_left() -> Optional[int]:
    """What the process's memory cgroup (v2 or v1) still allows, or None without a limit."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            candidates = [("/sys/fs/cgroup" + path, "memory.max", "memory.current"),
                          ("/sys/fs/cgroup", "memory.max", "memory.current")]
        elif "memory" in controllers.split(","):
            candidates = [("/sys/fs/cgroup/memory" + path, "memory.limit_in_bytes",
                           "memory.usage_in_bytes"),
                          ("/sys/fs/cgroup/memory", "memory.limit_in_bytes",
                           "memory.usage_in_bytes")]
        else:
            continue
        for directory, limit_file, usage_file in candidates:
            limit = _read_int(os.path.join(directory, limit_file))
            usage = _read_int(os.path.join(directory, usage_file))
            if limit is not None and usage is not None and limit < 1 << 60:
                return max(limit - usage, 0)
    return None


def host_memory_left() -> Optional[int]:
    """Bytes the process can still allocate on the host, or None when nothing says: the
    smallest of the address space left under ``RLIMIT_AS``, what the memory cgroup still
    allows and the kernel's ``MemAvailable``. Reads a few /proc files: call it only for a
    large allocation."""
    left = []
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            with open("/proc/self/statm") as f:
                size = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
            left.append(max(soft - size, 0))
    except (ImportError, OSError, ValueError):
        pass
    cgroup = _cgroup_memory_left()
    if cgroup is not None:
        left.append(cgroup)
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    left.append(int(line.split()[1]) * 1024)
                    break
    except (OSError, ValueError, IndexError):
        pass
    return min(left) if left else None


#: An output of at least this many bytes always takes a fresh reading of the memory left
#: (`host_memory_fits`): next to allocating and touching it, the reading costs nothing.
FRESH_READING_BYTES = 64 << 20
#: A reading of the memory left is older than this (seconds): the next check reads again.
READING_SECONDS = 1.0

# The last reading of `host_memory_left`: [bytes left or None, when (time.monotonic), bytes
# checked against it since]. Threads may race on it: a lost update costs at most an early or
# a late reading, never a wrong refusal (a refusal always reads first).
_reading: list = [None, float("-inf"), 0]


def host_memory_fits(nbytes: int) -> Optional[int]:
    """None when ``nbytes`` more bytes fit in the host memory left to the process, else the
    bytes left. Most calls compare with the last reading of `host_memory_left`, less what was
    checked since; it reads again when the reading is a second old, when what was checked
    since reaches an eighth of what it found, for ``nbytes`` of `FRESH_READING_BYTES` or
    more, and always before it answers that ``nbytes`` do not fit."""
    left, when, spent = _reading
    spent += nbytes
    now = _monotonic()
    if nbytes < FRESH_READING_BYTES and now - when < READING_SECONDS and (
            left is None or spent * 8 <= left):
        _reading[2] = spent
        return None
    left = host_memory_left()
    _reading[:] = [left, now, 0]
    return None if left is None or nbytes <= left else left
