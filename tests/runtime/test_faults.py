"""Every XPU_FAIL kind surfaces as the matching exception, and the device works afterwards."""
from __future__ import annotations

import numpy as np
import pytest

from pluggable.errors import InternalError, PluggableError, ResourceExhaustedError


def device_still_works(xpu):
    with xpu.create_stream() as stream, xpu.allocate(256) as memory, xpu.create_event() as e:
        data = np.arange(256, dtype=np.uint8)
        out = np.zeros(256, np.uint8)
        xpu.memcpy_htod(stream, memory, data)
        e.record(stream)
        xpu.memcpy_dtoh(stream, out, memory)
        stream.synchronize()
        assert (out == data).all()


def test_allocate(xpu, faults):
    faults("allocate:2")
    first = xpu.allocate(64)
    with pytest.raises(ResourceExhaustedError, match="could not allocate 64 bytes"):
        xpu.allocate(64)
    first.close()
    device_still_works(xpu)


@pytest.mark.parametrize("kind", ["memcpy_htod", "memcpy_dtoh", "memcpy_dtod"])
@pytest.mark.parametrize("synchronous", [False, True])
def test_copies(xpu, faults, kind, synchronous):
    with xpu.create_stream() as stream, xpu.allocate(32) as a, xpu.allocate(32) as b:
        host = bytearray(32)
        faults(f"{kind}:1")
        if synchronous:
            call = {"memcpy_htod": lambda: xpu.sync_memcpy_htod(a, host),
                    "memcpy_dtoh": lambda: xpu.sync_memcpy_dtoh(host, a),
                    "memcpy_dtod": lambda: xpu.sync_memcpy_dtod(b, a)}[kind]
        else:
            call = {"memcpy_htod": lambda: xpu.memcpy_htod(stream, a, host),
                    "memcpy_dtoh": lambda: xpu.memcpy_dtoh(stream, host, a),
                    "memcpy_dtod": lambda: xpu.memcpy_dtod(stream, b, a)}[kind]
        with pytest.raises(InternalError, match=f"injected fault.*'{kind}'"):
            call()
        call()  # only the first call was told to fail
        stream.synchronize()
    device_still_works(xpu)


@pytest.mark.parametrize("method", ["memset", "memset32", "mem_zero"])
def test_memset(xpu, faults, method):
    with xpu.create_stream() as stream, xpu.allocate(32) as memory:
        faults("memset:1")
        args = {"memset": (0x11,), "memset32": (0x11,), "mem_zero": ()}[method]
        with pytest.raises(InternalError, match="injected fault.*'memset'"):
            getattr(xpu, method)(stream, memory, *args)
        stream.synchronize()
    device_still_works(xpu)


@pytest.mark.parametrize("kind, create", [("create_stream", "create_stream"),
                                          ("create_event", "create_event"),
                                          ("create_timer", "create_timer")])
def test_creation(xpu, faults, kind, create):
    faults(f"{kind}:1")
    with pytest.raises(PluggableError, match=f"injected fault.*'{kind}'"):
        getattr(xpu, create)()
    getattr(xpu, create)().close()
    device_still_works(xpu)


def test_record_event(xpu, faults):
    with xpu.create_stream() as stream, xpu.create_event() as event:
        faults("record_event:1")
        with pytest.raises(InternalError, match="injected fault.*'record_event'"):
            event.record(stream)
        event.record(stream)
        event.synchronize()
    device_still_works(xpu)


def test_host_callback(xpu, faults):
    with xpu.create_stream() as stream:
        faults("host_callback:1")
        with pytest.raises(InternalError, match="could not enqueue the callback"):
            stream.host_callback(lambda: None)
        ran = []
        stream.host_callback(lambda: ran.append(1))
        stream.synchronize()
        assert ran == [1]
    device_still_works(xpu)


def test_stream_error_is_asynchronous_reported_once_and_the_stream_recovers(xpu, faults):
    with xpu.create_stream() as stream, xpu.allocate(16) as memory:
        faults("stream:1")
        xpu.memset(stream, memory, 1)  # enqueued fine; fails when the stream runs it
        failed_handle = stream.handle
        with pytest.raises(InternalError, match="injected fault"):
            stream.synchronize()
        # The plugin's stream error is sticky; the host replaced that stream after saying
        # so once, and the Stream object goes on with the new one.
        assert stream.handle != failed_handle and stream.status().ok
        stream.raise_if_error()
        xpu.memset(stream, memory, 7)
        stream.synchronize()
        out = np.empty(16, np.uint8)
        xpu.sync_memcpy_dtoh(out, memory, 16)
        assert out.tolist() == [7] * 16
    device_still_works(xpu)


def test_bad_fault_spec_is_refused(xpu_control):
    assert xpu_control.XPU_SetFaults(b"allocate:0") == -1
    message = xpu_control.XPU_LastControlError().decode()
    assert "allocate:0" in message and "memcpy_htod" in message
    assert xpu_control.XPU_SetFaults(b"teleport") == -1
    assert "unknown kind 'teleport'" in xpu_control.XPU_LastControlError().decode()
    assert xpu_control.XPU_SetFaults(None) == 0


def test_a_stream_failure_reaches_another_stream_only_through_a_dependency_naming_it(xpu,
                                                                                     faults):
    with xpu.create_stream() as failing, xpu.create_stream() as waiting, \
            xpu.create_stream() as independent, xpu.allocate(16) as memory, \
            xpu.allocate(16) as other, xpu.create_event() as event:
        faults("stream:1")
        xpu.memset(failing, memory, 1)
        event.record(failing)
        event.wait(waiting)                  # an explicit dependency
        xpu.memset(waiting, memory, 2)
        faults("")
        xpu.memset(independent, other, 3)    # none
        independent.synchronize()
        with pytest.raises(InternalError) as info:
            waiting.synchronize()
        # The dependent stream's error says it waited for failed work, and which.
        assert "the awaited work failed" in str(info.value)
        assert "injected fault" in str(info.value)
        with pytest.raises(InternalError, match="injected fault"):
            failing.synchronize()
        out = np.zeros(16, np.uint8)
        xpu.sync_memcpy_dtoh(out, other, 16)
        assert out.tolist() == [3] * 16
    device_still_works(xpu)
