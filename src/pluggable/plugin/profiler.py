"""A plugin's device profiler: ``TF_InitProfiler``, the checks of what it fills, and the calls
of a profiling session (start, stop, the two-call ``collect_data_xspace``).

This is part of loading (the loader makes one `PluginProfiler` per library that exports
``TF_InitProfiler``); `pluggable.profiler` drives them during a session. The rules are those
of the StreamExecutor structs (see `validation`): ``struct_size`` of the three structs
checked, ``TP_Profiler.device_type`` a non-empty string, ``start``, ``stop`` and
``collect_data_xspace`` required, ``destroy_profiler`` and ``destroy_profiler_fns`` called
once, at `destroy`.
"""
from __future__ import annotations

import ctypes

from ..base import native as _native
from ..abi.pluggable_profiler import (
    TP_MAJOR, TP_MINOR, TP_PATCH, TF_InitProfiler_fn, TF_ProfilerRegistrationParams,
    TP_Profiler, TP_ProfilerFns)
from ..abi.plugin_ext import (
    PLUGGABLE_EXT_PROFILER_CONTEXT, PLUGGABLE_PROFILER_CONTEXT_EXT_STRUCT_SIZE,
    PLUGGABLE_ProfilerContextExt)
from ..abi.tf_status import TF_Code
from ..base import limits
from ..base.errors import (DataLossError, DeadlineExceededError, InternalError,
                           UnavailableError, error_for_code)
from .validation import ValidationError, alloc_struct, negotiate, read_c_string, require_callbacks

TYPE_CHECKING = False  # typing's constant, without importing typing at start-up
if TYPE_CHECKING:
    from typing import Optional

# Bytes behind the announced size of a collect buffer: a plugin that writes more than it
# announced lands here, where the host sees it, instead of in memory it does not own.
COLLECT_GUARD_BYTES = 4096
_GUARD_PATTERN = 0xA5
# A wait without a deadline (pluggable.config.set_deadline(0)).
_FOREVER = 1e9


class ProfilerLoadError(Exception):
    """TF_InitProfiler failed or filled its structs wrongly; ``step`` is "profiler init" or
    "profiler validation"."""

    def __init__(self, step: str, reason: str):
        super().__init__(reason)
        self.step = step
        self.reason = reason


def _code_name(code: int) -> str:
    try:
        return TF_Code(code).name
    except ValueError:
        return f"code {code}"


class PluginProfiler:
    """The profiler of one plugin library: ``device_type`` ("XPU"), ``path`` (the library)."""

    def __init__(self, path: str, init_address: int):
        self.path = path
        self._destroy_profiler = self._destroy_profiler_fns = None
        params = alloc_struct(TF_ProfilerRegistrationParams)
        profiler = alloc_struct(TP_Profiler)
        profiler_fns = alloc_struct(TP_ProfilerFns)
        params.major_version, params.minor_version, params.patch_version = (
            TP_MAJOR, TP_MINOR, TP_PATCH)
        params.profiler = ctypes.pointer(profiler)
        params.profiler_fns = ctypes.pointer(profiler_fns)
        # The host's extension: the correlation id of a kernel's launch, read from its
        # context by the runtime library (pluggable/plugin_ext.h).
        context_ext = PLUGGABLE_ProfilerContextExt(
            struct_size=PLUGGABLE_PROFILER_CONTEXT_EXT_STRUCT_SIZE,
            type=PLUGGABLE_EXT_PROFILER_CONTEXT, next=None)
        ctypes.cast(ctypes.addressof(context_ext) + PLUGGABLE_ProfilerContextExt.correlation_id
                    .offset, ctypes.POINTER(ctypes.c_void_p))[0] = ctypes.cast(
            _native.lib.pluggable_KernelCorrelationId, ctypes.c_void_p).value
        params.ext = ctypes.addressof(context_ext)
        # The plugin keeps these addresses: they are what every later call passes back.
        self._storage = (params, profiler, profiler_fns, context_ext)
        self._profiler_ref = ctypes.byref(profiler)
        self._profiler_address = ctypes.addressof(profiler)

        status = _native.Status()
        TF_InitProfiler_fn(init_address)(ctypes.byref(params), status.address)
        if not status.ok:
            raise ProfilerLoadError(
                "profiler init", f"TF_InitProfiler returned {_code_name(status.code)}: "
                                 f"{status.message or '(no message)'}")
        try:
            where = "TF_InitProfiler"
            params_view = negotiate(TF_ProfilerRegistrationParams, params, where)
            self._destroy_profiler = params_view.destroy_profiler or None
            self._destroy_profiler_fns = params_view.destroy_profiler_fns or None
            if params_view.major_version != TP_MAJOR:
                raise ValidationError(
                    f"the plugin implements profiler C API {params_view.major_version}."
                    f"{params_view.minor_version}.{params_view.patch_version} but this host "
                    f"implements {TP_MAJOR}.{TP_MINOR}.{TP_PATCH}; the major versions must "
                    f"match. Rebuild the plugin against pluggable.get_include()")
            view = negotiate(TP_Profiler, profiler, where)
            self.device_type = read_c_string(view.device_type, "TP_Profiler.device_type")
            if not self.device_type:
                raise ValidationError("TP_Profiler.device_type is empty; set it to the device "
                                      "type the profiler records (for example \"XPU\")")
            fns = negotiate(TP_ProfilerFns, profiler_fns, where)
            require_callbacks(TP_ProfilerFns, fns, TP_ProfilerFns.required_callbacks(), where)
        except ValidationError as exc:
            self.destroy()
            raise ProfilerLoadError("profiler validation", str(exc)) from None
        self._start, self._stop = fns.start, fns.stop
        self._collect = fns.collect_data_xspace

    @property
    def label(self) -> str:
        return f"the {self.device_type} profiler of {self.path}"

    def _check(self, status: "_native.Status", call: str) -> None:
        if not status.ok:
            raise error_for_code(status.code)(
                f"{self.label}: TP_ProfilerFns.{call} failed: "
                f"{status.message or '(the plugin gave no message)'}",
                plugin=self.path, call=f"TP_ProfilerFns.{call}", plugin_message=status.message)

    #: Why the profiler is no longer called: a call of it never returned (or was
    #: interrupted), so its state is unknown; "" while it is usable.
    stuck = ""

    def _refuse_if_stuck(self, call: str) -> None:
        if self.stuck:
            raise DeadlineExceededError(self.stuck, plugin=self.path,
                                        call=f"TP_ProfilerFns.{call}")
        reason = limits.plugin_stuck(self.path)
        if reason:  # a call was abandoned inside the plugin elsewhere (a kernel, a device)
            raise UnavailableError(
                limits.unusable_message(self.label, f"TP_ProfilerFns.{call}", reason),
                plugin=self.path, call=f"TP_ProfilerFns.{call}")

    def _interrupted(self, call: str) -> None:
        """Marks the profiler and its plugin stuck after Ctrl-C abandoned ``call`` (the
        caller raises the interruption again)."""
        self.stuck = (f"{self.label}: TP_ProfilerFns.{call} was interrupted before it "
                      f"returned; the profiler and its plugin are no longer used in this "
                      f"process")
        limits.mark_plugin_stuck(self.path, f"TP_ProfilerFns.{call} was interrupted "
                                            f"(Ctrl-C) before it returned")

    def _overdue(self, call: str, limit: float) -> None:
        """Marks the profiler and its plugin stuck after ``call`` did not return within the
        deadline ``limit``, and raises DeadlineExceededError."""
        self.stuck = (f"{self.label}: TP_ProfilerFns.{call} did not return within the "
                      f"deadline of {limit:g} s; the profiler is marked stuck and, with "
                      f"its plugin's devices and kernels, no longer used in this process "
                      f"(the rest of the profile goes on). Give it longer with "
                      f"pluggable.config.set_deadline(seconds) or "
                      f"{limits.DEADLINE_VARIABLE}")
        limits.mark_plugin_stuck(self.path, f"TP_ProfilerFns.{call} did not return within "
                                            f"the deadline of {limit:g} s")
        raise DeadlineExceededError(self.stuck, plugin=self.path,
                                    call=f"TP_ProfilerFns.{call}")

    def _status_call(self, call: str, fn) -> None:
        """``fn(profiler, status)`` (TP_ProfilerFns.start or stop), bounded by the deadline as
        `_bounded` bounds a call but on the helper threads of pluggable._compiled
        (_compiled/blocking.c), which stay for the next call instead of one thread each;
        raises the plugin's error. A status a call abandoned holds is never reused."""
        self._refuse_if_stuck(call)
        limit = limits.deadline()
        status = _native.acquire_status()
        if not limit:
            fn(self._profiler_ref, status.address)
        else:
            address = ctypes.cast(fn, ctypes.c_void_p).value
            try:
                returned = _native.compiled.bounded_call(address, self._profiler_address,
                                                         status.address, limit)
            except BaseException:  # Ctrl-C while waiting: the call goes on with its status
                _native.abandon_status(status)
                self._interrupted(call)
                raise
            if not returned:
                _native.abandon_status(status)
                self._overdue(call, limit)
        try:
            self._check(status, call)
        finally:
            _native.release_status(status)

    def start(self) -> None:
        self._status_call("start", self._start)

    def stop(self) -> None:
        self._status_call("stop", self._stop)

    def collect(self) -> bytes:
        """The serialized XSpace of the session (b"" when the device did nothing)."""
        return self.begin_collect().result()[0]

    def begin_collect(self) -> "PendingCollect":
        """Starts collecting the session's serialized XSpace; the `PendingCollect` returned
        waits for it (`result`) or gives it up (`abandon`).

        Both calls of the two-call protocol (the size first, then a buffer of exactly that
        size followed by a guard region), the guard's check and the check of the bytes'
        wire format against xplane.proto run on a helper thread of pluggable._compiled,
        without the GIL, while the caller goes on: the session encodes the host plane
        meanwhile. A plugin that writes past the size it announced is an error (the bytes
        are dropped), and so are bytes that are not a serialized XSpace (a malformed one
        would make the whole file unreadable)."""
        self._refuse_if_stuck("collect_data_xspace")
        query, status = _native.acquire_status(), _native.acquire_status()
        try:
            job = _native.compiled.begin_collect(
                ctypes.cast(self._collect, ctypes.c_void_p).value, self._profiler_address,
                query.address, status.address, COLLECT_GUARD_BYTES, _GUARD_PATTERN)
        except BaseException:
            _native.release_status(query)
            _native.release_status(status)
            raise
        return PendingCollect(self, job, query, status)

    def _collected(self, result, query, status):
        """What `begin_collect`'s job found, or the error it makes."""
        announced, size_after, written, data, plane_ids, problem = result
        self._check(query, "collect_data_xspace (size query)")
        if not announced:
            return b"", []
        self._check(status, "collect_data_xspace")
        if written or size_after > announced:
            raise InternalError(
                f"{self.label}: TP_ProfilerFns.collect_data_xspace announced {announced} bytes "
                f"but wrote {max(written, size_after)}; a plugin must write exactly the size "
                f"its size query (buffer NULL) gave",
                plugin=self.path, call="TP_ProfilerFns.collect_data_xspace")
        if problem is not None:
            raise DataLossError(
                f"{self.label} is not a serialized XSpace ({announced} bytes): {problem}; "
                f"collect_data_xspace must write a tensorflow.profiler.XSpace serialized as "
                f"xplane.proto defines it",
                plugin=self.path, call="TP_ProfilerFns.collect_data_xspace")
        return data, plane_ids

    def destroy(self) -> None:
        """Gives the plugin back its profiler structs (once); not to a profiler found stuck,
        whose call may still be using them, or of a plugin found stuck elsewhere."""
        if self.stuck or limits.plugin_stuck(self.path):
            return
        _, profiler, profiler_fns, _ = self._storage
        destroy_fns, self._destroy_profiler_fns = self._destroy_profiler_fns, None
        destroy, self._destroy_profiler = self._destroy_profiler, None
        if destroy_fns is not None:
            destroy_fns(ctypes.byref(profiler_fns))
        if destroy is not None:
            destroy(ctypes.byref(profiler))

    def __repr__(self) -> str:
        return f"<PluginProfiler {self.device_type} {self.path!r}>"


class PendingCollect:
    """A profiler's collect_data_xspace running on its helper thread (`begin_collect`)."""

    _CALL = "collect_data_xspace"

    def __init__(self, profiler: PluginProfiler, job, query, status):
        self._profiler, self._job = profiler, job
        self._statuses = (query, status)  # lent until the calls returned, or given up

    def result(self):
        """Waits for the calls, at most until the deadline counted from their start, and
        gives ``(data, plane_ids)`` (b"" and [] when the device did nothing), or raises what
        went wrong. A collect that does not return in time, or whose wait Ctrl-C interrupts,
        is abandoned (it goes on on its thread, with its statuses) and the profiler is never
        called again."""
        profiler, call = self._profiler, self._CALL
        limit = limits.deadline()
        try:
            returned = self._job.wait(limit if limit else _FOREVER)
        except BaseException:  # Ctrl-C while waiting
            self.abandon()
            profiler._interrupted(call)
            raise
        if not returned:
            self.abandon()
            profiler._overdue(call, limit)
        query, status = self._statuses
        try:
            return profiler._collected(self._job.result(), query, status)
        finally:
            self._statuses = ()
            _native.release_status(query)
            _native.release_status(status)

    def abandon(self) -> None:
        """Gives the collect up without waiting (the session that started it is ending
        another way): its statuses stay the calls' (never freed or reused), and what it
        collects is dropped."""
        for lent in self._statuses:
            _native.abandon_status(lent)
        self._statuses = ()


def load_profiler(path: str, init_address: Optional[int]) -> Optional[PluginProfiler]:
    """The library's profiler, or None when it exports no ``TF_InitProfiler``."""
    if not init_address:
        return None
    return PluginProfiler(path, init_address)
