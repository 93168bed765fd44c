"""The XPU plugin's own device profiler (plugins/xpu/xpu_profiler.c), driven directly through
its TF_InitProfiler with the ctypes mirrors of pluggable_profiler.h, the way any host would:
the structs it fills, sessions, the two-call collect protocol, the XSpace it writes (decoded
with a schema built here from xplane.proto's field numbers), stream names, restart cycles,
thread safety, the event cap and the profiler fault kinds. The last test loads the same
library into TensorFlow 2.21 and profiles it there."""
from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

import pluggable
from pluggable.base import native as _native
from pluggable.abi import plugin_ext
from pluggable.abi import pluggable_profiler as tp
from pluggable.abi.tf_status import TF_Code
from pluggable.errors import (
    FailedPreconditionError, InternalError, InvalidArgumentError, ResourceExhaustedError,
    error_for_code)

# ---- an XSpace reader built from the field numbers of tsl/profiler/protobuf/xplane.proto ----
_F = descriptor_pb2.FieldDescriptorProto
_SCHEMA = {  # message: [(field, number, type, repeated, message type or None, oneof or None)]
    "XSpace": [("planes", 1, _F.TYPE_MESSAGE, True, "XPlane", None),
               ("errors", 2, _F.TYPE_STRING, True, None, None),
               ("warnings", 3, _F.TYPE_STRING, True, None, None),
               ("hostnames", 4, _F.TYPE_STRING, True, None, None)],
    "XPlane": [("id", 1, _F.TYPE_INT64, False, None, None),
               ("name", 2, _F.TYPE_STRING, False, None, None),
               ("lines", 3, _F.TYPE_MESSAGE, True, "XLine", None),
               ("event_metadata", 4, "map", True, "XEventMetadata", None),
               ("stat_metadata", 5, "map", True, "XStatMetadata", None),
               ("stats", 6, _F.TYPE_MESSAGE, True, "XStat", None)],
    "XLine": [("id", 1, _F.TYPE_INT64, False, None, None),
              ("display_id", 10, _F.TYPE_INT64, False, None, None),
              ("name", 2, _F.TYPE_STRING, False, None, None),
              ("display_name", 11, _F.TYPE_STRING, False, None, None),
              ("timestamp_ns", 3, _F.TYPE_INT64, False, None, None),
              ("duration_ps", 9, _F.TYPE_INT64, False, None, None),
              ("events", 4, _F.TYPE_MESSAGE, True, "XEvent", None)],
    "XEvent": [("metadata_id", 1, _F.TYPE_INT64, False, None, None),
               ("offset_ps", 2, _F.TYPE_INT64, False, None, "data"),
               ("num_occurrences", 5, _F.TYPE_INT64, False, None, "data"),
               ("duration_ps", 3, _F.TYPE_INT64, False, None, None),
               ("stats", 4, _F.TYPE_MESSAGE, True, "XStat", None)],
    "XStat": [("metadata_id", 1, _F.TYPE_INT64, False, None, None),
              ("double_value", 2, _F.TYPE_DOUBLE, False, None, "value"),
              ("uint64_value", 3, _F.TYPE_UINT64, False, None, "value"),
              ("int64_value", 4, _F.TYPE_INT64, False, None, "value"),
              ("str_value", 5, _F.TYPE_STRING, False, None, "value"),
              ("bytes_value", 6, _F.TYPE_BYTES, False, None, "value"),
              ("ref_value", 7, _F.TYPE_UINT64, False, None, "value")],
    "XEventMetadata": [("id", 1, _F.TYPE_INT64, False, None, None),
                       ("name", 2, _F.TYPE_STRING, False, None, None),
                       ("display_name", 4, _F.TYPE_STRING, False, None, None),
                       ("metadata", 3, _F.TYPE_BYTES, False, None, None),
                       ("stats", 5, _F.TYPE_MESSAGE, True, "XStat", None),
                       ("child_id", 6, _F.TYPE_INT64, True, None, None)],
    "XStatMetadata": [("id", 1, _F.TYPE_INT64, False, None, None),
                      ("name", 2, _F.TYPE_STRING, False, None, None),
                      ("description", 3, _F.TYPE_STRING, False, None, None)],
}


def _xspace_class():
    package = "xpu_profiler_test"
    proto = descriptor_pb2.FileDescriptorProto(name="xpu_profiler_test/xplane.proto",
                                               package=package, syntax="proto3")
    for name, fields in _SCHEMA.items():
        msg = proto.message_type.add(name=name)
        oneofs = []
        for field, number, kind, repeated, type_name, oneof in fields:
            f = msg.field.add(name=field, number=number)
            f.label = _F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL
            if kind == "map":
                entry = msg.nested_type.add(name="".join(p.title() for p in field.split("_"))
                                            + "Entry")
                entry.options.map_entry = True
                entry.field.add(name="key", number=1, type=_F.TYPE_INT64,
                                label=_F.LABEL_OPTIONAL)
                entry.field.add(name="value", number=2, type=_F.TYPE_MESSAGE,
                                label=_F.LABEL_OPTIONAL, type_name=f".{package}.{type_name}")
                f.type = _F.TYPE_MESSAGE
                f.type_name = f".{package}.{name}.{entry.name}"
                continue
            f.type = kind
            if type_name:
                f.type_name = f".{package}.{type_name}"
            if oneof:
                if oneof not in oneofs:
                    oneofs.append(oneof)
                    msg.oneof_decl.add(name=oneof)
                f.oneof_index = oneofs.index(oneof)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.XSpace"))


XSpace = _xspace_class()


def parse(data: bytes):
    space = XSpace()
    space.ParseFromString(data)
    # Map entries may be serialised in any order, so compare sizes: padded varints, zero
    # fields written where proto3 omits them or bytes nobody parsed would all differ.
    assert space.ByteSize() == len(data), "the plugin's encoding is not minimal"
    return space


def events_of(plane):
    """(line, event metadata, event, {stat name: value}) for every event of the plane; a
    ref_value is the name of the stat metadata it refers to, as readers take it."""
    stat_names = {k: v.name for k, v in plane.stat_metadata.items()}

    def value(stat):
        kind = stat.WhichOneof("value")
        return stat_names[stat.ref_value] if kind == "ref_value" else getattr(stat, kind)

    for line in plane.lines:
        for event in line.events:
            stats = {stat_names[s.metadata_id]: value(s) for s in event.stats}
            yield line, plane.event_metadata[event.metadata_id], event, stats


# ---- the profiler, driven through its C API ----------------------------------------------
class XpuProfiler:
    """The XPU library's profiler as a host sees it after TF_InitProfiler."""

    def __init__(self, lib: ctypes.CDLL):
        self.profiler = tp.TP_Profiler(struct_size=tp.TP_PROFILER_STRUCT_SIZE)
        self.fns = tp.TP_ProfilerFns(struct_size=tp.TP_PROFILER_FNS_STRUCT_SIZE)
        self.params = tp.TF_ProfilerRegistrationParams(
            struct_size=tp.TF_PROFILER_REGISTRATION_PARAMS_STRUCT_SIZE,
            major_version=tp.TP_MAJOR, minor_version=tp.TP_MINOR, patch_version=tp.TP_PATCH,
            profiler=ctypes.pointer(self.profiler), profiler_fns=ctypes.pointer(self.fns))
        init_profiler(lib, self.params)

    def _call(self, fn, *args):
        status = _native.Status()
        fn(ctypes.addressof(self.profiler), *args, status.address)
        if not status.ok:
            raise error_for_code(status.code)(status.message)

    def start(self):
        self._call(self.fns.start)

    def stop(self):
        self._call(self.fns.stop)

    def size(self) -> int:
        size = ctypes.c_size_t(12345)
        self._call(self.fns.collect_data_xspace, None, ctypes.byref(size))
        return size.value

    def fill(self, capacity: int, guard: int = 64) -> bytes:
        """The second call, with a buffer of `capacity` bytes followed by guard bytes that
        must stay untouched."""
        buffer = ctypes.create_string_buffer(b"\xa5" * (capacity + guard), capacity + guard)
        size = ctypes.c_size_t(capacity)
        self._call(self.fns.collect_data_xspace, buffer, ctypes.byref(size))
        assert buffer.raw[capacity:] == b"\xa5" * guard, "the plugin wrote past the buffer"
        assert size.value <= capacity
        return buffer.raw[:size.value]

    def collect(self) -> bytes:
        announced = self.size()
        data = self.fill(announced)
        assert len(data) == announced, "the size query does not match the bytes written"
        return data

    def session(self, work):
        """Runs `work()` inside start/stop and returns the parsed XSpace."""
        self.start()
        try:
            work()
        finally:
            self.stop()
        return parse(self.collect())

    def destroy(self):
        self.params.destroy_profiler(ctypes.addressof(self.profiler))
        self.params.destroy_profiler_fns(ctypes.addressof(self.fns))


def init_profiler(lib, params):
    status = _native.Status()
    tp.TF_InitProfiler_fn(("TF_InitProfiler", lib))(ctypes.addressof(params), status.address)
    if not status.ok:
        raise error_for_code(status.code)(status.message)


@pytest.fixture(scope="module", autouse=True)
def blocking_waits():
    """The host's blocking waits: with a deadline the host waits by recording and polling an
    event, which would add RecordEvent entries to the timelines these tests compare."""
    pluggable.config.set_deadline(0)
    yield
    pluggable.config.set_deadline(None)


@pytest.fixture(scope="module")
def xpu_lib(xpu_platform):
    lib = ctypes.CDLL(xpu_platform.path)
    lib.XPU_ProfilerHeapBlocks.restype = ctypes.c_int64
    lib.XPU_SetProfilerMaxEvents.argtypes = [ctypes.c_uint64]
    lib.XPU_SetProfilerMaxEvents.restype = None
    return lib


@pytest.fixture
def profiler(xpu_lib):
    p = XpuProfiler(xpu_lib)
    # Another user of the library (the host's own profiler session) may have left a session
    # running or stopped: finish it so that this test starts clean.
    try:
        p.stop()
    except FailedPreconditionError:
        pass
    p.size()
    yield p
    try:
        p.stop()
    except FailedPreconditionError:
        pass
    p.destroy()
    xpu_lib.XPU_SetProfilerMaxEvents(0)


def stream_names_ext(executor):
    """PLUGGABLE_StreamNamesExt.set_stream_name of the executor's SP_StreamExecutor.ext."""
    for link in plugin_ext.walk_ext_chain(executor._se.ext or 0):
        if link.type == plugin_ext.PLUGGABLE_EXT_STREAM_NAMES:
            ext = plugin_ext.PLUGGABLE_StreamNamesExt.from_address(link.address)
            assert link.struct_size == plugin_ext.PLUGGABLE_STREAM_NAMES_EXT_STRUCT_SIZE
            return lambda stream, name: ext.set_stream_name(
                ctypes.cast(executor._device_ptr, ctypes.c_void_p), stream._handle, name)
    raise AssertionError("the XPU does not chain PLUGGABLE_StreamNamesExt")


def plane_named(space, name):
    found = [p for p in space.planes if p.name == name]
    assert len(found) == 1, [p.name for p in space.planes]
    return found[0]


# ---- TF_InitProfiler ---------------------------------------------------------------------
def test_init_fills_every_slot(xpu_lib):
    p = XpuProfiler(xpu_lib)
    assert ctypes.string_at(p.profiler.device_type) == b"XPU"
    assert p.profiler.struct_size == tp.TP_PROFILER_STRUCT_SIZE
    assert p.fns.struct_size == tp.TP_PROFILER_FNS_STRUCT_SIZE
    for name in ("start", "stop", "collect_data_xspace"):
        assert getattr(p.fns, name), name
    assert p.params.destroy_profiler and p.params.destroy_profiler_fns
    p.destroy()


@pytest.mark.parametrize("defect, error, message", [
    ("params", InvalidArgumentError, "TF_ProfilerRegistrationParams.struct_size is 0"),
    ("profiler", InvalidArgumentError, "TP_Profiler.struct_size is 0"),
    ("fns", InvalidArgumentError, "TP_ProfilerFns.struct_size is 0"),
    ("no_fns", InvalidArgumentError, "params->profiler_fns is NULL"),
    ("major", FailedPreconditionError, r"version 1\.0\.1 .* major versions must match"),
])
def test_init_rejects_bad_params(xpu_lib, defect, error, message):
    profiler = tp.TP_Profiler(struct_size=tp.TP_PROFILER_STRUCT_SIZE)
    fns = tp.TP_ProfilerFns(struct_size=tp.TP_PROFILER_FNS_STRUCT_SIZE)
    params = tp.TF_ProfilerRegistrationParams(
        struct_size=tp.TF_PROFILER_REGISTRATION_PARAMS_STRUCT_SIZE,
        major_version=tp.TP_MAJOR, minor_version=tp.TP_MINOR, patch_version=tp.TP_PATCH,
        profiler=ctypes.pointer(profiler), profiler_fns=ctypes.pointer(fns))
    if defect == "params":
        params.struct_size = 0
    elif defect == "profiler":
        profiler.struct_size = 0
    elif defect == "fns":
        fns.struct_size = 0
    elif defect == "no_fns":
        params.profiler_fns = None
    else:
        params.major_version = 1
    with pytest.raises(error, match=message):
        init_profiler(xpu_lib, params)
    assert not fns.start and not params.destroy_profiler  # nothing half-filled


def test_each_registration_keeps_its_own_extensions(profiler, xpu_platform):
    """This file registers the profiler again, without PLUGGABLE_ProfilerContextExt (as
    TensorFlow does), after the host registered it with the extension: the host's sessions
    still give kernels their launch's correlation id, and a session started through the
    registration without the extension gives none, whichever registered last."""
    a = pluggable.tensor(np.arange(4, dtype=np.float32), device="XPU:0")
    for _ in range(2):  # the host's session, then this file's, then both again
        pluggable.profiler.start(None)
        try:
            pluggable.ops.add(a, a).numpy()
        finally:
            result = pluggable.profiler.stop(save=False)
        kernels = [e for e in result.events() if e.name == "AddV2" and "op_type" in e.stats]
        assert kernels and all(e.stats.get("correlation_id", 0) > 0 for e in kernels), kernels
        space = profiler.session(lambda: pluggable.ops.add(a, a).numpy())
        plane = plane_named(space, "/device:GPU:0")
        stats = [stats for _, m, _, stats in events_of(plane) if m.name == "AddV2"]
        assert stats and all("correlation_id" not in s for s in stats), stats


def test_registrations_are_bounded_and_destroy_frees_one(xpu_lib):
    made = []
    try:
        with pytest.raises(ResourceExhaustedError, match="already has 64 registrations; "
                                                         "destroy one"):
            for _ in range(65):
                made.append(XpuProfiler(xpu_lib))
        assert 1 <= len(made) < 64  # the host holds one entry already
        made.pop().destroy()
        made.append(XpuProfiler(xpu_lib))  # the freed entry serves again
        assert ctypes.string_at(made[-1].profiler.device_type) == b"XPU"
    finally:
        for p in made:
            p.destroy()
    XpuProfiler(xpu_lib).destroy()


def test_calls_check_their_profiler(profiler):
    stranger = tp.TP_Profiler(struct_size=tp.TP_PROFILER_STRUCT_SIZE)
    status = _native.Status()
    profiler.fns.start(ctypes.addressof(stranger), status.address)
    assert status.code == TF_Code.TF_INVALID_ARGUMENT
    assert "not the XPU plugin's" in status.message
    profiler.fns.collect_data_xspace(ctypes.addressof(profiler.profiler), None, None,
                                     status.address)
    assert "size_in_bytes is NULL" in status.message


# ---- sessions ----------------------------------------------------------------------------
def test_nothing_ran_gives_zero_bytes(profiler, xpu):
    profiler.start()
    profiler.stop()
    assert profiler.size() == 0
    assert profiler.fill(0) == b""
    with xpu.create_stream() as stream:  # work outside a session is not recorded either
        with xpu.allocate(256) as memory:
            xpu.memset(stream, memory, 1)
            stream.synchronize()
    profiler.start()
    profiler.stop()
    assert profiler.size() == 0


def test_session_state_errors(profiler):
    with pytest.raises(FailedPreconditionError, match="no XPU profiling session is running"):
        profiler.stop()
    profiler.start()
    with pytest.raises(FailedPreconditionError, match="already running; call stop first"):
        profiler.start()
    with pytest.raises(FailedPreconditionError, match="still running; call stop first"):
        profiler.size()
    profiler.stop()
    assert profiler.size() == 0


def test_device_work_on_named_streams(profiler, xpu):
    set_name = stream_names_ext(xpu)
    payload = np.arange(4096, dtype=np.uint8)
    back = np.zeros_like(payload)
    ran = []
    with xpu.create_stream() as a, xpu.create_stream() as b, xpu.create_event() as event, \
            xpu.allocate(4096) as m1, xpu.allocate(4096) as m2:
        set_name(a, b"copies")
        set_name(a, b"uploads")  # a later name replaces the first

        def work():
            xpu.memcpy_htod(a, m1, payload)
            xpu.memset(a, m2, 7, 1024)
            event.record(a)
            b.wait_event(event)
            xpu.memcpy_dtod(b, m2, m1, 2048)
            xpu.memcpy_dtoh(b, back, m2)
            xpu.host_callback(b, lambda: ran.append(True))
            b.synchronize()

        space = profiler.session(work)
    assert ran == [True] and (back[:2048] == payload[:2048]).all()
    plane = plane_named(space, f"/device:GPU:{xpu.ordinal}")
    assert plane.id == xpu.ordinal
    ordinal_stat = [s for s in plane.stats if plane.stat_metadata[s.metadata_id].name ==
                    "device_ordinal"]
    assert [s.int64_value for s in ordinal_stat] == [xpu.ordinal]
    lines = {line.name: line for line in plane.lines}
    assert "uploads" in lines and "copies" not in lines
    uploads = lines["uploads"]
    (other,) = [line for line in plane.lines if line is not uploads]
    assert other.name == f"stream {other.id}" and other.display_id == other.id
    assert uploads.display_id == uploads.id != other.id
    got = {}
    for line, meta, event, stats in events_of(plane):
        got.setdefault(line.name, []).append((meta.name, stats.get("bytes")))
        assert event.WhichOneof("data") == "offset_ps"
        if meta.name != "RecordEvent":
            assert event.duration_ps > 0, meta.name
    # The host records events of its own after copies (its event manager keeps the host
    # buffers alive until then): count the recordings, compare the rest in order.
    assert got["uploads"].count(("RecordEvent", None)) >= 1
    assert [e for e in got["uploads"] if e[0] != "RecordEvent"] == \
        [("MemcpyH2D", 4096), ("Memset", 1024)]
    assert got[other.name][0] == ("WaitForEvent", None)
    assert [e for e in got[other.name] if e[0] != "RecordEvent"] == \
        [("WaitForEvent", None), ("MemcpyD2D", 2048), ("MemcpyD2H", 4096),
         ("HostCallback", None)]
    # Times: CLOCK_REALTIME nanoseconds, events in order, the line starting at its first one.
    for line in plane.lines:
        offsets = [e.offset_ps for e in line.events]
        assert offsets[0] == 0 and offsets == sorted(offsets)
        assert abs(line.timestamp_ns - time.time_ns()) < 60e9
        last = line.events[-1]
        assert line.duration_ps == last.offset_ps + last.duration_ps


def mlp(x, w1, b1, w2, b2):
    h = pluggable.ops.relu(pluggable.ops.bias_add(pluggable.ops.matmul(x, w1), b1))
    return pluggable.ops.softmax(pluggable.ops.bias_add(pluggable.ops.matmul(h, w2), b2))


def test_mlp_kernels_on_two_devices(profiler, xpu_platform):
    # Tensors live in the devices' BFC pools, which keep their regions: no handle check here.
    executors = [xpu_platform.executor(0), xpu_platform.executor(1)]
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32)
              for s in ((8, 16), (16, 32), (32,), (32, 4), (4,))]
    expected = {}
    results = {}

    def work():
        for ordinal in (0, 1):
            inputs = [pluggable.tensor(a, device=f"xpu:{ordinal}") for a in arrays]
            with pluggable.device(f"xpu:{ordinal}"):
                out = mlp(*inputs)
            results[ordinal] = out.numpy()
        for ex in executors:
            ex.synchronize_all_activity()

    space = profiler.session(work)
    np.testing.assert_allclose(results[0], results[1], rtol=1e-6)
    expected = {"MatMul": 2, "BiasAdd": 2, "Relu": 1, "Softmax": 1}
    uploaded = sorted(a.nbytes for a in arrays)
    for ordinal in (0, 1):
        plane = plane_named(space, f"/device:GPU:{ordinal}")
        kernels, copies = {}, []
        kernel_lines = set()
        for line, meta, event, stats in events_of(plane):
            if "op_type" in stats:
                assert stats["op_type"] == meta.name
                assert event.duration_ps > 0
                kernels[meta.name] = kernels.get(meta.name, 0) + 1
                kernel_lines.add(line.id)
            elif meta.name.startswith("Memcpy"):
                copies.append((meta.name, stats["bytes"]))
        assert kernels == expected, f"every kernel exactly once on XPU:{ordinal}"
        assert len(kernel_lines) == 1, "kernels run on the compute stream only"
        assert sorted(b for n, b in copies if n == "MemcpyH2D") == uploaded
        assert ("MemcpyD2H", results[ordinal].nbytes) in copies


def test_kernel_node_names(profiler, xpu_platform):
    """The node name (TF_GetOpKernelName) is the display name when it differs from the op
    type; a kernel enqueued before the session starts runs in it without one."""
    from pluggable.kernels.registry import KernelInput, registered_kernels

    xpu = xpu_platform.executor(0)  # kernel outputs come from its BFC pool, which stays

    (relu,) = registered_kernels("Relu", "XPU", plugin=xpu_platform.path)[:1]
    x = np.array([-1.0, 2.0, -3.0, 4.0], np.float32)
    F32 = 1  # TF_FLOAT
    with xpu.create_stream() as stream, xpu.allocate(x.nbytes) as memory, \
            relu.instantiate("block1/dense/Relu", {"T": pluggable.float32}) as named, \
            relu.instantiate("Relu", {"T": pluggable.float32}) as plain:
        xpu.sync_memcpy_htod(memory, x)
        arg = [KernelInput(memory.address, x.nbytes, F32, x.shape)]
        outputs = []
        stream_delay_us = ctypes.CDLL(xpu_platform.path).XPU_SetStreamDelayUs
        stream_delay_us.argtypes = [ctypes.c_uint64]
        stream_delay_us(200_000)  # the first kernel is still queued when the session starts
        try:
            outputs += named.run(xpu, stream, arg, [F32])
            profiler.start()
        finally:
            stream_delay_us(0)
        outputs += named.run(xpu, stream, arg, [F32])
        outputs += plain.run(xpu, stream, arg, [F32])
        stream.synchronize()
        profiler.stop()
        for out in outputs:
            xpu.allocator.deallocate(out.address)
    plane = plane_named(parse(profiler.collect()), f"/device:GPU:{xpu.ordinal}")
    # Kernels only: the host's waits record events on the stream too.
    got = [(m.name, m.display_name, stats["op_type"]) for _, m, _, stats in events_of(plane)
           if "op_type" in stats]
    assert got == [("Relu", "", "Relu"), ("Relu", "block1/dense/Relu", "Relu"),
                   ("Relu", "", "Relu")]
    # One metadata entry per (op type, node name).
    assert sorted((m.name, m.display_name) for m in plane.event_metadata.values()
                  if m.name == "Relu") == [("Relu", ""), ("Relu", "block1/dense/Relu")]


def test_size_query_is_exact_and_a_short_buffer_is_refused(profiler, xpu):
    with xpu.create_stream() as stream, xpu.allocate(64) as memory:
        profiler.start()
        for _ in range(100):
            xpu.memset(stream, memory, 3)
        stream.synchronize()
        profiler.stop()
    announced = profiler.size()
    assert announced > 100 * 10
    assert profiler.size() == announced  # asking twice changes nothing
    with pytest.raises(InvalidArgumentError, match=f"takes {announced}; ask for the size"):
        profiler.fill(announced - 1)
    data = profiler.fill(announced + 100)  # a larger buffer gets exactly the data
    assert len(data) == announced
    plane = plane_named(parse(data), f"/device:GPU:{xpu.ordinal}")
    assert [m.name for _, m, _, _ in events_of(plane)] == ["Memset"] * 100
    assert profiler.size() == 0, "collected data is handed out once"


def test_restart_cycles_leak_nothing(profiler, xpu, xpu_lib):
    before = xpu_lib.XPU_ProfilerHeapBlocks()
    with xpu.create_stream() as stream, xpu.allocate(256) as memory:
        for cycle in range(1, 41):
            profiler.start()
            for _ in range(cycle):
                xpu.memset(stream, memory, cycle)
            stream.synchronize()
            profiler.stop()
            if cycle % 3 == 0:
                continue  # not collected: the next start drops it
            space = parse(profiler.collect())
            plane = plane_named(space, f"/device:GPU:{xpu.ordinal}")
            assert [m.name for _, m, _, _ in events_of(plane)] == ["Memset"] * cycle
    profiler.start()
    profiler.stop()
    assert profiler.size() == 0
    assert xpu_lib.XPU_ProfilerHeapBlocks() == before


def test_destroyed_stream_keeps_its_events(profiler, xpu, xpu_lib):
    before = xpu_lib.XPU_ProfilerHeapBlocks()
    set_name = stream_names_ext(xpu)
    with xpu.allocate(512) as memory:
        profiler.start()
        stream = xpu.create_stream()
        set_name(stream, b"short-lived")
        xpu.memset(stream, memory, 9)
        stream.synchronize()
        stream.close()
        xpu.flush_releases()
        profiler.stop()
    plane = plane_named(parse(profiler.collect()), f"/device:GPU:{xpu.ordinal}")
    assert [(line.name, m.name, stats["bytes"]) for line, m, _, stats in events_of(plane)] == \
        [("short-lived", "Memset", 512)]
    assert xpu_lib.XPU_ProfilerHeapBlocks() == before


def test_stream_names_ignore_bad_arguments(profiler, xpu, xpu1):
    set_name = stream_names_ext(xpu)
    with xpu1.create_stream() as foreign, xpu.create_stream() as mine, \
            xpu.allocate(64) as memory:
        set_name(foreign, b"not yours")  # a stream of XPU:1 named through XPU:0: ignored
        set_name(mine, None)
        set_name(mine, b"x" * 1000)  # shortened to 255 bytes
        space = profiler.session(lambda: (xpu.memset(mine, memory, 1), mine.synchronize()))
    (line,) = plane_named(space, f"/device:GPU:{xpu.ordinal}").lines
    assert line.name == "x" * 255


def test_event_cap_drops_and_reports(profiler, xpu, xpu_lib):
    xpu_lib.XPU_SetProfilerMaxEvents(10)
    with xpu.create_stream() as stream, xpu.allocate(64) as memory:
        def work():
            for _ in range(25):
                xpu.memset(stream, memory, 5)
            stream.synchronize()

        space = profiler.session(work)
    plane = plane_named(space, f"/device:GPU:{xpu.ordinal}")
    assert len(list(events_of(plane))) == 10
    stats = {plane.stat_metadata[s.metadata_id].name: s for s in plane.stats}
    assert stats["dropped_events"].uint64_value == 15
    (warning,) = space.warnings
    assert "15 events dropped" in warning and "at most 10 events per stream" in warning


def test_sessions_while_workers_run(profiler, xpu, xpu_lib):
    """Start/stop/collect cycles race with a thread that keeps a stream busy; every XSpace
    parses and holds only whole events, and nothing is left behind."""
    before = xpu_lib.XPU_ProfilerHeapBlocks()
    done = threading.Event()
    errors = []

    def busy(stream, memory):
        try:
            while not done.is_set():
                for _ in range(20):
                    xpu.memset(stream, memory, 1)
                stream.synchronize()
        except Exception as exc:  # reported by the main thread
            errors.append(exc)

    with xpu.create_stream() as stream, xpu.allocate(4096) as memory:
        worker = threading.Thread(target=busy, args=(stream, memory))
        worker.start()
        seen = 0
        try:
            for _ in range(60):
                space = profiler.session(lambda: time.sleep(0.002))
                for plane in space.planes:
                    for _, meta, event, stats in events_of(plane):
                        assert meta.name == "Memset" and stats["bytes"] == 4096
                        seen += 1
        finally:
            done.set()
            worker.join()
    assert not errors
    assert seen > 0
    assert xpu_lib.XPU_ProfilerHeapBlocks() == before


# ---- faults ------------------------------------------------------------------------------
def test_fault_profiler_start(profiler, faults, xpu):
    faults("profiler_start:1")
    with pytest.raises(InternalError, match=r"start: injected fault \(XPU fault kind "
                                            r"'profiler_start', call #1\)"):
        profiler.start()
    with pytest.raises(FailedPreconditionError):
        profiler.stop()  # the failed start opened no session
    with xpu.create_stream() as stream, xpu.allocate(64) as memory:
        space = profiler.session(lambda: (xpu.memset(stream, memory, 1), stream.synchronize()))
    assert [p.name for p in space.planes] == [f"/device:GPU:{xpu.ordinal}"]


def test_fault_profiler_collect(profiler, faults, xpu):
    with xpu.create_stream() as stream, xpu.allocate(64) as memory:
        profiler.start()
        xpu.memset(stream, memory, 1)
        stream.synchronize()
        profiler.stop()
    faults("profiler_collect:1,profiler_collect:3")
    size = ctypes.c_size_t(99)
    status = _native.Status()
    profiler.fns.collect_data_xspace(ctypes.addressof(profiler.profiler), None,
                                     ctypes.byref(size), status.address)
    assert status.code == TF_Code.TF_INTERNAL and "'profiler_collect', call #1" in status.message
    assert size.value == 0, "a failed size query announces nothing"
    announced = profiler.size()  # call 2: the data was kept
    assert announced > 0
    with pytest.raises(InternalError, match="call #3"):
        profiler.fill(announced)
    data = profiler.fill(announced)
    assert [p.name for p in parse(data).planes] == [f"/device:GPU:{xpu.ordinal}"]


def test_fault_kinds_from_the_environment(run_python):
    code = f"""
import ctypes, sys
sys.path[:0] = [{os.path.dirname(os.path.abspath(__file__))!r}]
import pluggable
from test_xpu_profiler_c import XpuProfiler
p = XpuProfiler(ctypes.CDLL(pluggable.get_platform("REF_XPU").path))
for _ in range(2):
    try:
        p.start()
    except Exception as exc:
        print(type(exc).__name__, exc)
    else:
        print("started")
"""
    result = run_python(code, env={"XPU_FAIL": "profiler_start:1"})
    assert result.stdout.splitlines() == [
        "InternalError TP_ProfilerFns.start: injected fault (XPU fault kind 'profiler_start', "
        "call #1)", "started"]


def test_fault_kinds_are_listed(xpu_control):
    assert xpu_control.XPU_SetFaults(b"profiler_stop") == -1
    message = xpu_control.XPU_LastControlError().decode()
    assert "unknown kind 'profiler_stop'" in message
    assert "profiler_start, profiler_collect" in message


# ---- TensorFlow --------------------------------------------------------------------------
TF_SCRIPT = r"""
import glob, json, os, site, sys
import numpy as np
import tensorflow as tf
from tensorflow.python.framework import load_library
from tensorflow.tsl.profiler.protobuf import xplane_pb2

library, logdir = sys.argv[1], sys.argv[2]
# TensorFlow has already loaded an installed pluggable's XPU from site-packages at import.
auto = {os.path.realpath(os.path.join(d, "tensorflow-plugins")) for d in site.getsitepackages()}
if os.path.dirname(os.path.realpath(library)) not in auto:
    load_library.load_pluggable_device_library(library)
with tf.device("/XPU:0"):
    a = tf.constant(np.arange(32 * 32, dtype=np.float32).reshape(32, 32) / 1024)
    tf.linalg.matmul(a, a).numpy()  # warm-up outside the profile
    tf.profiler.experimental.start(logdir)
    product = tf.linalg.matmul(a, a)
    value = product.numpy()
    tf.profiler.experimental.stop()
(path,) = glob.glob(os.path.join(logdir, "plugins", "profile", "*", "*.xplane.pb"))
space = xplane_pb2.XSpace()
with open(path, "rb") as f:
    space.ParseFromString(f.read())
planes = {}
for plane in space.planes:
    if not plane.name.startswith("/device:GPU:"):  # the XPU names its planes for xprof
        continue
    names = {k: v.name for k, v in plane.event_metadata.items()}
    planes[plane.name] = [[line.name, [[names[e.metadata_id], e.duration_ps]
                                       for e in line.events]] for line in plane.lines]
print(json.dumps({"device": product.device, "ok": bool(np.allclose(value, a.numpy() @ a.numpy(),
                  rtol=1e-5)), "planes": planes}))
"""


def test_tensorflow_loads_and_profiles_the_xpu(xpu_platform, tmp_path):
    # Looked up, not imported: TensorFlow must not be loaded into this process, which already
    # holds the XPU library; the script runs in a process of its own.
    if importlib.util.find_spec("tensorflow") is None:
        pytest.skip("TensorFlow is not installed (pip install tensorflow-cpu==2.21.0)")
    proc = subprocess.run([sys.executable, "-c", TF_SCRIPT, xpu_platform.path, str(tmp_path)],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["ok"] and report["device"].endswith("device:XPU:0")
    lines = report["planes"]["/device:GPU:0"]
    matmuls = [event for _, events in lines for event in events if event[0] == "MatMul"]
    assert len(matmuls) == 1 and matmuls[0][1] > 0
