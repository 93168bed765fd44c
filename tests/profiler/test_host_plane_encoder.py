"""The host plane's encoder (`pluggable._compiled.encode_host_events`, which
`HostTracer.build_plane` calls): from a varied list of records (every kind, several threads,
several allocators, times out of order) it gives the events, lines, stats and allocators'
bytes in use that the record layouts mean; a malformed record is a clear `InternalError`,
and a session whose host plane fails keeps the device planes."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import pluggable
from pluggable import _compiled, ops, profiler
from pluggable.errors import InternalError
from pluggable.profiler import ProfilerOptions
from pluggable.profiler import session as profiler_session
from pluggable.profiler.host_tracer import (
    ALLOC, ANNOTATION, COPY, FREE, OP, HostTracer, _COPY_NAMES, _device_name, _op_stats)
from pluggable.profiler.result import ProfileResult
from pluggable.profiler.xspace import PlaneBuilder, parse_xspace

T0 = 1_750_000_000_000_000_000  # a CLOCK_REALTIME time in ns, for the records made here


def _plane(tracer: HostTracer, plane_id: int = 5):
    data = b"".join(tracer.build_plane(plane_id))
    return ProfileResult(data), parse_xspace(data, "the host plane").planes[0]


def _expected(tracer: HostTracer):
    """What the records mean, worked out plainly: {ident: [(name, start_ns, duration_ns,
    stats)]} in order of each thread's first record, events in time order."""
    in_use = dict(tracer._baselines)
    peak = dict(tracer._baselines)
    lines = {}

    def allocation(events, name, when, bfc, nbytes):
        chunk = (nbytes + 255) // 256 * 256
        in_use[id(bfc)] = in_use.get(id(bfc), 0) + (
            chunk if name == "MemoryAllocation" else -chunk)
        shown = max(in_use[id(bfc)], 0)
        peak[id(bfc)] = max(peak.get(id(bfc), 0), shown)
        events.append((name, when, 0, {"device": _device_name(bfc.executor),
                                       "allocator_name": bfc.name, "allocation_bytes": chunk,
                                       "bytes_reserved": 0, "bytes_allocated": shown,
                                       "peak_bytes_in_use": peak[id(bfc)]}))

    for record in tracer.records:
        events = lines.setdefault(record[1], [])
        if record[0] == OP:
            _, _, start, end, name, info, fresh, correlation_id = record
            stats = dict(_op_stats(info), **(
                {"correlation_id": correlation_id} if correlation_id else {}))
            events.append((f"{name}:{name}", start, end - start, stats))
            for executor, nbytes in fresh:
                if nbytes and executor._allocator is not None:
                    allocation(events, "MemoryAllocation", end, executor._allocator, nbytes)
        elif record[0] in (ALLOC, FREE):
            _, _, when, bfc, nbytes = record
            allocation(events, "MemoryAllocation" if record[0] == ALLOC
                       else "MemoryDeallocation", when, bfc, nbytes)
        elif record[0] == COPY:
            _, _, start, end, call, executor, stream, nbytes = record
            stats = {"bytes": nbytes, "direction": _COPY_NAMES[call][1],
                     "device": _device_name(executor)}
            stream_name = getattr(stream, "name", None) if stream is not None else "sync"
            if stream_name:
                stats["stream"] = stream_name
            events.append((_COPY_NAMES[call][0], start, end - start, stats))
        else:
            _, _, start, end, name, step_num, metadata = record
            stats = dict(metadata, **({} if step_num is None else {"step_num": step_num}))
            events.append((name, start, end - start, stats))
    return {ident: sorted(events, key=lambda e: e[1]) for ident, events in lines.items()}


@pytest.fixture
def varied():
    """A tracer holding what a real session recorded (ops by plan and by the slow path, a
    failed op, copies, annotations, a second thread) and hand-made records on top: two
    more threads, both allocators of a device, times out of order, a free of more than
    was in use, an output of 0 bytes, a span that ends before it starts."""
    device = pluggable.get_device("XPU:1")
    executor = device.executor
    device_bfc, host_bfc = executor.allocator, executor.host_allocator  # made if not yet
    tracer = HostTracer()
    tracer.install()
    assert {id(device_bfc), id(host_bfc)} <= set(tracer._baselines)
    try:
        started = time.time_ns()
        t = pluggable.tensor(np.arange(64, dtype=np.float32), device="/xpu:0")
        u = t.to("/xpu:1")
        for _ in range(3):
            v = ops.relu(u)
        tracer.annotation("step", started, time.time_ns(), 4, {"lr": 0.25, "tag": "warm"})
        worker = threading.Thread(target=lambda: ops.add(t, t), name="encoder-worker")
        worker.start()
        worker.join()
        with pytest.raises(pluggable.errors.InvalidArgumentError):
            ops.matmul(np.ones((2, 3), np.float32), np.ones((2, 3), np.float32))
        back = v.numpy()
        ops.add(np.ones(2, np.float64), np.ones(2, np.float64))
    finally:
        tracer.uninstall()
    assert back.tolist() == np.arange(64).tolist()
    plan = next(r[5] for r in tracer.records if r[0] == OP and r[4] == "Relu"
                and not isinstance(r[5], tuple) and r[5] is not None)
    tracer.thread_names.update({101: "made-up thread", 102: "another made-up thread",
                                103: "a third one"})
    tracer.records += [
        (OP, 101, T0 + 500, T0 + 900, "Relu", plan, ((executor, 4000), (executor, 0)), 77),
        (ALLOC, 101, T0 + 450, device_bfc, 100),  # inside the op: before its start on the line
        (OP, 102, T0 + 100, T0 + 180, "Softmax", None, (), 0),
        (ALLOC, 102, T0 + 200, host_bfc, 256),
        (FREE, 102, T0 + 300, host_bfc, 1 << 40),  # more than was ever in use: shown as 0
        (ALLOC, 102, T0 + 400, host_bfc, 1),
        (FREE, 101, T0 + 1000, device_bfc, 4000),
        (COPY, 101, T0 + 1100, T0 + 1400, "sync_memcpy_dtoh", executor, None, 12),
        (ANNOTATION, 102, T0 + 50, T0 + 40, "backwards", None, {"why": "clock stepped"}),
        (OP, 101, T0 + 1500, T0 + 1600, "MatMul", (device, "XPU:MatMul", False,
                                                   (((4, 8), "float32"), ((8, 3), "float32"))),
         (), (1 << 64) - 1),
    ]
    # A line long enough to be merged, in reverse order, with pairs of equal start times:
    # their events keep the order of their records.
    tracer.records += [(ANNOTATION, 103, T0 + (40 - i) // 2 * 10, T0 + 1000, f"tie {i}",
                        None, {}) for i in range(40)]
    return tracer


def test_events_lines_and_stats_are_what_the_records_mean(varied):
    result, plane = _plane(varied)
    expected = _expected(varied)
    assert len(expected) == 5  # the main thread, the worker and three made-up ones
    names = {t.ident: t.name for t in threading.enumerate()}
    names.update(varied.thread_names)
    assert [(line.id, line.display_id, line.name) for line in plane.lines] == \
        [(ident, ident, names[ident]) for ident in expected]
    got = list(result.events())
    assert [(e.line, e.name, e.start_ns, e.duration_ns, e.stats) for e in got] == [
        (names[ident], name, start, duration, stats)
        for ident, events in expected.items() for name, start, duration, stats in events]
    for line, events in zip(plane.lines, expected.values()):
        first = min(e[1] for e in events)
        assert line.timestamp_ns == first
        assert line.duration_ps == (max(e[1] + e[2] for e in events) - first) * 1000
    # One metadata entry per name, and every kind of record is in the plane.
    assert sorted(m.name for m in plane.event_metadata.values()) == sorted(
        {e.name for e in got})
    assert {"Relu:Relu", "AddV2:AddV2", "MatMul:MatMul", "Softmax:Softmax", "MemcpyH2D",
            "MemcpyD2D", "MemcpyD2H", "MemoryAllocation", "MemoryDeallocation", "step",
            "backwards"} <= {e.name for e in got}
    # Every op launch has its correlation id, unique among launches.
    ids = [e.stats["correlation_id"] for e in got if e.name.endswith(":Relu")]
    assert len(ids) == len(set(ids)) == 4 and 77 in ids


def test_allocators_in_use_run_from_their_baselines(varied):
    result, _ = _plane(varied)
    host_bfc = pluggable.get_device("XPU:1").executor._host_allocator
    host = [(e.name, e.stats["allocation_bytes"], e.stats["bytes_allocated"],
             e.stats["peak_bytes_in_use"]) for e in result.events()
            if e.line == "another made-up thread"
            and e.stats.get("allocator_name") == host_bfc.name]
    baseline = varied._baselines[id(host_bfc)]
    # The free of 2**40 bytes drives the running count below 0: shown as 0, and the next
    # allocation still counts from the true (negative) figure.
    assert host == [("MemoryAllocation", 256, baseline + 256, baseline + 256),
                    ("MemoryDeallocation", 1 << 40, 0, baseline + 256),
                    ("MemoryAllocation", 256, 0, baseline + 256)]


def test_the_same_records_encode_to_the_same_bytes(varied):
    assert b"".join(varied.build_plane(3)) == b"".join(varied.build_plane(3))
    assert b"".join(varied.build_plane(3)) != b"".join(varied.build_plane(4))


def test_records_kept_in_c_encode_as_their_tuples_do():
    """A session's records are encoded where pluggable._compiled keeps them (no tuple made);
    the bytes are those the same records give as tuples (`records`)."""
    device = pluggable.get_device("XPU:0")
    x = pluggable.tensor(np.ones(3, np.float32), device=device)
    tracer = HostTracer()
    tracer.install()
    try:
        for _ in range(50):
            y = ops.add(x, x)  # by plan: recorded in C, with the frees of the outputs
        ops.add(np.ones(2, np.float64), np.ones(2, np.float64))  # the slow path: a tuple
        tracer.annotation("span", time.time_ns(), time.time_ns(), None, {})
        del y
    finally:
        tracer.uninstall()
    assert tracer._records == [] and _compiled.records_kept() > 100
    in_place = b"".join(tracer.build_plane(2))
    assert _compiled.records_kept() > 100  # building leaves them; `discard` drops them
    kinds = [r[0] for r in tracer.records]  # now as tuples, taken out of the C store
    assert _compiled.records_kept() == 0
    assert kinds.count(OP) == 51 and kinds.count(FREE) >= 49 and ANNOTATION in kinds
    assert b"".join(tracer.build_plane(2)) == in_place
    events = [e.name for e in ProfileResult(in_place).events()]
    assert events.count("AddV2:AddV2") == 51 and events.count("MemoryDeallocation") >= 49
    tracer.discard()
    assert tracer.records == [] and tracer.build_plane(2) is None


def test_a_stopped_tracer_never_takes_a_later_tracers_records():
    x = pluggable.tensor(np.ones(3, np.float32), device="/xpu:0")
    first = HostTracer()
    first.install()
    ops.add(x, x)
    first.uninstall()
    second = HostTracer()
    second.install()  # empties the C store: the first tracer's records were never built
    for _ in range(3):
        ops.add(x, x)
    second.uninstall()
    assert first.records == [] and first.build_plane(1) is None
    first.discard()  # drops nothing of the second's
    assert [r[0] for r in second.records].count(OP) == 3
    second.discard()


def _tracer(*records) -> HostTracer:
    tracer = HostTracer()
    tracer.records += [(ANNOTATION, 7, T0, T0 + 10, "fine", None, {})] + list(records)
    return tracer


@pytest.mark.parametrize("record, detail", [
    ([ANNOTATION, 7, T0, T0, "x", None, {}], r"it must be a tuple \(kind, ident, \.\.\.\)"),
    ((9, 7, T0), "its kind 9 is none of OP, COPY, ALLOC, FREE, ANNOTATION"),
    (("OP", 7, T0), "its kind 'OP' is none of"),
    ((OP, 7, T0, T0, "Relu"), r"it has 5 fields where \(OP, ident, start_ns, end_ns, "
                              r"op_name, info, fresh, correlation_id\) has 8"),
    ((FREE, 7, T0, None), r"it has 4 fields where \(FREE, ident, when_ns, bfc, nbytes\)"),
    ((OP, 7, "soon", T0, "Relu", None, (), 0), "its start_ns must be an int, got str"),
    ((OP, 7, T0, 1 << 70, "Relu", None, (), 0), "its end_ns 1180591620717411303424 does not "
                                                "fit in 64 bits"),
    ((OP, 7, T0, T0, None, None, (), 0), "its op name must be a str, got NoneType"),
    ((OP, 7, T0, T0, "Relu", None, [], 0), "its fresh outputs must be a tuple"),
    ((OP, 7, T0, T0, "Relu", None, (("executor",),), 0), "its fresh output 0 must be a "
                                                         r"tuple \(executor, nbytes\)"),
    ((OP, 7, T0, T0, "Relu", None, (), -1), "its correlation id must be an int of 64 bits"),
    ((ALLOC, -1, T0, None, 4), "its thread ident -1 is not a thread ident"),
    ((ALLOC, "main", T0, None, 4), "its thread ident must be an int, got str"),
])
def test_a_malformed_record_is_a_clear_internal_error(record, detail):
    with pytest.raises(InternalError, match="host tracer record 1 is malformed: " + detail) \
            as caught:
        _tracer(record).build_plane(1)
    assert caught.value.call == "HostTracer.build_plane"
    assert "profiler/host_tracer.py documents their layouts" in str(caught.value)


def test_a_malformed_size_is_a_clear_internal_error():
    bfc = pluggable.get_device("XPU:0").executor._allocator
    with pytest.raises(InternalError, match="record 1 is malformed: its byte count -5 is "
                                            "not a size"):
        _tracer((FREE, 7, T0, bfc, -5)).build_plane(1)
    with pytest.raises(InternalError, match="record 2 is malformed: its byte count must be "
                                            "an int, got float"):
        _tracer((ALLOC, 7, T0, bfc, 256), (ALLOC, 7, T0, bfc, 2.5)).build_plane(1)


def test_callbacks_must_keep_their_contract():
    builder = PlaneBuilder("/host:CPU")
    records = [(OP, 7, T0, T0 + 5, "Relu", None, (), 0)]
    prefixes = (b"", b"", b"")
    callbacks = [lambda info: "not bytes", lambda bfc, chunk: b"", lambda bfc: 0,
                 lambda record: ("x", b""), builder.event_metadata_id]
    with pytest.raises(TypeError, match="the op stats callback returned str, not bytes"):
        _compiled.encode_host_events(records, (b"\x08\x01\x20", b"", b""), *callbacks)
    with pytest.raises(TypeError, match="prefixes must be a tuple of 3 bytes"):
        _compiled.encode_host_events(records, b"", *callbacks)
    with pytest.raises(TypeError, match="takes 7 or 8 arguments, got 2"):
        _compiled.encode_host_events(records, b"")
    with pytest.raises(TypeError, match="records must be a list, got tuple"):
        _compiled.encode_host_events(tuple(records), prefixes, *callbacks)
    callbacks[0] = lambda info: b""
    assert _compiled.encode_host_events([], prefixes, *callbacks) == []
    ((ident, first, last, events),) = _compiled.encode_host_events(records, prefixes, *callbacks)
    assert (ident, first, last) == (7, T0, T0 + 5)
    assert events == b"\x22\x07\x08\x01\x10\x00\x18\x88\x27"  # id 1, offset 0, 5000 ps


def test_a_failing_host_plane_leaves_the_device_planes(tmp_path):
    profiler.start(tmp_path)
    with pluggable.device("/xpu:0"):
        ops.relu(np.ones(4, np.float32))
    profiler_session._session.tracer.records.append((OP, 7, "late", 0, "Relu", None, (), 0))
    with pytest.warns(profiler.ProfilerWarning, match="the host plane is left out: host "
                                                      "tracer record"):
        result = profiler.stop()
    assert result.planes == ["/device:GPU:0"]
    assert result.devices == {"/device:GPU:0": "/device:XPU:0"}
    assert any("start_ns must be an int" in w for w in result.warnings)
    assert "Relu" in {e.name for e in result.events("/device:GPU:0")}
    with profiler.Profile(tmp_path, ProfilerOptions(device_tracer_level=0)) as session:
        with pluggable.device("/xpu:0"):
            ops.relu(np.ones(4, np.float32))
    assert [e.name for e in session.result.events("/host:CPU") if e.name == "Relu:Relu"] == [
        "Relu:Relu"]


def test_extreme_times_wrap_as_int64_on_the_wire():
    # Any int64 time is accepted; picoseconds are int64 on the wire, so (2**64 - 1) ns of
    # duration, times 1000, wraps to -1000 ps, as protobuf's own int64 encoding would.
    tracer = _tracer((ANNOTATION, 8, -(1 << 63), (1 << 63) - 1, "all of time", None, {}))
    _, plane = _plane(tracer)
    (line,) = [line for line in plane.lines if line.id == 8]
    assert line.timestamp_ns == -(1 << 63)
    assert [(e.offset_ps, e.duration_ps) for e in line.events] == [(0, -1000)]


def test_bytes_in_use_past_64_bits_is_a_clear_internal_error():
    bfc = pluggable.get_device("XPU:0").executor.allocator
    huge = (1 << 63) - 512
    with pytest.raises(InternalError, match="record 2 is malformed: its 9223372036854775296 "
                                            "bytes take its allocator's bytes in use past 64"):
        _tracer((ALLOC, 7, T0, bfc, huge), (ALLOC, 7, T0, bfc, huge)).build_plane(1)
