"""The event manager: host functions after stream work, in stream order."""
from __future__ import annotations

import threading

import pytest

from pluggable.errors import CallbackWarning

DELAY_US = 5_000


@pytest.fixture
def manager(xpu):
    yield xpu.event_manager
    xpu.event_manager.synchronize()


def test_functions_run_after_the_work_in_stream_order(xpu, manager, stream_delay):
    stream_delay(DELAY_US)
    order = []
    with xpu.create_stream() as stream, xpu.allocate(16) as memory:
        for i in range(5):
            xpu.memset(stream, memory, i)
            seen = bytearray(1)
            xpu.memcpy_dtoh(stream, seen, memory, 1)
            manager.then_execute(stream, lambda i=i, seen=seen: order.append((i, seen[0])))
        assert len(order) < 5  # asynchronous: not all done yet
        manager.synchronize()
    assert order == [(i, i) for i in range(5)]


def test_functions_run_on_the_poller_thread(xpu, manager):
    where = []
    with xpu.create_stream() as stream:
        manager.then_execute(stream, lambda: where.append(threading.current_thread().name))
        manager.synchronize()
    assert where and where[0].startswith("pluggable-events-XPU:0")


def test_markers(xpu, manager, stream_delay):
    stream_delay(DELAY_US)
    with xpu.create_stream() as a, xpu.create_stream() as b, xpu.allocate(8) as memory:
        xpu.memset(a, memory, 1)
        xpu.memset(a, memory, 2)
        marker = manager.mark(a)
        assert not marker.done
        marker.make_wait(b)
        out = bytearray(8)
        xpu.memcpy_dtoh(b, out, memory)
        b.synchronize()
        assert out == bytes([2] * 8)
        marker.synchronize()
        manager.synchronize()
        assert marker.done and marker.event is None
    done = []
    type(manager).when_done([marker, None], lambda: done.append(1))
    assert done == [1]


def test_when_done_waits_for_every_marker(xpu, xpu1, stream_delay):
    stream_delay(DELAY_US)
    done = []
    with xpu.create_stream() as a, xpu1.create_stream() as b:
        m1 = xpu.event_manager.mark(a)
        xpu1.host_callback(b, lambda: None)
        m2 = xpu1.event_manager.mark(b)
        type(xpu.event_manager).when_done([m1, m2], lambda: done.append(1))
        xpu.event_manager.synchronize()
        xpu1.event_manager.synchronize()
    assert done == [1]


def test_a_raising_function_becomes_a_warning(xpu, manager):
    with xpu.create_stream() as stream:
        manager.then_execute(stream, lambda: 1 / 0)
        manager.synchronize()
        with pytest.warns(CallbackWarning, match="ZeroDivisionError"):
            stream.synchronize()


def test_close_runs_what_is_pending(run_python):
    out = run_python("""
import pluggable
ex = pluggable.get_platform("REF_XPU").executor(0)
stream = ex.create_stream()
ex.host_callback(stream, lambda: __import__("time").sleep(0.1))
ex.event_manager.then_execute(stream, lambda: print("ran", flush=True))
ex.event_manager.close()
ex.event_manager.close()
print("closed", flush=True)
""").stdout.split()
    assert out == ["ran", "closed"]


def test_synchronize_waits_for_a_function_still_running(xpu, manager):
    finished = []

    def slow():
        import time

        time.sleep(0.2)  # the marker is already passed while this runs
        finished.append(True)

    with xpu.create_stream() as stream:
        manager.then_execute(stream, slow)
        manager.synchronize()
        assert finished == [True]


def test_wait_uses_one_pooled_event_and_nothing_on_the_poller(xpu, manager, stream_delay):
    with xpu.create_stream() as stream, xpu.allocate(16) as memory:
        manager.synchronize()
        pool = len(manager._pool)
        stream_delay(20_000)
        xpu.memset(stream, memory, 7)
        seen = bytearray(1)
        xpu.memcpy_dtoh(stream, seen, memory, 1)
        manager.synchronize()  # the copy's host buffer is kept by a marker: drop it first
        stream_delay(0)
        xpu.memset(stream, memory, 9)
        assert manager.wait(stream) == 3  # SE_EVENT_COMPLETE
        assert manager.pending == 0
        assert len(manager._pool) == max(pool, 1)  # the event went back to the pool
        out = bytearray(1)
        xpu.sync_memcpy_dtoh(out, memory, 1)
        assert out[0] == 9 and seen[0] == 7
