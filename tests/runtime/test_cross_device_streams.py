"""Streams, events and copies across the two XPU devices of one platform, as TensorFlow uses
them for its copies between devices (create_stream_dependency and wait_for_event with a
stream or event of the other device, record_event of another device's event, memcpy_dtod on
the source device's stream into the other device's memory).

The host's own Stream and Event methods refuse to mix devices, so the plugin's functions are
called directly (`executor._call`): what is tested is the plugin. Every stream operation is
delayed (XPU_SetStreamDelayUs), so a consumer that does not really wait reads the memory
before the producer wrote it."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

from pluggable.devices.event import EventStatus
from pluggable.errors import InvalidArgumentError

DELAY_US = 20_000
SIZE = 64 * 1024


def pattern(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(1, 256, SIZE, dtype=np.uint8)


def read(executor, memory) -> np.ndarray:
    out = np.zeros(memory.size, np.uint8)
    executor.sync_memcpy_dtoh(out, memory)
    return out


@pytest.fixture
def two_streams(xpu, xpu1):
    with xpu.create_stream() as s0, xpu1.create_stream() as s1:
        yield s0, s1


@pytest.fixture
def memories(xpu, xpu1):
    with xpu.allocate(SIZE) as m0, xpu1.allocate(SIZE) as m1:
        xpu.sync_memcpy_htod(m0, np.zeros(SIZE, np.uint8))
        xpu1.sync_memcpy_htod(m1, np.zeros(SIZE, np.uint8))
        yield m0, m1


def test_a_stream_waits_for_a_stream_of_the_other_device(xpu, xpu1, two_streams, memories,
                                                         stream_delay):
    """XPU:1's stream depends on XPU:0's, then copies what XPU:0's stream is (slowly) still
    writing: it gets the written bytes, never the zeros before them."""
    s0, s1 = two_streams
    m0, m1 = memories
    data = pattern(1)
    stream_delay(DELAY_US)
    xpu._call("memcpy_htod", s0._handle, m0._ref, data.ctypes.data, SIZE)
    xpu1._call("create_stream_dependency", s1._handle, s0._handle)
    xpu1._call("memcpy_dtod", s1._handle, m1._ref, m0._ref, SIZE)
    s1.synchronize()
    stream_delay(0)
    assert (read(xpu1, m1) == data).all()
    s0.synchronize()


def test_the_dependency_works_the_other_way_round(xpu, xpu1, two_streams, memories,
                                                  stream_delay):
    """As TensorFlow uses it: XPU:0's copy stream waits for XPU:1's stream, then writes into
    XPU:1's memory, which XPU:1's stream was (slowly) still filling."""
    s0, s1 = two_streams
    m0, m1 = memories
    data = pattern(2)
    xpu.sync_memcpy_htod(m0, data)
    stream_delay(DELAY_US)
    xpu1._call("memset", s1._handle, m1._ref, 0x77, SIZE)  # the earlier use of m1 on XPU:1
    xpu._call("create_stream_dependency", s0._handle, s1._handle)
    xpu._call("memcpy_dtod", s0._handle, m1._ref, m0._ref, SIZE)  # into XPU:1's memory
    s0.synchronize()
    stream_delay(0)
    assert (read(xpu1, m1) == data).all()  # the copy landed after the memset, not before
    s1.synchronize()


def test_a_stream_waits_for_an_event_of_the_other_device(xpu, xpu1, two_streams, memories,
                                                         stream_delay):
    s0, s1 = two_streams
    m0, m1 = memories
    data = pattern(3)
    with xpu.create_event() as ready:
        stream_delay(DELAY_US)
        xpu._call("memcpy_htod", s0._handle, m0._ref, data.ctypes.data, SIZE)
        xpu._call("record_event", s0._handle, ready._handle)
        xpu1._call("wait_for_event", s1._handle, ready._handle)
        xpu1._call("memcpy_dtod", s1._handle, m1._ref, m0._ref, SIZE)
        s1.synchronize()
        stream_delay(0)
        assert (read(xpu1, m1) == data).all()
        s0.synchronize()


def test_an_event_of_the_other_device_recorded_on_a_stream(xpu, xpu1, two_streams,
                                                           stream_delay):
    """An event of XPU:0 recorded on XPU:1's stream is pending while that stream is busy and
    complete after it, as both devices report; XPU:0's stream can wait for it."""
    s0, s1 = two_streams
    with xpu.create_event() as event:
        assert EventStatus(xpu1.event_state(event._handle)) == EventStatus.UNKNOWN
        stream_delay(200_000)
        s1.host_callback(lambda: None)  # one delayed operation ahead of the recording
        xpu1._call("record_event", s1._handle, event._handle)
        assert EventStatus(xpu.event_state(event._handle)) == EventStatus.PENDING
        assert EventStatus(xpu1.event_state(event._handle)) == EventStatus.PENDING
        xpu1._call("block_host_for_event", event._handle)
        stream_delay(0)
        assert EventStatus(xpu.event_state(event._handle)) == EventStatus.COMPLETE
        assert EventStatus(xpu1.event_state(event._handle)) == EventStatus.COMPLETE
        xpu._call("wait_for_event", s0._handle, event._handle)
        s0.synchronize()


def test_a_failed_producer_fails_the_waiting_stream_of_the_other_device(xpu, xpu1, two_streams,
                                                                        memories, faults):
    s0, s1 = two_streams
    m0, _ = memories
    faults("stream:1")
    with xpu.create_event() as ready:
        xpu._call("memset", s0._handle, m0._ref, 1, SIZE)  # the injected stream fault
        xpu._call("record_event", s0._handle, ready._handle)
        xpu1._call("wait_for_event", s1._handle, ready._handle)
        with pytest.raises(Exception, match="awaited work \\(XPU device 0\\) failed.*injected"):
            s1.synchronize()


def test_handles_of_no_device_are_still_refused(xpu, xpu1, two_streams):
    s0, s1 = two_streams
    with xpu.create_stream() as gone:
        dead = gone._handle
    bogus = ctypes.create_string_buffer(256)  # a pointer that is no stream of any device
    for other in (dead, ctypes.addressof(bogus)):
        with pytest.raises(InvalidArgumentError,
                           match="create_stream_dependency: stream 0x[0-9a-f]+ is not a live "
                                 "stream of XPU device 1 or of another XPU device of its "
                                 "platform"):
            xpu1._call("create_stream_dependency", s1._handle, other)
    with xpu.create_event() as event:
        dead_event = event._handle
    for event in (dead_event, ctypes.addressof(bogus)):
        with pytest.raises(InvalidArgumentError,
                           match="wait_for_event: event 0x[0-9a-f]+ is not a live event of "
                                 "XPU device 1"):
            xpu1._call("wait_for_event", s1._handle, event)
        with pytest.raises(InvalidArgumentError, match="record_event: event .* is not a live"):
            xpu1._call("record_event", s1._handle, event)
        assert EventStatus(xpu1.event_state(event)) == EventStatus.ERROR
    # A stream of the other device is still no stream for work enqueued on this device.
    with pytest.raises(InvalidArgumentError, match="memset: stream .* XPU device 1"):
        xpu1._call("memset", s0._handle, None, 0, 0)
    s0.synchronize()
    s1.synchronize()
    assert s0.status().ok and s1.status().ok
