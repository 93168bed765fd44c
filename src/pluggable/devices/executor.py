"""StreamExecutor: one device of a plugin, over ``SP_Device`` and ``SP_StreamExecutor``.

This is the host's whole view of a device: memory, copies, streams, events, timers and
synchronisation. Every callback the plugin left out has a documented fallback here or raises
`UnimplementedError` (see include/ABI.md). Every non-OK status raises the `pluggable.errors`
class of its code, naming the plugin, the device and the call.

Releases requested by finalizers are queued and carried out at the next safe point (any call
that allocates or creates, and `flush_releases()`), never from inside the garbage collector:
destroying a stream waits for its worker, which may be running a Python callback right then.
"""
from __future__ import annotations

import ctypes
import operator
import os
import sys
import threading
import time

from ..base.errors import warn
from ..base import native as _native
from ..base import limits
from ..abi import plugin_ext
from ..abi.stream_executor import (
    SE_CreateDeviceFnsParams, SE_CreateDeviceParams, SE_CreateStreamExecutorParams,
    SE_EventStatus, SE_StatusCallbackFn, SP_AllocatorStats, SP_Device, SP_DeviceFns,
    SP_DeviceMemoryBase, SP_StreamExecutor)
from ..abi.tf_status import TF_Code
from ..base.errors import (
    CallbackWarning, DeadlineExceededError, FailedPreconditionError, InternalError,
    InvalidArgumentError, PluggableError,
    PluggableWarning,
    ResourceExhaustedError, UnavailableError, UnimplementedError, error_for_code)
from .memory import DeviceMemory, HostMemory, claim_host_memory, release_host_memory
from .platform import PluginCallError
from ..plugin.validation import (
    ValidationError, alloc_struct, negotiate, optional_callback, read_c_string,
    require_callbacks)

TYPE_CHECKING = False  # typing's constant, without importing typing at start-up
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, List, Optional, Tuple
    from .event import Event
    from .platform import Platform
    from .stream import Stream
    from .timer import Timer

_TIMER_FNS = ("create_timer", "destroy_timer", "start_timer", "stop_timer")
_EVENT_STATES = frozenset(int(v) for v in SE_EventStatus)
_COMPLETE, _ERROR = int(SE_EventStatus.SE_EVENT_COMPLETE), int(SE_EventStatus.SE_EVENT_ERROR)
# How long a host wait polls an event with only a yield between polls (see await_event).
_SPIN_SECONDS = 50e-6
_sched_yield = getattr(os, "sched_yield", lambda: None)

_STATS_FIELDS = (
    "num_allocs", "bytes_in_use", "peak_bytes_in_use", "largest_alloc_size", "bytes_limit",
    "bytes_reserved", "peak_bytes_reserved", "bytes_reservable_limit",
    "largest_free_block_bytes",
)


def host_buffer(obj: Any, writable: bool, what: str) -> Tuple[int, int, Any]:
    """The address and size in bytes of a C-contiguous host buffer, and the object that keeps
    it alive. Accepts `HostMemory`, NumPy arrays and anything with the buffer protocol."""
    if isinstance(obj, HostMemory):
        obj._check_open()
        return obj.address, obj.size, obj
    import numpy as np

    if isinstance(obj, np.ndarray):  # also dtypes the buffer protocol refuses (bfloat16)
        if writable and not obj.flags.writeable:
            raise InvalidArgumentError(
                f"{what} is a read-only array; pass a writable one", call="host buffer")
        if not obj.flags.c_contiguous:
            raise InvalidArgumentError(
                f"{what} is not C-contiguous; pass numpy.ascontiguousarray(...) instead",
                call="host buffer")
        return (obj.__array_interface__["data"][0] if obj.nbytes else 0), obj.nbytes, obj
    try:
        view = memoryview(obj)
    except TypeError:
        raise TypeError(f"{what} must be a host buffer (bytes, bytearray, memoryview, NumPy "
                        f"array or HostMemory), not {type(obj).__name__}") from None
    except ValueError as exc:
        raise InvalidArgumentError(f"{what} cannot be read as bytes: {exc}",
                                   call="host buffer") from None
    if writable and view.readonly:
        raise InvalidArgumentError(
            f"{what} is read-only; pass a writable buffer such as a bytearray or a NumPy array",
            call="host buffer")
    if not view.c_contiguous:
        raise InvalidArgumentError(
            f"{what} is not C-contiguous; pass numpy.ascontiguousarray(...) instead",
            call="host buffer")
    array = np.frombuffer(view.cast("B") if view.ndim != 1 or view.format != "B" else view,
                          dtype=np.uint8)
    return (array.ctypes.data if array.size else 0), array.nbytes, (view, array)


class _CallbackRegistry:
    """Python callables a plugin will call back through ``SE_StatusCallbackFn``.

    One C function (pluggable._compiled's) serves every callback; ``callback_arg`` is a token
    that finds the callable, so nothing is created per call and nothing can be collected while
    the plugin may still call it. Every callable registered and not yet run or discarded is
    counted in pluggable._compiled: while any is, kernel runs release the GIL, which the callback
    will need (see _compiled/hostcall.c).
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._next = 1
        self._entries: Dict[int, Tuple[Callable[[], Any], "StreamExecutor", str]] = {}
        self.trampoline = SE_StatusCallbackFn(_native.compiled.bind_host_callbacks(self._run))

    def add(self, fn: Callable[[], Any], executor: "StreamExecutor", what: str) -> int:
        with self._lock:
            token = self._next
            self._next += 1
            self._entries[token] = (fn, executor, what)
            _native.compiled.host_callback_added()
        return token

    def discard(self, token: int) -> None:
        with self._lock:
            if self._entries.pop(token, None) is not None:
                _native.compiled.host_callback_dropped()

    def wait_until_run(self, executor: "StreamExecutor", before: int,
                       tokens: Optional[set] = None) -> None:
        """Waits until every callable of ``executor`` registered before token ``before``
        (and, given ``tokens``, among them) has run or been discarded: a plugin may invoke a
        host callback after its stream reports the work done, and a wait must not return
        before the callback ran. Bounded by the deadline (`DeadlineExceededError`)."""
        def pending() -> bool:
            with self._lock:
                return any(token < before and entry[1] is executor
                           and (tokens is None or token in tokens)
                           for token, entry in self._entries.items())

        if not self._entries or not pending():
            return
        limit = limits.deadline()
        started = time.monotonic()
        delay = 0.00005
        while pending():
            waited = time.monotonic() - started
            if limit and waited > limit:
                raise executor._deadline_error("host_callback (the plugin has not invoked a "
                                               "host callback of work that is done)",
                                               limit, waited)
            time.sleep(delay)
            delay = min(delay * 2, 0.002)

    @property
    def next_token(self) -> int:
        return self._next

    def _run(self, arg: int, status_address: int) -> bool:
        """Runs the callable of token ``arg``; whether there was one (the C caller counts it
        out once it has given the GIL back)."""
        with self._lock:
            entry = self._entries.pop(arg, None)
        if entry is None:
            return False
        fn, executor, what = entry
        try:
            fn()
        except BaseException as exc:  # reported to the plugin and, later, to the user
            message = f"{what} raised {type(exc).__name__}: {exc}"
            if status_address:
                _native.TF_SetStatus(status_address, TF_Code.TF_INTERNAL,
                                     message.encode("utf-8", "replace"))
            executor._defer_warning(message, CallbackWarning)
        return True


CALLBACKS = _CallbackRegistry()

_late_writes_reported = [0]


def _report_late_status_writes() -> None:
    """Warns, at a synchronisation, of TF_Status writes the runtime refused because they came
    after the call the status was given to had returned (`base.native.late_status_writes`)."""
    count, code, message = _native.late_status_writes()
    if count > _late_writes_reported[0]:
        new = count - _late_writes_reported[0]
        _late_writes_reported[0] = count
        warn(
            f"a plugin wrote a TF_Status {new} time(s) after the call it was given to had "
            f"returned (last: {TF_Code(code).name if code in TF_Code._value2member_map_ else code}"
            f" {message!r}); the write was refused, so it is not blamed on a later call. A "
            f"plugin must not keep the TF_Status* of a call", PluggableWarning)


def _caller_name() -> str:
    """The qualified name of the function that asked `_check_open` (through `_check_stream`),
    for the error refusing it: ``StreamExecutor.create_stream``, ``Kernel.prepare``..."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_name in ("_check_stream", "_check_open"):
        frame = frame.f_back
    if frame is None:
        return "this call"
    code = frame.f_code
    return getattr(code, "co_qualname", code.co_name)


class _Refused:
    """What a callback of a plugin found stuck is replaced by: calling it raises
    `UnavailableError` naming the call refused and the call that got stuck."""

    __slots__ = ("executor", "call")

    def __init__(self, executor: "StreamExecutor", call: str):
        self.executor = executor
        self.call = call

    def __call__(self, *args, **kwargs):
        raise self.executor._unusable(self.call)


class _ScratchMemoryBase(threading.local):
    """A SP_DeviceMemoryBase per thread that small copies fill with a device address for
    the plugin's call (ctypes releases the GIL during the call, so threads cannot share
    one)."""

    def __init__(self):
        base = SP_DeviceMemoryBase.new()
        self.pair = (base, ctypes.byref(base))

# The host tracer of a running profiling session, or None (set by pluggable.profiler).
_tracer = None


class StreamExecutor:
    """One device of a platform. Made by the loader; reach it with ``platform.executor(i)``
    or ``device.executor``."""

    def __init__(self, platform: "Platform", ordinal: int):
        self.platform = platform
        self.ordinal = ordinal
        self.name = f"{platform.device_type}:{ordinal} ({platform.name})"
        # Reentrant: the collector may destroy an open DeviceMemory (or a stream or event) on
        # a thread that holds it (inside flush_releases, or while a pool is made), and the
        # release that object queues takes it again.
        self._lock = threading.RLock()
        self._pending_releases: List[Tuple[str, Any, Any]] = []
        self._scratch = _ScratchMemoryBase()  # for the device side of small copies
        self._deferred_warnings: List[Tuple[str, type]] = []
        self._closed = False
        self._internal_stream: Optional["Stream"] = None
        # Made on first use; `allocator_options` may be changed until then (config).
        self.allocator_options: Dict[str, Any] = {}
        self._allocator = self._host_allocator = self._event_manager = self._staging = None
        self._create_device()
        try:
            self._create_device_fns()
            self._create_stream_executor()
        except BaseException:
            self._destroy_device()
            raise
        try:
            self.memory_usage()  # refuses negative or inconsistent figures now, at creation
        except InternalError as exc:
            self.close()
            raise PluginCallError("validation", exc.plugin_message or str(exc)) from None

    # -- creation ----------------------------------------------------------------------------
    def _load_call(self, fn_name: str, fn, *args) -> None:
        status = _native.Status()
        fn(*args, status.address)
        if not status.ok:
            raise PluginCallError(
                "device creation", f"SP_PlatformFns.{fn_name} for device {self.ordinal} "
                                   f"failed: {status.message or '(no message)'}")

    def _create_device(self) -> None:
        p = self.platform
        device = alloc_struct(SP_Device)
        device.ordinal = self.ordinal
        params = alloc_struct(SE_CreateDeviceParams)
        params.ordinal = self.ordinal
        params.device = ctypes.pointer(device)
        self._load_call("create_device", p._platform_fns.create_device, p._platform_ref,
                        ctypes.byref(params))
        self._device = device
        self._device_ptr = ctypes.pointer(device)
        self._device_address = ctypes.addressof(device)
        try:
            view = negotiate(SP_Device, device, "SP_PlatformFns.create_device")
            if view.ordinal != self.ordinal:
                raise ValidationError(
                    f"SP_PlatformFns.create_device for device {self.ordinal} set "
                    f"SP_Device.ordinal to {view.ordinal}; it must keep the ordinal it was "
                    f"given")
            self.hardware_name = read_c_string(view.hardware_name, "SP_Device.hardware_name",
                                               required=False) or None
            self.device_vendor = read_c_string(view.device_vendor, "SP_Device.device_vendor",
                                               required=False) or None
            self.pci_bus_id = read_c_string(view.pci_bus_id, "SP_Device.pci_bus_id",
                                            required=False) or None
        except ValidationError as exc:
            self._destroy_device()
            raise PluginCallError("validation", str(exc)) from None

    def _create_device_fns(self) -> None:
        p = self.platform
        self._device_fns = None
        create = optional_callback(type(p._platform_fns), p._platform_fns, "create_device_fns")
        if create is None:
            return
        fns = alloc_struct(SP_DeviceFns)
        params = alloc_struct(SE_CreateDeviceFnsParams)
        params.device_fns = ctypes.pointer(fns)
        self._load_call("create_device_fns", create, p._platform_ref, ctypes.byref(params))
        self._device_fns_storage = fns
        try:
            self._device_fns = negotiate(SP_DeviceFns, fns, "SP_PlatformFns.create_device_fns")
        except ValidationError as exc:
            raise PluginCallError("validation", str(exc)) from None

    def _create_stream_executor(self) -> None:
        p = self.platform
        se = alloc_struct(SP_StreamExecutor)
        params = alloc_struct(SE_CreateStreamExecutorParams)
        params.stream_executor = ctypes.pointer(se)
        self._load_call("create_stream_executor", p._platform_fns.create_stream_executor,
                        p._platform_ref, ctypes.byref(params))
        self._se_storage = se
        where = "SP_PlatformFns.create_stream_executor"
        try:
            view = negotiate(SP_StreamExecutor, se, where)
            require_callbacks(SP_StreamExecutor, view, SP_StreamExecutor.required_callbacks(),
                              where)
        except ValidationError as exc:
            p._platform_fns.destroy_stream_executor(p._platform_ref, ctypes.byref(se))
            raise PluginCallError("validation", str(exc)) from None
        fns = {name: optional_callback(SP_StreamExecutor, view, name)
               for name in SP_StreamExecutor.callbacks()}
        try:
            _check_groups(fns, p)
        except ValidationError as exc:
            p._platform_fns.destroy_stream_executor(p._platform_ref, ctypes.byref(se))
            raise PluginCallError("validation", f"{where}: {exc}") from None
        self._se = view
        self._fns = fns
        self._fn_addresses: Dict[str, int] = {}  # of the calls _bounded_call made
        self._plugin_allocate = _native.compiled.PluginAllocator(
            DeviceMemory, _allocation_arguments, ctypes.addressof(self._device),
            *(ctypes.cast(fns[name], ctypes.c_void_p).value
              for name in ("allocate", "deallocate"))).allocate
        self.supports_timers = p._timer_fns is not None
        self._live_handles_fn = self._stream_names_fn = None
        for link in plugin_ext.walk_ext_chain(view.ext or 0):
            if link.type == plugin_ext.PLUGGABLE_EXT_STREAM_NAMES:
                names = negotiate(plugin_ext.PLUGGABLE_StreamNamesExt,
                                  plugin_ext.PLUGGABLE_StreamNamesExt.from_address(link.address),
                                  "SP_StreamExecutor.ext")
                self._stream_names_fn = names.set_stream_name or None
            if link.type == plugin_ext.PLUGGABLE_EXT_LIVE_HANDLES:
                ext = negotiate(plugin_ext.PLUGGABLE_LiveHandlesExt,
                                plugin_ext.PLUGGABLE_LiveHandlesExt.from_address(link.address),
                                "SP_StreamExecutor.ext")
                if ext.get_live_handles:
                    self._live_handles_fn = ext.get_live_handles

    def _destroy_device(self) -> None:
        p = self.platform
        p._platform_fns.destroy_device(p._platform_ref, self._device_ptr)

    # -- plumbing ----------------------------------------------------------------------------
    def _fn(self, name: str):
        fn = self._fns.get(name)
        if fn is None:
            raise UnimplementedError(
                f"{self.platform.label} does not implement SP_StreamExecutor.{name}, and the "
                f"host has no fallback for it", plugin=self.platform.label,
                call=f"SP_StreamExecutor.{name}")
        return fn

    def _error(self, code: int, message: str, call: str):
        cls = error_for_code(code)
        return cls(f"{self.platform.label}, device {self.ordinal}: {call} failed: "
                   f"{message or '(the plugin gave no message)'}",
                   plugin=self.platform.label, call=call, plugin_message=message)

    def _call(self, name: str, *args) -> None:
        """Calls SP_StreamExecutor.<name>(device, *args, status) and raises on error."""
        fn = self._fns.get(name) or self._fn(name)
        status = _native.acquire_status()
        try:
            fn(self._device_ptr, *args, status.address)
            code = _native.TF_GetCode(status.address)
            if code:
                raise self._error(code, status.message, f"SP_StreamExecutor.{name}")
        finally:
            _native.release_status(status)

    #: Why the executor is no longer used: a call of its plugin was abandoned inside the
    #: plugin (past the deadline or by Ctrl-C), here or on another device; "" if none.
    stuck = ""

    def _unusable(self, call: str) -> UnavailableError:
        return UnavailableError(
            limits.unusable_message(f"{self.platform.label}, device {self.ordinal}", call,
                                    self.stuck),
            plugin=self.platform.label, call=call)

    def _mark_stuck(self, reason: str) -> None:
        """Closes the executor without calling the plugin: every callback is replaced by one
        that raises `UnavailableError` naming ``reason``; memory pools stop handing out
        memory (their C state is left as it is: a thread stuck in the plugin may hold it);
        what the device holds is left to the operating system."""
        with self._lock:
            if isinstance(self._plugin_allocate, _Refused):
                return
            self.stuck = reason
            self._closed = True
            self._fns = {name: (_Refused(self, f"SP_StreamExecutor.{name}") if fn is not None
                                else None) for name, fn in self._fns.items()}
            self._fn_addresses = {}
            self._plugin_allocate = _Refused(self, "SP_StreamExecutor.allocate")
            self._stream_names_fn = None
            if self._live_handles_fn is not None:
                self._live_handles_fn = _Refused(self, "PLUGGABLE_LiveHandlesExt.get_live_handles")
            self._device_fns = None
            for pool in (self._allocator, self._host_allocator):
                if pool is not None:
                    pool._abandon()

    def _check_open(self) -> None:
        if self._closed:
            if self.stuck:
                raise self._unusable(_caller_name())
            raise FailedPreconditionError(
                f"{self.name} is closed; its memory, streams and events can no longer be used",
                plugin=self.platform.label, call="StreamExecutor")

    def _queue_release(self, kind: str, handle: Any, keep: Any = None) -> None:
        """Called by finalizers: remember the release (and what must stay alive until it is
        done) for the next safe point."""
        with self._lock:
            self._pending_releases.append((kind, handle, keep))

    def flush_releases(self) -> None:
        """Carries out the releases finalizers queued."""
        if not self._pending_releases:
            return
        with self._lock:
            pending, self._pending_releases = self._pending_releases, []
        for kind, handle, _keep in pending:
            try:
                self._release_now(kind, handle)
            except Exception as exc:  # a finalizer's release: nothing can be raised
                warn(f"{self.name}: releasing a {kind} failed: {exc}",
                     PluggableWarning)

    def _release_now(self, kind: str, handle: Any) -> None:
        if self._closed:
            if kind in ("host_memory_deallocate", "unified_memory_deallocate") \
                    and not self.stuck:
                release_host_memory(self._host_memory_key(), handle)
            return  # destroying the executor released everything
        if kind == "deallocate":  # the bytes of the SP_DeviceMemoryBase allocate filled
            self._fns["deallocate"](self._device_ptr,
                                    ctypes.byref(SP_DeviceMemoryBase.from_buffer_copy(handle)))
        elif kind in ("host_memory_deallocate", "unified_memory_deallocate"):
            release_host_memory(self._host_memory_key(), handle)
            self._fns[kind](self._device_ptr, handle)
        elif kind == "destroy_stream":
            self._destroy_stream(handle)
        elif kind == "destroy_event":
            self._fns["destroy_event"](self._device_ptr, handle)
        elif kind == "destroy_timer":
            self._fns["destroy_timer"](self._device_ptr, handle)
        else:
            raise AssertionError(kind)

    def _destroy_stream(self, handle: Any) -> None:
        """``destroy_stream``, which finishes the stream's work and may block: on a helper
        thread, bounded by the deadline (`_compiled.bounded_call`). A call that does not
        return in time is abandoned and the device is marked stuck: closed, its plugin
        objects left to the operating system, every further use a DeadlineExceededError."""
        if self.stuck:
            return  # nothing is called in a plugin found stuck: the stream is left to it
        limit = limits.deadline()
        if not limit:
            self._fns["destroy_stream"](self._device_ptr, handle)
            return
        address = self._fn_addresses.get("destroy_stream")
        if address is None:
            address = self._fn_addresses["destroy_stream"] = ctypes.cast(
                self._fn("destroy_stream"), ctypes.c_void_p).value
        started = time.monotonic()
        try:
            returned = _native.compiled.bounded_call(address, self._device_address,
                                                     handle or 0, limit)
        except BaseException:  # Ctrl-C while waiting: the call goes on, its plugin is lost
            limits.mark_plugin_stuck(
                self.platform.path, f"SP_StreamExecutor.destroy_stream of device "
                                    f"{self.ordinal} was interrupted (Ctrl-C) before it returned")
            raise
        if not returned:
            error = self._deadline_error("destroy_stream", limit, time.monotonic() - started)
            limits.mark_plugin_stuck(
                self.platform.path, f"SP_StreamExecutor.destroy_stream of device "
                                    f"{self.ordinal} did not return within the deadline of "
                                    f"{limit:g} s")
            raise DeadlineExceededError(
                f"{error}. The plugin is marked stuck: none of its devices, kernels or its "
                f"profiler is used again in this process, and what they hold is left to the "
                f"operating system", plugin=self.platform.label,
                call="SP_StreamExecutor.destroy_stream")

    def _defer_warning(self, message: str, category: type) -> None:
        """Keeps a warning raised on a plugin's thread for the user's next synchronisation."""
        with self._lock:
            self._deferred_warnings.append((message, category))

    def _flush_warnings(self) -> None:
        _report_late_status_writes()
        if not self._deferred_warnings:
            return
        with self._lock:
            pending, self._deferred_warnings = self._deferred_warnings, []
        for message, category in pending:
            warn(f"{self.name}: {message}", category)

    # -- memory ------------------------------------------------------------------------------
    def allocate(self, size: int, memory_space: int = 0) -> DeviceMemory:
        """Allocates ``size`` bytes of device memory."""
        if self._closed or self._pending_releases:
            self._check_open()
            self.flush_releases()
        # In C: the struct is a fresh one inside the new DeviceMemory, and close() hands it back.
        try:
            memory = self._plugin_allocate(self, size, memory_space)
        except InternalError as exc:  # the block failed the checks the BFC makes too
            raise InternalError(f"{self.platform.label}, device {self.ordinal}: {exc}",
                                plugin=self.platform.label,
                                call="SP_StreamExecutor.allocate") from None
        if memory is None:
            free_total = self.memory_usage()
            detail = (f"; {free_total[0]} of {free_total[1]} bytes are free"
                      if free_total else "")
            raise ResourceExhaustedError(
                f"{self.platform.label}, device {self.ordinal}: SP_StreamExecutor.allocate "
                f"could not allocate {size} bytes in memory space {memory_space}{detail}. "
                f"Free device memory (close() tensors and buffers) or allocate less",
                plugin=self.platform.label, call="SP_StreamExecutor.allocate")
        return memory

    def deallocate(self, memory: DeviceMemory) -> None:
        memory.close()

    def host_memory_allocate(self, size: int) -> HostMemory:
        """Host memory the device copies to and from fastest (pinned, on real hardware).

        Without the plugin's ``host_memory_allocate`` this is ordinary page-aligned host
        memory."""
        self._check_open()
        self.flush_releases()
        size = _non_negative(size, "size", "host_memory_allocate")
        fn = self._fns.get("host_memory_allocate")
        if fn is None or self._fns.get("host_memory_deallocate") is None:
            return _plain_host_memory(self, size)
        address = fn(self._device_ptr, size) if size else None
        if size and not address:
            raise ResourceExhaustedError(
                f"{self.platform.label}, device {self.ordinal}: "
                f"SP_StreamExecutor.host_memory_allocate could not allocate {size} bytes",
                plugin=self.platform.label, call="SP_StreamExecutor.host_memory_allocate")
        if not size:
            return _plain_host_memory(self, 0)
        self._claim_host_memory("host_memory_allocate", address, size)
        return HostMemory(self, address, size, "host", "host_memory_deallocate")

    def unified_memory_allocate(self, size: int) -> HostMemory:
        """Memory both the host and the device can address."""
        self._check_open()
        self.flush_releases()
        size = _non_negative(size, "size", "unified_memory_allocate")
        if not self.platform.supports_unified_memory:
            raise UnimplementedError(
                f"{self.platform.label} does not support unified memory "
                f"(SP_Platform.supports_unified_memory is false)",
                plugin=self.platform.label, call="SP_StreamExecutor.unified_memory_allocate")
        fn = self._fn("unified_memory_allocate")
        self._fn("unified_memory_deallocate")
        if not size:
            return _plain_host_memory(self, 0)
        address = fn(self._device_ptr, size)
        if not address:
            raise ResourceExhaustedError(
                f"{self.platform.label}, device {self.ordinal}: "
                f"SP_StreamExecutor.unified_memory_allocate could not allocate {size} bytes",
                plugin=self.platform.label, call="SP_StreamExecutor.unified_memory_allocate")
        self._claim_host_memory("unified_memory_allocate", address, size)
        return HostMemory(self, address, size, "unified", "unified_memory_deallocate")

    def _host_memory_key(self) -> int:
        """The key the runtime library tracks the platform's live host-addressable blocks
        under: the address of its host_memory_allocate, else of its unified_memory_allocate
        (as `_runtime/bfc.c`'s pinned pool does)."""
        fn = self._fns.get("host_memory_allocate") or self._fns.get("unified_memory_allocate")
        return ctypes.cast(fn, ctypes.c_void_p).value or 0

    def _claim_host_memory(self, name: str, address: int, size: int) -> None:
        """Checks the block ``name`` returned as `allocate`'s are checked (alignment, room in
        the address space, no overlap with a live host or unified block of any device of
        the platform) and claims it until it is freed; refuses it with an `InternalError`
        naming the plugin and the addresses, giving it back unless it overlaps live memory
        (freeing it could free that memory too)."""
        call = f"SP_StreamExecutor.{name}"
        claimed, why = claim_host_memory(self._host_memory_key(), call, address, size)
        if claimed == 1:
            return
        if claimed == 0:
            self._fns[name.replace("allocate", "deallocate")](self._device_ptr, address)
        raise InternalError(
            f"{self.platform.label}, device {self.ordinal}: {why}. The plugin's allocator is "
            f"not to be trusted: report this to the plugin's authors",
            plugin=self.platform.label, call=call, plugin_message=why)

    def allocator_stats(self) -> Optional[Dict[str, int]]:
        """The plugin's allocator statistics under the ``SP_AllocatorStats`` names, or None
        when it keeps none. Limits the plugin does not have are left out."""
        self._check_open()
        fn = self._fns.get("get_allocator_stats")
        if fn is None:
            return None
        stats = alloc_struct(SP_AllocatorStats)
        if not fn(self._device_ptr, ctypes.byref(stats)):
            return None
        size = int(stats.struct_size) or SP_AllocatorStats.struct_size()
        out = {}
        for field in _STATS_FIELDS:
            if not SP_AllocatorStats.field_present(field, size):
                continue
            if field == "bytes_limit" and not stats.has_bytes_limit:
                continue
            if field == "bytes_reservable_limit" and not stats.has_bytes_reservable_limit:
                continue
            out[field] = int(getattr(stats, field))
        return out

    def memory_usage(self) -> Optional[Tuple[int, int]]:
        """``(free, total)`` device memory in bytes, or None when the plugin cannot say."""
        fn = self._fns.get("device_memory_usage")
        if fn is None:
            return None
        free, total = ctypes.c_int64(0), ctypes.c_int64(0)
        if not fn(self._device_ptr, ctypes.byref(free), ctypes.byref(total)):
            return None
        free_bytes, total_bytes = int(free.value), int(total.value)
        problem = None
        if total_bytes < 0:
            problem = f"total_bytes is negative ({total_bytes})"
        elif free_bytes < 0:
            problem = f"free_bytes is negative ({free_bytes})"
        elif free_bytes > total_bytes:
            problem = f"free_bytes ({free_bytes}) is larger than total_bytes ({total_bytes})"
        if problem is not None:
            reason = (f"SP_StreamExecutor.device_memory_usage of device {self.ordinal}: "
                      f"{problem}; memory figures must satisfy 0 <= free <= total")
            raise InternalError(f"{self.platform.label}: {reason}", plugin=self.platform.label,
                                call="SP_StreamExecutor.device_memory_usage",
                                plugin_message=reason)
        return free_bytes, total_bytes

    def live_handles(self) -> Optional[Dict[str, int]]:
        """The plugin's counts of live streams, events, timers and allocations, when it
        provides the PLUGGABLE_EXT_LIVE_HANDLES extension; for leak tests."""
        if self._live_handles_fn is None:
            return None
        counts = alloc_struct(plugin_ext.PLUGGABLE_LiveHandles)
        self._live_handles_fn(self._device_ptr, ctypes.byref(counts))
        return {name: int(getattr(counts, name))
                for name, _ in plugin_ext.PLUGGABLE_LiveHandles._fields_
                if name != "struct_size"}

    # -- pools and the event manager, made on first use --------------------------------------
    @property
    def allocator(self):
        """The device's BFC allocator (`pluggable.devices.allocator.BFCAllocator`), made on
        first use with `allocator_options` (memory_limit, allow_growth)."""
        if self._allocator is None:
            from .allocator import BFCAllocator

            with self._lock:
                if self._allocator is None:
                    self._check_open()
                    self._allocator = BFCAllocator(self, "device", **self.allocator_options)
        return self._allocator

    @property
    def allocator_created(self) -> bool:
        return self._allocator is not None

    @property
    def host_allocator(self):
        """The pinned host pool that stages copies for plugins needing pinned memory."""
        if self._host_allocator is None:
            from .allocator import BFCAllocator

            with self._lock:
                if self._host_allocator is None:
                    self._check_open()
                    self._host_allocator = BFCAllocator(self, "host")
        return self._host_allocator

    @property
    def staging(self):
        """The `pluggable.devices.staging.StagingRing` small copies go through, made on first
        use."""
        if self._staging is None:
            from .staging import StagingRing

            with self._lock:
                if self._staging is None:
                    self._check_open()
                    self._staging = StagingRing(self)
        return self._staging

    @property
    def event_manager(self):
        """The device's `EventManager` (one poller thread, started on first use)."""
        if self._event_manager is None:
            from .event_manager import EventManager

            with self._lock:
                if self._event_manager is None:
                    self._check_open()
                    self._event_manager = EventManager(self)
        return self._event_manager

    # -- copies ------------------------------------------------------------------------------
    def _copy_size(self, size: Optional[int], limits: List[Tuple[int, str]], call: str) -> int:
        """``size``, by default the whole source (the first limit), checked against every
        buffer involved: a copy never silently drops bytes."""
        size = limits[0][0] if size is None else _non_negative(size, "size", call)
        for limit, what in limits:
            if size > limit:
                raise InvalidArgumentError(
                    f"{call}: size {size} is larger than the {what} ({limit} bytes)",
                    plugin=self.platform.label, call=call)
        return size

    def after_work(self, stream: "Stream", fn: Callable[[], Any]):
        """Runs ``fn`` once the work enqueued on ``stream`` so far is done (on the event
        manager's thread) and returns the `Marker` of that point. When no event can be
        recorded, waits for the stream instead, runs ``fn`` and returns None: whatever
        ``fn`` releases is never released under the device's feet."""
        try:
            return self.event_manager.then_execute(stream, fn)
        except PluggableError:
            self.block_host_until_done(stream)
            fn()
            return None

    def _keep_until_done(self, stream: "Stream", obj: Any):
        """Keeps ``obj``, host memory that work just enqueued on ``stream`` reads or writes,
        alive until the stream has passed this point."""
        from .event_manager import Keep

        return self.after_work(stream, Keep(obj))

    def memcpy_htod(self, stream: "Stream", dst: DeviceMemory, src: Any,
                    size: Optional[int] = None):
        """Enqueues a copy of ``size`` bytes (default: all of ``src``) from host ``src`` to
        ``dst`` on ``stream``. ``src`` stays referenced until the copy is done; returns the
        event manager's `Marker` of that point."""
        self._check_stream(stream)
        address, nbytes, keep = host_buffer(src, False, "memcpy_htod source")
        size = self._copy_size(size, [(nbytes, "host source"), (dst.size, "device destination")],
                               "memcpy_htod")
        self._copy("memcpy_htod", stream, size, stream._handle, dst._ref, address, size)
        return self._keep_until_done(stream, keep)

    def memcpy_dtoh(self, stream: "Stream", dst: Any, src: DeviceMemory,
                    size: Optional[int] = None):
        """Enqueues a copy from device ``src`` into the writable host buffer ``dst``, which
        stays referenced until the copy is done; returns the `Marker` of that point."""
        self._check_stream(stream)
        address, nbytes, keep = host_buffer(dst, True, "memcpy_dtoh destination")
        size = self._copy_size(size, [(src.size, "device source"), (nbytes, "host destination")],
                               "memcpy_dtoh")
        self._copy("memcpy_dtoh", stream, size, stream._handle, address, src._ref, size)
        return self._keep_until_done(stream, keep)

    def memcpy_dtod(self, stream: "Stream", dst: DeviceMemory, src: DeviceMemory,
                    size: Optional[int] = None) -> None:
        """Enqueues a device-to-device copy on ``stream``."""
        self._check_stream(stream)
        size = self._copy_size(size, [(src.size, "device source"),
                                      (dst.size, "device destination")], "memcpy_dtod")
        self._copy("memcpy_dtod", stream, size, stream._handle, dst._ref, src._ref, size)

    def _copy(self, name: str, stream: Optional["Stream"], size: int, *args) -> None:
        """Calls the copy ``name``; while a profiling session records, also tells its host
        tracer (direction, bytes, device, stream)."""
        tracer = _tracer
        if tracer is None:
            self._call(name, *args)
            return
        start = time.time_ns()
        self._call(name, *args)
        tracer.copy(name, self, stream, size, start, time.time_ns())

    def _sync_copy(self, name: str, async_name: str, args_sync, args_async) -> None:
        size = args_sync[-1]
        if self._fns.get(name) is not None:
            self._copy(name, None, size, *args_sync)
            return
        stream = self._fallback_stream()
        self._copy(async_name, stream, size, stream._handle, *args_async)
        stream.synchronize()

    def name_stream(self, stream: "Stream", name: str) -> None:
        """Gives ``stream`` a name for profiles ("compute", "host_to_device", ...): kept on the
        stream and, when the plugin provides PLUGGABLE_StreamNamesExt, passed to it so its
        profiler names the stream's timeline."""
        stream.name = name
        if self._stream_names_fn is not None and not self._closed:
            self._stream_names_fn(self._device_ptr, stream._handle, name.encode())

    def sync_memcpy_htod(self, dst: DeviceMemory, src: Any, size: Optional[int] = None) -> None:
        """Copies host ``src`` to ``dst`` and returns when the copy is done."""
        self._check_open()
        address, nbytes, keep = host_buffer(src, False, "sync_memcpy_htod source")
        size = self._copy_size(size, [(nbytes, "host source"), (dst.size, "device destination")],
                               "sync_memcpy_htod")
        self._sync_copy("sync_memcpy_htod", "memcpy_htod", (dst._ref, address, size),
                        (dst._ref, address, size))
        del keep

    def sync_memcpy_dtoh(self, dst: Any, src: DeviceMemory, size: Optional[int] = None) -> None:
        """Copies device ``src`` into host ``dst`` and returns when the copy is done."""
        self._check_open()
        address, nbytes, keep = host_buffer(dst, True, "sync_memcpy_dtoh destination")
        size = self._copy_size(size, [(src.size, "device source"), (nbytes, "host destination")],
                               "sync_memcpy_dtoh")
        self._sync_copy("sync_memcpy_dtoh", "memcpy_dtoh", (address, src._ref, size),
                        (address, src._ref, size))
        del keep

    def sync_memcpy_dtod(self, dst: DeviceMemory, src: DeviceMemory,
                         size: Optional[int] = None) -> None:
        """Copies device ``src`` to device ``dst`` and returns when the copy is done."""
        self._check_open()
        size = self._copy_size(size, [(src.size, "device source"),
                                      (dst.size, "device destination")], "sync_memcpy_dtod")
        self._sync_copy("sync_memcpy_dtod", "memcpy_dtod", (dst._ref, src._ref, size),
                        (dst._ref, src._ref, size))

    def _fallback_stream(self) -> "Stream":
        with self._lock:
            if self._internal_stream is None:
                self._internal_stream = self.create_stream()
            return self._internal_stream

    # -- memset ------------------------------------------------------------------------------
    def _fill(self, name: str, stream: "Stream", dst: DeviceMemory, size: Optional[int],
              pattern: Optional[int], element: int) -> None:
        self._check_stream(stream)
        size = self._copy_size(size, [(dst.size, "device destination")], name)
        if size % element:
            raise InvalidArgumentError(
                f"{name}: size {size} is not a multiple of {element} bytes",
                plugin=self.platform.label, call=name)
        if self._fns.get(name) is not None:
            args = (stream._handle, dst._ref) + (() if pattern is None else (pattern,)) + (size,)
            self._call(name, *args)
            return
        # Fallback: fill a host buffer and copy it, in stream order.
        import numpy as np

        dtype = np.uint32 if element == 4 else np.uint8
        staged = np.full(size // element, pattern or 0, dtype=dtype)
        self._call("memcpy_htod", stream._handle, dst._ref, staged.ctypes.data if size else 0,
                   size)
        self._keep_until_done(stream, staged)

    def mem_zero(self, stream: "Stream", dst: DeviceMemory, size: Optional[int] = None) -> None:
        """Enqueues zeroing ``size`` bytes (default: all) of ``dst``."""
        self._fill("mem_zero", stream, dst, size, None, 1)

    def memset(self, stream: "Stream", dst: DeviceMemory, pattern: int,
               size: Optional[int] = None) -> None:
        """Enqueues setting ``size`` bytes of ``dst`` to the byte ``pattern``."""
        if not 0 <= int(pattern) <= 0xFF:
            raise InvalidArgumentError(f"memset: pattern {pattern} is not a byte (0..255)",
                                       call="memset")
        self._fill("memset", stream, dst, size, int(pattern), 1)

    def memset32(self, stream: "Stream", dst: DeviceMemory, pattern: int,
                 size: Optional[int] = None) -> None:
        """Enqueues filling ``dst`` with the 32-bit ``pattern``; ``size`` in bytes, a
        multiple of 4."""
        if not 0 <= int(pattern) <= 0xFFFFFFFF:
            raise InvalidArgumentError(
                f"memset32: pattern {pattern} does not fit in 32 bits", call="memset32")
        self._fill("memset32", stream, dst, size, int(pattern), 4)

    # -- streams, events, timers -------------------------------------------------------------
    def create_stream(self) -> "Stream":
        from .stream import Stream

        self._check_open()
        self.flush_releases()
        handle = ctypes.c_void_p()
        self._call("create_stream", ctypes.byref(handle))
        return Stream(self, handle.value)

    def create_event(self) -> "Event":
        from .event import Event

        self._check_open()
        self.flush_releases()
        handle = ctypes.c_void_p()
        self._call("create_event", ctypes.byref(handle))
        return Event(self, handle.value)

    def create_timer(self) -> "Timer":
        from .timer import Timer

        self._check_open()
        self.flush_releases()
        if not self.supports_timers:
            raise UnimplementedError(
                f"{self.platform.label} does not implement timers (create_timer, "
                f"destroy_timer, start_timer, stop_timer and SP_PlatformFns.create_timer_fns)",
                plugin=self.platform.label, call="SP_StreamExecutor.create_timer")
        handle = ctypes.c_void_p()
        self._call("create_timer", ctypes.byref(handle))
        return Timer(self, handle.value)

    def _device_ref(self, address: int, nbytes: int):
        """The calling thread's scratch SP_DeviceMemoryBase over ``nbytes`` of device memory
        at ``address``, by reference, for one plugin call (copies of tensors' buffers)."""
        base, ref = self._scratch.pair
        base.opaque, base.size, base.payload = address, nbytes, 0
        return ref

    def _check_stream(self, stream: "Stream") -> None:
        self._check_open()
        if stream.executor is not self:
            raise InvalidArgumentError(
                f"the stream belongs to {stream.executor.name}, not {self.name}",
                plugin=self.platform.label, call="stream")
        stream._check_open()

    def host_callback(self, stream: "Stream", fn: Callable[[], Any]) -> None:
        """Enqueues ``fn()`` on ``stream``: it runs once the work before it is done. If it
        raises, the plugin gets an error status and the user a `CallbackWarning` at the next
        synchronisation."""
        self._check_stream(stream)
        if not callable(fn):
            raise TypeError(f"host_callback needs a callable, not {type(fn).__name__}")
        enqueue = self._fn("host_callback")
        token = CALLBACKS.add(fn, self, f"host callback {getattr(fn, '__name__', fn)!r}")
        stream._callback_tokens.add(token)
        enqueued = False
        try:
            enqueued = enqueue(self._device_ptr, stream._handle, CALLBACKS.trampoline, token)
        finally:
            if not enqueued:  # refused, or the call raised: it will never run
                CALLBACKS.discard(token)
                stream._callback_tokens.discard(token)
        if not enqueued:
            raise self._error(TF_Code.TF_INTERNAL, "the plugin could not enqueue the callback",
                              "SP_StreamExecutor.host_callback")

    def synchronize_all_activity(self, timeout: Optional[float] = None) -> None:
        """Waits until every stream of the device is done, and its host callbacks have run,
        at most the deadline (`pluggable.config.set_deadline`; ``timeout`` overrides it)."""
        self._check_open()
        before = CALLBACKS.next_token
        self._bounded_call("synchronize_all_activity", timeout)
        CALLBACKS.wait_until_run(self, before)
        self._flush_warnings()

    def block_host_until_done(self, stream: "Stream", timeout: Optional[float] = None) -> None:
        """Waits until ``stream`` is done; raises if its work failed, and
        `DeadlineExceededError` past the deadline."""
        self._check_stream(stream)
        try:
            limit = limits.deadline() if timeout is None else timeout
            if not limit and self._fns.get("block_host_until_done") is not None:
                self._call("block_host_until_done", stream._handle)
                stream.raise_if_error()  # a plugin may report failed work only there
            else:
                # With a deadline the host polls an event (the event manager's pooled one): a
                # blocking call that never returns could not be given up on.
                try:
                    state = self.event_manager.wait(stream, limit, "block_host_until_done")
                except DeadlineExceededError:
                    raise
                except PluggableError:
                    stream.raise_if_error()  # the stream's own words, when it has them
                    raise
                # The stream's own error even when the event completed: a plugin may report
                # failed work only through get_stream_status.
                stream.raise_if_error()
                if state == SE_EventStatus.SE_EVENT_ERROR:
                    raise self._error(TF_Code.TF_INTERNAL, "the event completed with an error",
                                      "SP_StreamExecutor.get_event_status")
        finally:
            self._flush_warnings()

    def block_host_for_event(self, event: "Event", timeout: Optional[float] = None) -> None:
        """Waits until ``event`` has completed; raises if it completed with an error, and
        `DeadlineExceededError` past the deadline."""
        self._check_open()
        limit = limits.deadline() if timeout is None else timeout
        if not limit and self._fns.get("block_host_for_event") is not None:
            self._call("block_host_for_event", event._handle)
        else:
            self._poll_event(event._handle, "block_host_for_event", limit)
        self._flush_warnings()

    def event_state(self, handle: Any) -> int:
        """``get_event_status`` of the event ``handle``, checked: a value outside
        ``SE_EventStatus`` raises `InternalError` naming the plugin and the value."""
        value = self._fns["get_event_status"](self._device_ptr, handle)
        if value not in _EVENT_STATES:
            raise self._error(
                TF_Code.TF_INTERNAL,
                f"it returned {value}, which is not an SE_EventStatus value (0 to 3); the "
                f"event is treated as failed", "SP_StreamExecutor.get_event_status")
        return value

    def _poll_event(self, handle: Any, call: str, limit: float) -> None:
        """Polls the event's status until it completes, fails (raised), or ``limit`` seconds
        (0: no limit) have passed."""
        if self.await_event(handle, call, limit) == SE_EventStatus.SE_EVENT_ERROR:
            raise self._error(TF_Code.TF_INTERNAL, "the event completed with an error",
                              "SP_StreamExecutor.get_event_status")

    def await_event(self, handle: Any, call: str, limit: Optional[float] = None) -> int:
        """Waits until the event ``handle`` is COMPLETE or ERROR and returns which; raises
        `DeadlineExceededError` past ``limit`` seconds (default: the deadline; 0: none).

        The status is polled: for the first ``_SPIN_SECONDS`` with only a yield of the CPU
        between polls (a small copy or kernel is done within microseconds, while even
        ``time.sleep(0)`` costs 50-100 µs of timer slack), then with sleeps that double up
        to 1 ms. Each poll is a plugin call, which lets other threads have the GIL."""
        state = self.event_state(handle)
        if state == _COMPLETE or state == _ERROR:
            return state
        if limit is None:
            limit = limits.deadline()
        clock = time.monotonic
        started = clock()
        spin_until = started + _SPIN_SECONDS
        delay = 0.0
        while True:
            if delay:
                time.sleep(delay)
            else:
                _sched_yield()
            state = self.event_state(handle)
            if state == _COMPLETE or state == _ERROR:
                return state
            now = clock()
            if limit and now - started > limit:
                raise self._deadline_error(call, limit, now - started)
            if now > spin_until:
                delay = min(0.001, delay * 2 or 0.00002)

    def _deadline_error(self, call: str, limit: float, waited: float) -> DeadlineExceededError:
        return DeadlineExceededError(
            f"{self.platform.label}, device {self.ordinal}: {call} did not finish within the "
            f"deadline of {limit:g} s (waited {waited:.2f} s); the device's work may be stuck. "
            f"Give it longer with pluggable.config.set_deadline(seconds) or "
            f"{limits.DEADLINE_VARIABLE} (0 turns the deadline off)",
            plugin=self.platform.label, call=f"SP_StreamExecutor.{call}")

    def _bounded_call(self, name: str, timeout: Optional[float]) -> None:
        """``_call(name)`` for a blocking call that has no status to poll: run on a helper
        thread (pluggable._compiled's pool, _compiled/blocking.c) and given up on past the deadline.
        A call given up on goes on with its status, which is then never freed or reused."""
        if self.stuck:
            raise self._unusable(f"SP_StreamExecutor.{name}")
        limit = limits.deadline() if timeout is None else timeout
        if not limit:
            self._call(name)
            return
        address = self._fn_addresses.get(name)
        if address is None:
            address = self._fn_addresses[name] = ctypes.cast(self._fn(name),
                                                              ctypes.c_void_p).value
        status = _native.acquire_status()
        started = time.monotonic()
        try:
            returned = _native.compiled.bounded_call(address, self._device_address,
                                                 status.address, limit)
        except BaseException:  # a signal handler's (Ctrl-C): the call goes on
            _native.abandon_status(status)
            raise
        if not returned:
            _native.abandon_status(status)
            raise self._deadline_error(name, limit, time.monotonic() - started)
        try:
            code = _native.TF_GetCode(status.address)
            if code:
                raise self._error(code, status.message, f"SP_StreamExecutor.{name}")
        finally:
            _native.release_status(status)

    # -- lifetime ----------------------------------------------------------------------------
    @property
    def is_closed(self) -> bool:
        return self._closed

    def close(self, timeout: Optional[float] = None) -> None:
        """Destroys the device: waits for its work (at most ``timeout`` seconds, by default
        the deadline), then frees everything the plugin made. Work not done in time is left
        to the operating system with a warning, and the device with it."""
        if self._closed:
            return
        if self._staging is not None:
            self._staging.close()  # its fences' events go back to the event manager's pool
        if self._event_manager is not None:
            if not self._event_manager.close(timeout):  # runs the pending releases
                self._closed = True  # left behind on purpose: the plugin still works on it
                return
        if self._internal_stream is not None:
            self._internal_stream.close()
        self.flush_releases()
        try:
            self._bounded_call("synchronize_all_activity", timeout)
        except DeadlineExceededError as exc:
            warn(f"{self.name}: {exc}; the device is left to the operating system",
                 PluggableWarning)
            self._closed = True
            return
        except Exception as exc:
            warn(f"{self.name}: synchronising before close failed: {exc}",
                 PluggableWarning)
        for pool in (self._allocator, self._host_allocator):
            if pool is not None:
                pool.close()
        self._closed = True
        p = self.platform
        p._platform_fns.destroy_stream_executor(p._platform_ref, ctypes.byref(self._se_storage))
        if self._device_fns is not None:
            destroy = optional_callback(type(p._platform_fns), p._platform_fns,
                                        "destroy_device_fns")
            if destroy is not None:
                destroy(p._platform_ref, ctypes.byref(self._device_fns_storage))
        self._destroy_device()

    def __repr__(self):
        return f"<StreamExecutor {self.name}{' closed' if self._closed else ''}>"

    # -- details -----------------------------------------------------------------------------
    def details(self) -> Dict[str, Any]:
        """Everything the plugin says about the device; keys it gives nothing for are left
        out."""
        out: Dict[str, Any] = {}
        if self.hardware_name:
            out["device_name"] = self.hardware_name
        if self.device_vendor:
            out["vendor"] = self.device_vendor
        if self.pci_bus_id:
            out["pci_bus_id"] = self.pci_bus_id
        fns = self._device_fns
        if fns is not None:
            for key, field in (("numa_node", "get_numa_node"),
                               ("memory_bandwidth", "get_memory_bandwidth"),
                               ("gflops", "get_gflops")):
                fn = optional_callback(SP_DeviceFns, fns, field)
                value = fn(self._device_ptr) if fn is not None else -1
                if value >= 0:  # negative means unknown
                    out[key] = value
        usage = self.memory_usage()
        if usage is not None:
            out["memory_total"] = usage[1]
        return out


def _check_groups(fns: Dict[str, Any], platform: "Platform") -> None:
    """Optional callbacks that only make sense together: all of a group or none of it."""
    groups = [("host_memory_allocate", "host_memory_deallocate"),
              ("unified_memory_allocate", "unified_memory_deallocate"), _TIMER_FNS]
    for group in groups:
        present = [name for name in group if fns.get(name) is not None]
        if present and len(present) != len(group):
            missing = [name for name in group if name not in present]
            raise ValidationError(
                f"SP_StreamExecutor sets {', '.join(present)} but not {', '.join(missing)}; "
                f"these callbacks go together: set all of them or none")
    if platform.supports_unified_memory and fns.get("unified_memory_allocate") is None:
        raise ValidationError(
            "SP_Platform.supports_unified_memory is set but SP_StreamExecutor."
            "unified_memory_allocate is NULL; set both callbacks or clear the flag")
    has_timers = fns.get("create_timer") is not None
    if has_timers != (platform._timer_fns is not None):
        raise ValidationError(
            "timers need both SP_StreamExecutor's create_timer, destroy_timer, start_timer, "
            "stop_timer and SP_PlatformFns.create_timer_fns; the plugin sets only "
            + ("the former" if has_timers else "create_timer_fns"))


def _non_negative(value: Any, name: str, call: str) -> int:
    try:
        number = operator.index(value)
    except TypeError:
        raise TypeError(f"{call}: {name} must be an integer, not {type(value).__name__}") \
            from None
    if number < 0:
        raise InvalidArgumentError(f"{call}: {name} must be a non-negative integer, got "
                                   f"{value!r}", call=call)
    if number >= 1 << 63:
        raise InvalidArgumentError(f"{call}: {name} {number} is too large", call=call)
    return number


def _allocation_arguments(size: Any, memory_space: Any) -> Tuple[int, int]:
    """`allocate`'s size and memory space as integers in range, or the error that says why
    not (called from C when they are not plain integers in range)."""
    size = _non_negative(size, "size", "allocate")
    try:
        space = operator.index(memory_space)
    except TypeError:
        raise TypeError(f"allocate: memory_space must be an integer, not "
                        f"{type(memory_space).__name__}") from None
    if not -1 << 63 <= space < 1 << 63:
        raise InvalidArgumentError(f"allocate: memory_space {space} does not fit in int64",
                                   call="allocate")
    return size, space


def _plain_host_memory(executor: StreamExecutor, size: int) -> HostMemory:
    """Page-aligned host memory from NumPy, for plugins without host_memory_allocate."""
    import numpy as np

    raw = np.empty(size + 4096, dtype=np.uint8)
    offset = (-raw.ctypes.data) % 4096
    memory = HostMemory(executor, raw.ctypes.data + offset if size else 0, size, "host", None)
    memory._array = raw[offset:offset + size]
    return memory
