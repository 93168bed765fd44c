"""Streams, events, timers and host callbacks on the XPU: real asynchrony and ordering.

XPU_STREAM_DELAY_US (set at run time through the plugin's test control) makes every stream
operation start late, so that work that is not ordered visibly runs in the wrong order."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from pluggable.base import limits
from pluggable.errors import CallbackWarning, FailedPreconditionError, InternalError
from pluggable.devices.event import EventStatus

DELAY_US = 20_000


@pytest.fixture
def streams(xpu):
    a, b = xpu.create_stream(), xpu.create_stream()
    yield a, b
    a.close()
    b.close()


def slow_writes(xpu, stream, memory, value: int, count: int = 3):
    """Enqueues `count` writes of `value` on `stream`, the last being the one that matters."""
    for _ in range(count - 1):
        xpu.memset(stream, memory, 0xEE)
    xpu.memcpy_htod(stream, memory, np.full(memory.size, value, np.uint8))


def test_work_is_asynchronous(xpu, streams, stream_delay):
    a, _ = streams
    stream_delay(DELAY_US)
    with xpu.allocate(16) as memory:
        started = time.perf_counter()
        slow_writes(xpu, a, memory, 1)
        enqueue_time = time.perf_counter() - started
        a.synchronize()
        total_time = time.perf_counter() - started
    assert enqueue_time < DELAY_US * 1e-6  # enqueueing did not wait for the device
    assert total_time >= 3 * DELAY_US * 1e-6


def test_wait_for_event_orders_work_across_streams(xpu, streams, stream_delay):
    a, b = streams
    stream_delay(DELAY_US)
    with xpu.allocate(64) as memory, xpu.create_event() as event:
        xpu.mem_zero(b, memory)
        b.synchronize()
        slow_writes(xpu, a, memory, 7)
        event.record(a)
        assert event.status() == EventStatus.PENDING
        event.wait(b)
        out = np.zeros(64, np.uint8)
        xpu.memcpy_dtoh(b, out, memory)
        b.synchronize()
        assert (out == 7).all()
        assert event.status() == EventStatus.COMPLETE and event.query()


def test_without_the_wait_the_copy_runs_first(xpu, streams, stream_delay):
    a, b = streams
    stream_delay(DELAY_US)
    with xpu.allocate(64) as memory:
        xpu.mem_zero(b, memory)
        b.synchronize()
        slow_writes(xpu, a, memory, 7, count=4)
        out = np.full(64, 99, np.uint8)
        xpu.memcpy_dtoh(b, out, memory)
        b.synchronize()
        a.synchronize()
    # b read while a was still working: it did not see a's final copy.
    assert not (out == 7).any()
    assert set(np.unique(out)) <= {0, 0xEE}


def test_stream_dependency_orders_work(xpu, streams, stream_delay):
    a, b = streams
    stream_delay(DELAY_US)
    with xpu.allocate(32) as memory:
        slow_writes(xpu, a, memory, 9)
        b.wait_for(a)
        out = np.zeros(32, np.uint8)
        xpu.memcpy_dtoh(b, out, memory)
        b.synchronize()
    assert (out == 9).all()


def test_event_synchronize_blocks_the_host(xpu, streams, stream_delay):
    a, _ = streams
    stream_delay(DELAY_US)
    with xpu.allocate(8) as memory, xpu.create_event() as event:
        slow_writes(xpu, a, memory, 1, count=2)
        event.record(a)
        started = time.perf_counter()
        event.synchronize()
        assert time.perf_counter() - started >= DELAY_US * 1e-6
        assert event.status() == EventStatus.COMPLETE
        a.synchronize()


@pytest.mark.parametrize("deadline", [None, 0])
def test_an_event_never_recorded_is_waited_for_at_once(xpu, deadline):
    # With a deadline (the default) the host polls the event's status, which stays UNKNOWN
    # for an event never recorded: it used to wait out the whole deadline (600 s).
    limits.set_deadline(deadline)
    try:
        with xpu.create_event() as event:
            started = time.perf_counter()
            event.synchronize()
            assert time.perf_counter() - started < 1.0
            assert event.status() == EventStatus.UNKNOWN
    finally:
        limits.set_deadline(None)


def test_synchronize_all_activity_waits_for_every_stream(xpu, streams, stream_delay):
    a, b = streams
    stream_delay(DELAY_US)
    done = []
    a.host_callback(lambda: done.append("a"))
    b.host_callback(lambda: done.append("b"))
    xpu.synchronize_all_activity()
    assert sorted(done) == ["a", "b"]


def test_each_waiter_wakes_when_its_own_work_is_done(xpu, streams, stream_delay):
    """Waiters with different targets on one device: the worker wakes them only when its
    progress may end a wait (the queue empty, the head past the lowest awaited ticket), and
    none of them is missed: each returns once its own work is done, not before or after."""
    a, b = streams
    stream_delay(DELAY_US)
    finished = []
    with xpu.allocate(16) as memory:
        for _ in range(8):  # b: long
            xpu.memset(b, memory, 0xEE)
        b.host_callback(lambda: finished.append("b"))
        xpu.memset(a, memory, 1)  # a: short
        a.host_callback(lambda: finished.append("a"))
        seen = {}

        def wait_for(name, wait):
            wait()
            seen[name] = list(finished)

        threads = [threading.Thread(target=wait_for, args=("a", a.synchronize)),
                   threading.Thread(target=wait_for, args=("all", xpu.synchronize_all_activity))]
        for t in threads:
            t.start()
        b.synchronize()
        for t in threads:
            t.join(timeout=30)
        assert not any(t.is_alive() for t in threads), "a waiter was never woken"
    assert seen["a"] == ["a"]  # woken when a ran empty, long before b was done
    assert sorted(seen["all"]) == ["a", "b"]


def test_synchronize_all_activity_reuses_its_helper_thread(xpu, streams, monkeypatch):
    """With a deadline (the default) the blocking call runs on a helper thread (a pthread of
    pluggable._compiled's pool) that waits for the next call once it returned: repeated
    synchronizes start no thread each, Python's or C's."""
    import threading

    from pluggable.base.native import compiled

    streams[0].host_callback(lambda: None)
    xpu.synchronize_all_activity()
    helpers = compiled.bounded_call_helpers()  # (started, idle, in calls)
    started = []
    start = threading.Thread.start
    monkeypatch.setattr(threading.Thread, "start",
                        lambda self: (started.append(self.name), start(self))[1])
    done = []
    for i in range(50):
        streams[0].host_callback(lambda i=i: done.append(i))
        xpu.synchronize_all_activity()
        assert done[-1] == i  # it did wait for the stream
    assert started == []
    assert compiled.bounded_call_helpers() == helpers


def test_a_bounded_stream_wait_polls_a_pooled_event(xpu, streams, stream_delay, monkeypatch):
    """With a deadline (the default) `Stream.synchronize` records and polls an event of the
    event manager's pool: none is created or destroyed per wait."""
    a, _ = streams
    stream_delay(2_000)
    with xpu.allocate(16) as memory:  # a wait for real work: the pool has an event now
        slow_writes(xpu, a, memory, 0, count=1)
        a.synchronize()
    created = []
    create = type(xpu).create_event
    monkeypatch.setattr(type(xpu), "create_event",
                        lambda self: (created.append(1), create(self))[1])
    stream_delay(2_000)
    with xpu.allocate(16) as memory:
        for value in range(5):
            slow_writes(xpu, a, memory, value, count=2)
            a.synchronize()
            host = np.zeros(16, np.uint8)
            xpu.sync_memcpy_dtoh(host, memory)
            assert host.tolist() == [value] * 16  # it did wait for the writes
    assert created == []


def test_timer_measures_the_time_the_stream_spent(xpu, streams, stream_delay):
    a, _ = streams
    stream_delay(DELAY_US)
    with xpu.create_timer() as timer, xpu.allocate(8) as memory:
        timer.start(a)
        xpu.memset(a, memory, 1)
        xpu.memset(a, memory, 2)
        timer.stop(a)
        a.synchronize()
        assert timer.nanoseconds() >= 2 * DELAY_US * 1000
        assert timer.seconds == pytest.approx(timer.nanoseconds() * 1e-9)


def test_host_callbacks_run_in_stream_order_on_another_thread(xpu, streams):
    a, _ = streams
    order = []
    with xpu.allocate(4) as memory:
        seen = bytearray(4)
        xpu.memcpy_htod(a, memory, b"abcd")
        a.host_callback(lambda: order.append(("first", threading.get_ident())))
        xpu.memcpy_dtoh(a, seen, memory)
        a.host_callback(lambda: order.append(("second", bytes(seen))))
        a.host_callback(lambda: order.append(("third", None)))
        a.synchronize()
    assert [name for name, _ in order] == ["first", "second", "third"]
    assert order[0][1] != threading.get_ident()
    assert order[1][1] == b"abcd"  # the copy before the callback was done


def test_a_raising_callback_fails_the_stream_and_warns(xpu, xpu_platform):
    stream = xpu.create_stream()

    def broken():
        raise KeyError("missing")

    stream.host_callback(broken)
    with pytest.warns(CallbackWarning, match="'broken' raised KeyError"):
        with pytest.raises(InternalError, match="'broken' raised KeyError"):
            stream.synchronize()
    # Reported once: the stream goes on with a new plugin stream, and works.
    assert stream.status().ok
    ran = []
    stream.host_callback(lambda: ran.append(1))
    stream.synchronize()
    assert ran == [1]
    stream.close()
    # The device is fine: a new stream works.
    with xpu.create_stream() as fresh:
        ran = []
        fresh.host_callback(lambda: ran.append(1))
        fresh.synchronize()
        assert ran == [1]
        assert fresh.status().ok


def test_closed_objects_refuse_work(xpu):
    stream = xpu.create_stream()
    stream.close()
    stream.close()
    with pytest.raises(FailedPreconditionError, match="stream was closed"):
        stream.synchronize()
    event = xpu.create_event()
    event.close()
    with pytest.raises(FailedPreconditionError, match="event was closed"):
        event.status()


def test_host_buffers_stay_alive_until_the_copy_is_done(xpu, stream_delay):
    import gc

    stream_delay(DELAY_US)
    with xpu.create_stream() as stream, xpu.allocate(1 << 16) as memory:
        xpu.memcpy_htod(stream, memory, np.full(1 << 16, 5, np.uint8))  # only the stream holds it
        gc.collect()
        out = np.zeros(1 << 16, np.uint8)
        xpu.memcpy_dtoh(stream, out, memory)
        stream.synchronize()
        assert (out == 5).all()


def test_host_buffers_are_let_go_once_the_copy_is_done(xpu):
    import gc
    import weakref

    with xpu.create_stream() as stream, xpu.allocate(4096) as memory:
        for _ in range(3):
            source = np.ones(4096, np.uint8)
            alive = weakref.ref(source)
            marker = xpu.memcpy_htod(stream, memory, source)
            del source
            marker.synchronize()
            xpu.event_manager.synchronize()
            gc.collect()
            # Nobody synchronised the stream: the event manager let go of it by itself.
            assert alive() is None
