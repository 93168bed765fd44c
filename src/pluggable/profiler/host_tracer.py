"""The host tracer: what the host did during a profiling session, on a ``/host:CPU`` plane.

While a session records, `pluggable._compiled` records every op run from a remembered plan and
every tensor buffer freed, and the hooks of `dispatch` (ops on its slow path), `executor`
(every copy) and `allocator` (allocations and frees by address) call this tracer; `Trace`
annotations add their spans. All records go to one store in `pluggable._compiled`, in the order
they were made. The plane is encoded from that store in place when the session stops (no
Python object per record); `records` shows them as plain tuples (layouts below), with
CLOCK_REALTIME nanosecond stamps, the clock of the plugins' planes. Names, shapes and stats
are worked out only when the plane is built. When no session runs the hooks cost one check of a module global
each.
"""
from __future__ import annotations

import os
import sys
import threading
from _thread import get_ident
from time import time_ns
from typing import Any, Dict, List, Optional

from ..devices import allocator as _allocator_module
from ..eager import dispatch as _dispatch_module
from ..devices import executor as _executor_module
from ..base.native import compiled as _compiled
from .xspace import PlaneBuilder

# Ops run from remembered plans and tensor buffers freed are recorded by pluggable._compiled
# (`_compiled.set_tracer`); the rest by these modules' hooks.
_HOOKED_MODULES = (_dispatch_module, _executor_module, _allocator_module)

# Kinds of record; the tuple's layout follows the kind (see the methods that append them).
OP, COPY, ALLOC, FREE, ANNOTATION = range(5)

_COPY_NAMES = {
    "memcpy_htod": ("MemcpyH2D", "host_to_device"),
    "sync_memcpy_htod": ("MemcpyH2D", "host_to_device"),
    "memcpy_dtoh": ("MemcpyD2H", "device_to_host"),
    "sync_memcpy_dtoh": ("MemcpyD2H", "device_to_host"),
    "memcpy_dtod": ("MemcpyD2D", "device_to_device"),
    "sync_memcpy_dtod": ("MemcpyD2D", "device_to_device"),
}

HOST_PLANE_NAME = "/host:CPU"

# The tracer whose records pluggable._compiled keeps (the last one installed), or None.
_store_owner = None


class HostTracer:
    """Records host activity between `install` and `uninstall`."""

    def __init__(self):
        self._records: List[tuple] = []
        # Records are kept by pluggable._compiled while the session runs, with those of the
        # C per-op path, in the order they were made; `records` has them all as tuples.
        self._append = _compiled.record
        self._baselines: Dict[int, int] = {}  # id(allocator) -> bytes in use at start
        self._allocators: Dict[int, Any] = {}
        # Thread names, taken while the threads live (a line is named after its thread).
        self.thread_names: Dict[int, str] = {}
        self._tracing_python = False

    def _ident(self) -> int:
        ident = get_ident()
        if ident not in self.thread_names:
            self.thread_names[ident] = threading.current_thread().name
        return ident

    # -- session ---------------------------------------------------------------------------
    def install(self) -> None:
        from .. import loader

        for platform in loader.manager().platforms.all():
            for executor in platform.executors:
                for bfc in (executor._allocator, executor._host_allocator):
                    if bfc is not None and not bfc.is_closed:
                        self._baselines[id(bfc)] = bfc.stats()["bytes_in_use"]
                        self._allocators[id(bfc)] = bfc
        global _store_owner
        for module in _HOOKED_MODULES:
            module._tracer = self
        _compiled.set_tracer(self)  # empties the store
        _store_owner = self

    def trace_python(self) -> None:
        """Records every Python function call (``python_tracer_level`` 1) as an event named
        as TensorFlow's Python tracer names them, ``$<file>:<line> <function>``, on the line of
        its thread: calls of the calling thread and of threads started from now on, until
        `uninstall` (``sys.setprofile`` and ``threading.setprofile``)."""
        local = threading.local()
        append, ident = self._append, self._ident
        names: Dict[Any, str] = {}  # code object -> event name

        def profile(frame, event, arg):
            if not self._tracing_python:
                sys.setprofile(None)  # a thread the session started outlives it
                return
            if event == "call":
                stack = getattr(local, "stack", None)
                if stack is None:
                    stack = local.stack = []
                stack.append(time_ns())
            elif event == "return":
                stack = getattr(local, "stack", None)
                if stack:  # frames entered before the session have no start: left out
                    start = stack.pop()
                    code = frame.f_code
                    name = names.get(code)
                    if name is None:
                        name = names[code] = (f"${os.path.basename(code.co_filename)}:"
                                              f"{code.co_firstlineno} {code.co_name}")
                    append((ANNOTATION, ident(), start, time_ns(), name, None, {}))

        self._tracing_python = True
        threading.setprofile(profile)
        sys.setprofile(profile)

    def uninstall(self) -> None:
        if self._tracing_python:
            sys.setprofile(None)
            threading.setprofile(None)
            self._tracing_python = False
        for module in _HOOKED_MODULES:
            if module._tracer is self:
                module._tracer = None
        if _compiled.get_tracer() is self:  # the hooks are off: nothing records after this
            _compiled.set_tracer(None)
            # The records stay in pluggable._compiled for build_plane (until another tracer
            # is installed, which empties the store).

    def _own_store(self) -> bool:
        """Whether the records pluggable._compiled keeps are this tracer's."""
        return _store_owner is self

    @property
    def records(self) -> List[tuple]:
        """Every record so far, oldest first (see the kinds above for their layouts), as
        tuples (made on this call; the plane itself is encoded without them)."""
        if self._own_store():
            self._records += _compiled.take_records()
        return self._records

    @records.setter
    def records(self, records: List[tuple]) -> None:
        self._records = records

    def discard(self) -> None:
        """Drops every record (those kept in pluggable._compiled too)."""
        global _store_owner
        self._records = []
        if _store_owner is self:
            if _compiled.get_tracer() is None:
                _compiled.clear_records()
            _store_owner = None

    # -- hooks (the recording cost of a session) ---------------------------------------------
    def op(self, op_name: str, inputs, attrs):
        """Runs the op through dispatch and records it (dispatch's hook), with a correlation
        id its kernel gets too (`_compiled.set_launch`, read into the kernel request)."""
        info: list = []
        correlation_id = _compiled.next_correlation_id()
        _compiled.set_launch(correlation_id)
        start = time_ns()
        try:
            outputs = _dispatch_module.execute(op_name, inputs, attrs, info)
        except BaseException:
            _compiled.set_launch(0)
            self._append((OP, self._ident(), start, time_ns(), op_name,
                          info[0] if info else None, (), correlation_id))
            raise
        end = time_ns()
        _compiled.set_launch(0)
        # The kernel's outputs were allocated inside the plugin call: the record keeps their
        # executors and sizes (never the buffers, which must not be kept alive).
        self._append((OP, self._ident(), start, end, op_name, info[0],
                      _fresh_outputs(outputs, inputs), correlation_id))
        return outputs

    def copy(self, call: str, executor, stream, nbytes: int, start: int, end: int) -> None:
        self._append((COPY, self._ident(), start, end, call, executor, stream, nbytes))

    def alloc(self, bfc, nbytes: int) -> None:
        # The bytes asked for: the plane shows the allocator's 256-byte chunk (hostplane.c).
        self._append((ALLOC, self._ident(), time_ns(), bfc, nbytes))

    def free(self, bfc, address: int) -> None:
        """A free by address (the allocator's own `deallocate`): the size is asked."""
        self._append((FREE, self._ident(), time_ns(), bfc, bfc.allocated_size(address)))

    def annotation(self, name: str, start: int, end: int, step_num, metadata) -> None:
        self._append((ANNOTATION, self._ident(), start, end, name, step_num, metadata))

    # -- the plane -------------------------------------------------------------------------
    def build_plane(self, plane_id: int) -> Optional[List[bytes]]:
        """The ``/host:CPU`` XPlane of everything recorded, serialized as an
        ``XSpace.planes`` field in pieces to be joined in order (`PlaneBuilder.space_field`);
        None when nothing was recorded."""
        builder = self.encode_plane()
        return None if builder is None else builder.space_field(plane_id)

    def encode_plane(self) -> Optional[PlaneBuilder]:
        """The ``/host:CPU`` XPlane of everything recorded, encoded but for its id, which
        ``space_field(plane_id)`` gives it (the session encodes the host plane while the
        plugins' profilers collect, and numbers it after their planes); None when nothing
        was recorded.

        The records are walked in C (`pluggable._compiled.encode_host_events`: lines per thread,
        events, allocators' running bytes in use); it calls back here for what is encoded
        once per key: the stats of an op's plan, of an (allocator, chunk size), and the rare
        copies and annotations."""
        store = _store_owner is self and _compiled.get_tracer() is None
        if not self._records and not (store and _compiled.records_kept()):
            return None
        builder = PlaneBuilder(HOST_PLANE_NAME)
        # TensorFlow's stat names, which xprof's memory profile and flows read.
        prefixes = (builder.int_stat_prefix("bytes_allocated"),
                    builder.int_stat_prefix("peak_bytes_in_use"),
                    builder.uint_stat_prefix("correlation_id"))
        stats = builder.stats
        baselines = self._baselines

        def op_stats(info) -> bytes:
            return stats(_op_stats(info))

        def allocation_stats(bfc, chunk: int) -> bytes:
            return stats({"device": _device_name(bfc.executor), "allocator_name": bfc.name,
                          "allocation_bytes": chunk, "bytes_reserved": 0})

        def baseline(bfc) -> int:
            return baselines.get(id(bfc), 0)

        def rare_event(record: tuple):
            if record[0] == COPY:
                _, _, start, end, call, executor, stream, nbytes = record
                name, direction = _COPY_NAMES[call]
                values = {"bytes": nbytes, "direction": direction,
                          "device": _device_name(executor)}
                stream_name = getattr(stream, "name", None) if stream is not None else "sync"
                if stream_name:
                    values["stream"] = stream_name
                return name, stats(values)
            _, _, start, end, name, step_num, metadata = record  # ANNOTATION
            values = dict(metadata)
            if step_num is not None:
                values["step_num"] = int(step_num)
            return name, stats(values)

        lines = _compiled.encode_host_events(self._records, prefixes, op_stats,
                                             allocation_stats, baseline, rare_event,
                                             builder.event_metadata_id, store)
        names = {t.ident: t.name for t in threading.enumerate()}
        names.update(self.thread_names)
        for ident, first, last, events in lines:
            builder.add_line(ident, names.get(ident, f"thread {ident}"), first, last, events)
        return builder


def _fresh_outputs(outputs, inputs) -> tuple:
    """(executor, bytes) of each output buffer that is not an input's (forwarded)."""
    fresh = []
    for t in outputs:
        buffer = t._buffer
        if buffer is not None and buffer.nbytes and all(
                buffer is not getattr(i, "_buffer", None) for i in inputs):
            fresh.append((buffer.executor, buffer.nbytes))
    return tuple(fresh)


def _device_name(executor) -> str:
    return f"/device:{executor.platform.device_type}:{executor.ordinal}"


def _op_stats(info) -> Dict[str, Any]:
    if info is None:  # the op raised before dispatch chose anything
        return {}
    if isinstance(info, tuple):  # the slow path's own account
        device, kernel, fallback, inputs = info
        device_name = device.name if device is not None else "/device:CPU:0"
        placement = "fallback" if fallback else ("kernel" if kernel else "cpu")
    else:  # a remembered plan, which keeps what its first run saw
        plan = info
        device_name = plan.device.name
        kernel = plan.kernel_name
        placement = "kernel"
        inputs = plan.inputs
    stats = {"is_eager": 1, "device": device_name, "placement": placement,
             "input_shapes": ";".join(str(list(shape)) for shape, _ in inputs),
             "input_dtypes": ",".join(dtype for _, dtype in inputs)}
    if kernel:
        stats["kernel"] = kernel
    return stats
