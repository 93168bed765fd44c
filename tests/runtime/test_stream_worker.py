"""The XPU stream worker's wait and its recycled operation records (plugins/xpu/README.md,
"How a stream worker waits"): work always completes, whether the worker spins, naps or
sleeps, and a steady stream of work takes no new records from the C library."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import pluggable
from pluggable import ops


@pytest.fixture(scope="module")
def op_records(xpu_control):
    return xpu_control.XPU_OpRecordAllocations


def wait_until(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(1e-4)
    return True


def test_steady_kernels_allocate_no_op_records(op_records, stream_delay):
    device = pluggable.get_device("XPU:0")
    x = pluggable.tensor(np.arange(4, dtype=np.float32), device="/xpu:0")

    def burst():
        for _ in range(16):  # kernels with copied-in work, and a Cast
            y = ops.add(x, x)
            z = ops.cast(y, pluggable.int32)
        device.synchronize()
        return z

    # Warm-up with a slow worker: a whole burst queues up, so the stream's free list holds
    # as many records as a burst can ever have in flight, however the worker is scheduled.
    stream_delay(4000)
    burst()
    burst()
    stream_delay(0)
    burst()
    before = op_records()
    for _ in range(20):
        z = burst()
    assert op_records() == before
    np.testing.assert_array_equal(z.numpy(), np.arange(4, dtype=np.int32) * 2)


def test_a_deep_queue_takes_records_and_gives_them_back(xpu, op_records):
    with xpu.create_stream() as stream, xpu.allocate(4096) as memory:
        before = op_records()
        for i in range(600):  # far more than a stream keeps: new records are made
            xpu.memset(stream, memory, i & 0xFF)
        stream.synchronize()
        assert op_records() > before
        out = np.empty(4096, np.uint8)
        xpu.sync_memcpy_dtoh(out, memory)
        assert (out == 599 & 0xFF).all()


def test_work_completes_while_nobody_waits(xpu):
    # A worker that issued work without a waiter naps; its naps end by themselves, so an
    # event polled without blocking still completes.
    with xpu.create_stream() as stream, xpu.allocate(1 << 16) as memory, \
            xpu.create_event() as event:
        for round_ in range(50):
            for i in range(20):
                xpu.memset(stream, memory, (round_ + i) & 0xFF)
            event.record(stream)
            assert wait_until(event.query), "recorded work never completed without a waiter"
            time.sleep(2e-5 * (round_ % 5))  # gaps around the worker's spin and nap times
        out = np.empty(1 << 16, np.uint8)
        xpu.sync_memcpy_dtoh(out, memory)
        assert (out == (49 + 19) & 0xFF).all()


def test_a_stream_waiting_on_a_napping_stream_is_not_held_up(xpu):
    with xpu.create_stream() as first, xpu.create_stream() as second, \
            xpu.allocate(1024) as a, xpu.allocate(1024) as b, xpu.create_event() as event:
        for round_ in range(30):
            xpu.memset(first, a, round_)
            event.record(first)
            event.wait(second)
            xpu.memcpy_dtod(second, b, a)
            second.synchronize()
            out = np.empty(1024, np.uint8)
            xpu.sync_memcpy_dtoh(out, b)
            assert (out == round_).all()


def test_host_threads_waiting_on_two_devices(xpu, xpu1):
    errors = []

    def issue(executor, value):
        try:
            with executor.create_stream() as stream, executor.allocate(256) as memory:
                out = np.empty(256, np.uint8)
                for i in range(200):
                    executor.memset(stream, memory, (value + i) & 0xFF)
                    if i % 7 == 0:
                        stream.synchronize()
                executor.memcpy_dtoh(stream, out, memory)
                stream.synchronize()
                assert (out == (value + 199) & 0xFF).all()
        except Exception as exc:  # reported to the main thread
            errors.append(exc)

    threads = [threading.Thread(target=issue, args=(e, v)) for e, v in ((xpu, 1), (xpu1, 2))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
