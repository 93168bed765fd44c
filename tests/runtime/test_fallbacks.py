"""The host's fallbacks for optional callbacks, exercised against the asynchronous XPU by
hiding the XPU's own callback: the fallback must keep the stream semantics."""
from __future__ import annotations

import numpy as np
import pytest

from pluggable.errors import UnimplementedError

DELAY_US = 10_000


@pytest.fixture
def without(xpu, monkeypatch):
    def hide(*names):
        for name in names:
            monkeypatch.setitem(xpu._fns, name, None)
    return hide


def test_block_host_until_done_through_an_event(xpu, without, stream_delay):
    without("block_host_until_done")
    stream_delay(DELAY_US)
    with xpu.create_stream() as stream, xpu.allocate(16) as memory:
        out = bytearray(16)
        xpu.memset(stream, memory, 3)
        xpu.memcpy_dtoh(stream, out, memory)
        stream.synchronize()
        assert bytes(out) == bytes([3] * 16)


def test_block_host_for_event_by_polling(xpu, without, stream_delay):
    without("block_host_for_event", "block_host_until_done")
    stream_delay(DELAY_US)
    with xpu.create_stream() as stream, xpu.allocate(16) as memory:
        out = bytearray(16)
        xpu.memset(stream, memory, 4)
        xpu.memcpy_dtoh(stream, out, memory)
        stream.synchronize()
        assert bytes(out) == bytes([4] * 16)


def test_stream_dependency_through_an_event(xpu, without, stream_delay):
    without("create_stream_dependency")
    stream_delay(DELAY_US)
    with xpu.create_stream() as a, xpu.create_stream() as b, xpu.allocate(16) as memory:
        xpu.memset(a, memory, 1)
        xpu.memset(a, memory, 2)
        b.wait_for(a)
        out = bytearray(16)
        xpu.memcpy_dtoh(b, out, memory)
        b.synchronize()
        assert bytes(out) == bytes([2] * 16)


@pytest.mark.parametrize("missing", ["memset", "memset32", "mem_zero"])
def test_fills_through_a_staged_copy_in_stream_order(xpu, without, stream_delay, missing):
    without(missing)
    stream_delay(DELAY_US)
    with xpu.create_stream() as stream, xpu.allocate(64) as memory:
        xpu.memset(stream, memory, 0xFF) if missing != "memset" else \
            xpu.memcpy_htod(stream, memory, bytes([0xFF] * 64))
        call = {"memset": lambda: xpu.memset(stream, memory.view(0, 8), 0x22),
                "memset32": lambda: xpu.memset32(stream, memory.view(0, 8), 0x22222222),
                "mem_zero": lambda: xpu.mem_zero(stream, memory.view(0, 8))}[missing]
        call()
        out = bytearray(64)
        xpu.memcpy_dtoh(stream, out, memory)
        stream.synchronize()
        fill = 0 if missing == "mem_zero" else 0x22
        assert bytes(out) == bytes([fill] * 8) + bytes([0xFF] * 56)


@pytest.mark.parametrize("direction", ["htod", "dtoh", "dtod"])
def test_sync_copies_through_a_stream(xpu, without, direction):
    without(f"sync_memcpy_{direction}")
    data = np.arange(32, dtype=np.uint8)
    with xpu.allocate(32) as a, xpu.allocate(32) as b:
        xpu.sync_memcpy_htod(a, data)
        if direction == "dtod":
            xpu.sync_memcpy_dtod(b, a)
        else:
            b = a
        out = np.zeros(32, np.uint8)
        xpu.sync_memcpy_dtoh(out, b)
        assert (out == data).all()
    xpu._internal_stream.close()
    xpu._internal_stream = None


def test_stream_status_without_the_callback_is_ok(xpu, without):
    without("get_stream_status")
    with xpu.create_stream() as stream:
        assert stream.status().ok


def test_host_memory_without_the_callbacks_is_plain_memory(xpu, without):
    without("host_memory_allocate", "host_memory_deallocate")
    before = xpu.live_handles()["host_allocations"]
    with xpu.host_memory_allocate(8192) as host:
        assert host.address % 4096 == 0
        host.numpy()[:] = 9
        assert xpu.live_handles()["host_allocations"] == before
        with xpu.allocate(8192) as memory:
            xpu.sync_memcpy_htod(memory, host)
            out = bytearray(8192)
            xpu.sync_memcpy_dtoh(out, memory)
        assert bytes(out) == bytes([9] * 8192)


def test_missing_host_callback_is_unimplemented(xpu, without):
    without("host_callback")
    with xpu.create_stream() as stream:
        with pytest.raises(UnimplementedError, match="host_callback"):
            stream.host_callback(lambda: None)
