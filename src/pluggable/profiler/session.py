"""Profiling sessions: `start`, `stop`, `Profile`, `Trace`, shaped like
``tf.profiler.experimental``.

One session runs at a time per process. `start` starts the plugin profilers the options
select (TensorFlow's rule: only when ``device_tracer_level > 0`` and ``device_type`` is
"UNSPECIFIED" or "PLUGGABLE_DEVICE") and installs the host tracer; `stop` waits for the
work enqueued on every device, stops them, collects each plugin's XSpace (two calls: size,
then data, on a helper thread while the host plane is encoded), merges them with the host
plane and saves
``logdir/plugins/profile/<YYYY_MM_DD_HH_MM_SS>/<hostname>.xplane.pb``, where
TensorBoard's profile plugin and xprof look. A plugin that fails is reported in a
`ProfilerWarning` and left out; the other planes are kept.
"""
from __future__ import annotations

import dataclasses
import functools
import gc
import operator
import os
import socket
import threading
import time
from time import time_ns
from typing import Any, List, Optional

from ..base.errors import warn
from ..base.errors import (
    AlreadyExistsError, InvalidArgumentError, PluggableError, PluggableWarning,
    UnavailableError)
from .result import ProfileResult

DEVICE_TYPES = ("UNSPECIFIED", "PLUGGABLE_DEVICE", "CPU", "GPU", "TPU")


class ProfilerWarning(PluggableWarning):
    """A plugin profiler failed during a session; its planes are left out."""


@dataclasses.dataclass(frozen=True)
class ProfilerOptions:
    """What a session records (``tf.profiler.experimental.ProfilerOptions``).

    ``host_tracer_level``: 0 records nothing on the host, 1 and up records ops, copies,
    allocations and `Trace` spans. ``python_tracer_level``: 1 and up also records every
    Python function call (of the thread that starts the session and of threads started
    during it) on the host plane, named ``$<file>:<line> <function>`` as TensorFlow's Python
    tracer does; it needs ``host_tracer_level >= 1``. ``device_tracer_level``: 0 creates no plugin profiler.
    ``delay_ms``: `start` waits that long before recording. ``device_type``: plugin
    profilers run only for "UNSPECIFIED" and "PLUGGABLE_DEVICE".
    """

    host_tracer_level: int = 2
    python_tracer_level: int = 0
    device_tracer_level: int = 1
    delay_ms: Optional[int] = None
    device_type: str = "UNSPECIFIED"

    def __post_init__(self):
        for name in ("host_tracer_level", "python_tracer_level", "device_tracer_level"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise InvalidArgumentError(f"ProfilerOptions.{name} must be an integer >= 0, "
                                           f"got {value!r}", call="ProfilerOptions")
        if self.delay_ms is not None and (not isinstance(self.delay_ms, int)
                                          or self.delay_ms < 0):
            raise InvalidArgumentError(f"ProfilerOptions.delay_ms must be None or an integer "
                                       f">= 0, got {self.delay_ms!r}", call="ProfilerOptions")
        if self.python_tracer_level >= 1 and self.host_tracer_level == 0:
            raise InvalidArgumentError(
                "ProfilerOptions.python_tracer_level records on the host plane, which "
                "host_tracer_level=0 turns off; set host_tracer_level >= 1 or "
                "python_tracer_level=0", call="ProfilerOptions")
        if self.device_type not in DEVICE_TYPES:
            raise InvalidArgumentError(
                f"ProfilerOptions.device_type must be one of {', '.join(DEVICE_TYPES)}, got "
                f"{self.device_type!r}", call="ProfilerOptions")

    @property
    def plugin_profilers_enabled(self) -> bool:
        return self.device_tracer_level > 0 and self.device_type in ("UNSPECIFIED",
                                                                       "PLUGGABLE_DEVICE")


class _Session:
    def __init__(self, logdir: Optional[str], options: ProfilerOptions):
        self.logdir = logdir
        self.options = options
        self.profilers: List[Any] = []
        self.tracer = None
        self.warnings: List[str] = []
        self.start_ns = 0


_lock = threading.Lock()
_session: Optional[_Session] = None


def _warn(session: _Session, message: str) -> None:
    session.warnings.append(message)
    warn(message, ProfilerWarning)


def start(logdir, options: Optional[ProfilerOptions] = None) -> None:
    """Starts a session whose profile `stop` saves under ``logdir``."""
    global _session
    options = options or ProfilerOptions()
    if not isinstance(options, ProfilerOptions):
        raise InvalidArgumentError(f"options must be a ProfilerOptions, got "
                                   f"{type(options).__name__}", call="profiler.start")
    logdir = os.fspath(logdir) if logdir is not None else None
    from .. import loader

    manager = loader.manager()
    manager.ensure_discovered()
    with _lock:
        if _session is not None:
            raise AlreadyExistsError(
                f"a profiler session is already running (started for "
                f"{_session.logdir!r}); stop it with pluggable.profiler.stop() before "
                f"starting another", call="profiler.start")
        session = _Session(logdir, options)
        if options.delay_ms:
            time.sleep(options.delay_ms / 1000)
        session.start_ns = time_ns()
        if options.plugin_profilers_enabled:
            for profiler in list(manager.profilers):
                try:
                    profiler.start()
                except PluggableError as exc:
                    _warn(session, f"pluggable.profiler: {exc}; it is left out of this "
                                   f"session")
                    continue
                session.profilers.append(profiler)
        if options.host_tracer_level >= 1:
            from .host_tracer import HostTracer

            session.tracer = HostTracer()
            session.tracer.install()
            if options.python_tracer_level >= 1:
                session.tracer.trace_python()
        _session = session


def stop(save: bool = True) -> ProfileResult:
    """Ends the session; returns its `ProfileResult` (saved when ``save`` and a logdir was
    given)."""
    global _session
    with _lock:
        session = _session
        if session is None:
            raise UnavailableError("no profiler is running; start one with "
                                   "pluggable.profiler.start(logdir) or `with "
                                   "pluggable.profiler.Profile(logdir):`", call="profiler.stop")
        _session = None
        # Encoding makes few objects, but a plugin's or the host's bytes are megabytes: the
        # collector stays off until the records are dropped.
        collecting = gc.isenabled()
        gc.disable()
        try:
            if session.tracer is not None:
                session.tracer.uninstall()
            if session.profilers:
                _finish_device_work(session)
            for profiler in session.profilers:
                try:
                    profiler.stop()
                except PluggableError as exc:
                    _warn(session, f"pluggable.profiler: {exc}")
            return _finish(session, save)
        finally:
            if session.tracer is not None:
                session.tracer.discard()
            if collecting:
                gc.enable()


def _finish_device_work(session: _Session) -> None:
    """Waits for the work enqueued on every device, so that the plugins' profilers have
    recorded all of it (a kernel launched in the session appears in its profile)."""
    from .. import loader

    for platform in loader.manager().platforms.all():
        for executor in platform.executors:
            if executor.is_closed:
                continue
            try:
                executor.synchronize_all_activity()
            except PluggableError as exc:
                _warn(session, f"pluggable.profiler: waiting for {executor.name} before "
                               f"collecting failed: {exc}")


def _finish(session: _Session, save: bool) -> ProfileResult:
    from .xspace import pb2

    pb = pb2()
    # The plugins' profilers collect on helper threads (a plugin serialises its session
    # there, and the bytes are checked there: their wire format, not parsed, since a
    # malformed XSpace would make the whole file unreadable) while this thread encodes the
    # host plane.
    pending = []
    for profiler in session.profilers:
        try:
            pending.append(profiler.begin_collect())
        except PluggableError as exc:
            _warn(session, f"pluggable.profiler: {exc}; its planes are left out")
    host_plane = host_failure = None
    chunks: List[bytes] = []
    plane_ids = []
    try:
        if session.tracer is not None:
            try:
                host_plane = session.tracer.encode_plane()
            except PluggableError as exc:  # a malformed record: the plugins' planes are kept
                host_failure = exc
        while pending:
            try:
                data, ids = pending[0].result()
            except PluggableError as exc:
                _warn(session, f"pluggable.profiler: {exc}; its planes are left out")
                continue
            finally:
                pending.pop(0)
            if data:
                plane_ids.extend(ids)
                chunks.append(data)
    finally:  # interrupted (Ctrl-C): the collects still running are given up
        for collect in pending:
            collect.abandon()
    if host_failure is not None:
        _warn(session, f"pluggable.profiler: the host plane is left out: {host_failure}")
    if host_plane is not None:
        chunks.extend(host_plane.space_field(max(plane_ids, default=-1) + 1))
    chunks.append(pb.XSpace(hostnames=[socket.gethostname()],
                            warnings=session.warnings).SerializeToString())
    # The pieces go to the file as they are; joined only if the result's views ask for them.
    path = None
    if save and session.logdir is not None:
        path = _save(session.logdir, chunks)
    return ProfileResult(chunks, path)


def _save(logdir: str, chunks: List[bytes]) -> str:
    stamp = time.strftime("%Y_%m_%d_%H_%M_%S", time.localtime())
    base = os.path.join(logdir, "plugins", "profile", stamp)
    run, n = base, 0
    host = socket.gethostname()
    while os.path.exists(os.path.join(run, f"{host}.xplane.pb")):
        n += 1  # two sessions within one second: a run directory each
        run = f"{base}_{n}"
    os.makedirs(run, exist_ok=True)
    path = os.path.join(run, f"{host}.xplane.pb")
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0), 0o666)
    try:
        _write_all(fd, chunks)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return path


def _write_all(fd: int, chunks: List[bytes]) -> None:
    """Writes the pieces in order, in as few system calls as the OS takes. The file's
    blocks are reserved first where the OS can (its size is known): writing into reserved
    blocks takes half the time of growing the file as it goes (ext4, 2 MB: 0.3 ms against
    0.6)."""
    views = [memoryview(c) for c in chunks if len(c)]
    reserve = getattr(os, "posix_fallocate", None)
    if reserve is not None:
        try:
            reserve(fd, 0, sum(map(len, views)))
        except OSError:  # a file system without it: the writes grow the file
            pass
    writev = getattr(os, "writev", None)
    while views:
        if writev is None:
            written = os.write(fd, views[0])
        else:
            written = writev(fd, views[:512])
        while written:  # a partial write leaves the rest of a piece, or of the batch
            if written >= len(views[0]):
                written -= len(views.pop(0))
            else:
                views[0] = views[0][written:]
                written = 0


def is_running() -> bool:
    return _session is not None


# Where `Profile` saves when given no logdir: under the current folder, where
# `tensorboard --logdir logs` (or `xprof --logdir logs`) run from that folder finds it.
DEFAULT_LOGDIR = "logs"


class Profile:
    """``with Profile([logdir][, options]):`` profiles the block; ``.result`` after it. Without
    a ``logdir`` the profile goes to ``logs`` under the current folder (`DEFAULT_LOGDIR`)."""

    def __init__(self, logdir=None, options: Optional[ProfilerOptions] = None):
        self.logdir = os.path.abspath(DEFAULT_LOGDIR) if logdir is None else logdir
        self.options = options
        self.result: Optional[ProfileResult] = None

    def __enter__(self) -> "Profile":
        start(self.logdir, self.options)
        return self

    def __exit__(self, *exc_info) -> None:
        self.result = stop()


class Trace:
    """A named span on the host plane, as context manager or decorator:
    ``with Trace("train", step_num=3, lr=0.1):``. With ``step_num`` it is a step marker
    (stat ``step_num``); other keywords become stats. Free when no session runs."""

    def __init__(self, name: str, step_num: Optional[int] = None, **metadata):
        if not isinstance(name, str) or not name:
            raise InvalidArgumentError(f"Trace name must be a non-empty string, got {name!r}",
                                       call="profiler.Trace")
        if step_num is not None:
            try:
                step_num = operator.index(step_num)
            except TypeError:
                raise InvalidArgumentError(
                    f"Trace step_num must be an integer (the step's number), got "
                    f"{step_num!r}; pass the step number or leave step_num out",
                    call="profiler.Trace") from None
        self.name = name
        self.step_num = step_num
        self.metadata = metadata
        self._starts: List[Optional[int]] = []  # one per nested `with` of this object

    def __enter__(self) -> "Trace":
        self._starts.append(time_ns() if _session is not None else None)
        return self

    def __exit__(self, *exc_info) -> None:
        start = self._starts.pop()
        session = _session
        if start is not None and session is not None and session.tracer is not None:
            session.tracer.annotation(self.name, start, time_ns(), self.step_num,
                                      self.metadata)

    def __call__(self, fn):
        @functools.wraps(fn)
        def traced(*args, **kwargs):
            with Trace(self.name, self.step_num, **self.metadata):
                return fn(*args, **kwargs)
        return traced
