"""Peer copies (PLUGGABLE_PLATFORM_PEER_DTOD): memcpy_dtod / sync_memcpy_dtod called on device
D accept a source in memory of another device of the same platform; the XPU's memcpy_dtod
also a destination there (TensorFlow's cross-device copy). The copy is ordered on D's stream
only (the host waits for the source's producer).

Every call is made on the destination's executor with one of its streams, so the host's own
check (the stream belongs to the executor) passes and the plugin's checks are what is tested.
"""
from __future__ import annotations

import time

import numpy as np
import pytest

from pluggable.abi.plugin_ext import (
    PLUGGABLE_PLATFORM_PAGEABLE_ASYNC_COPY,
    PLUGGABLE_PLATFORM_PEER_DTOD,
)
from pluggable.errors import InternalError, InvalidArgumentError, OutOfRangeError
from pluggable.devices.memory import DeviceMemory

DELAY_US = 20_000


@pytest.fixture
def stream1(xpu1_checked):
    with xpu1_checked.create_stream() as s:
        yield s


def random_bytes(size: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8)


def on_device(executor, data: np.ndarray) -> "DeviceMemory":
    """New memory of `executor` holding `data` (copied synchronously)."""
    memory = executor.allocate(data.nbytes)
    executor.sync_memcpy_htod(memory, data)
    return memory


def read(executor, memory, size=None) -> np.ndarray:
    out = np.zeros(memory.size if size is None else size, np.uint8)
    executor.sync_memcpy_dtoh(out, memory, size)
    return out


def test_platform_advertises_peer_copies(xpu):
    assert xpu.platform.has_capability(PLUGGABLE_PLATFORM_PEER_DTOD)
    assert xpu.platform.has_capability(PLUGGABLE_PLATFORM_PAGEABLE_ASYNC_COPY)
    assert PLUGGABLE_PLATFORM_PEER_DTOD == 1 << 1


@pytest.mark.parametrize("size", [1, 4096, (1 << 20) + 3])
def test_async_copy_from_xpu0_on_xpu1_stream(xpu, xpu1_checked, stream1, size):
    data = random_bytes(size, size)
    with on_device(xpu, data) as src, xpu1_checked.allocate(size) as dst:
        xpu1_checked.memcpy_dtod(stream1, dst, src)
        stream1.synchronize()
        assert (read(xpu1_checked, dst) == data).all()


def test_async_copy_in_the_other_direction_and_with_views(xpu, xpu1_checked):
    data = random_bytes(1000, 7)
    with on_device(xpu1_checked, data) as src, xpu.allocate(1000) as dst, \
            xpu.create_stream() as stream:
        xpu.mem_zero(stream, dst)
        xpu.memcpy_dtod(stream, dst.view(100, 200), src.view(300, 200))
        stream.synchronize()
        expected = np.zeros(1000, np.uint8)
        expected[100:300] = data[300:500]
        assert (read(xpu, dst) == expected).all()


def test_async_copy_runs_on_the_destination_stream_in_order(xpu, xpu1_checked, stream1,
                                                           stream_delay):
    """With every stream operation delayed, the copy is still ordered after the earlier work
    of XPU:1's stream and before the later work, and the call itself does not wait."""
    stream_delay(DELAY_US)
    data = random_bytes(4096, 3)
    with on_device(xpu, data) as src, xpu1_checked.allocate(4096) as dst:
        out = np.zeros(4096, np.uint8)
        xpu1_checked.memset(stream1, dst, 0xEE)
        started = time.perf_counter()
        xpu1_checked.memcpy_dtod(stream1, dst, src)
        enqueue_time = time.perf_counter() - started
        xpu1_checked.memcpy_dtoh(stream1, out, dst)
        assert enqueue_time < DELAY_US * 1e-6  # asynchronous
        assert not (read(xpu1_checked, dst) == data).all()  # not run yet
        stream1.synchronize()
        assert (out == data).all()


def test_host_orders_the_source_producer_before_the_copy(xpu, xpu1_checked, stream1,
                                                         stream_delay):
    """The copy is ordered on XPU:1's stream only; the host waits for XPU:0's work (here with
    an event) before enqueueing it, as the capability requires."""
    stream_delay(DELAY_US)
    with xpu.allocate(256) as src, xpu1_checked.allocate(256) as dst, \
            xpu.create_stream() as stream0, xpu.create_event() as produced:
        xpu.memset(stream0, src, 0x11)
        xpu.memset(stream0, src, 0x42)
        produced.record(stream0)
        produced.synchronize()
        xpu1_checked.memcpy_dtod(stream1, dst, src)
        stream1.synchronize()
        assert (read(xpu1_checked, dst) == 0x42).all()


def test_sync_copy_from_the_other_device(xpu, xpu1_checked):
    data = random_bytes(70_000, 11)
    with on_device(xpu, data) as src0, xpu1_checked.allocate(70_000) as dst1:
        xpu1_checked.sync_memcpy_dtod(dst1, src0)
        assert (read(xpu1_checked, dst1) == data).all()
        with xpu.allocate(5000) as dst0:
            xpu.sync_memcpy_dtod(dst0, dst1.view(1000, 5000))
            assert (read(xpu, dst0) == data[1000:6000]).all()


def test_own_memory_still_works(xpu1_checked, stream1):
    data = random_bytes(512, 5)
    with on_device(xpu1_checked, data) as a, xpu1_checked.allocate(512) as b:
        xpu1_checked.memcpy_dtod(stream1, b, a)
        stream1.synchronize()
        xpu1_checked.sync_memcpy_dtod(a.view(0, 256), b.view(256, 256))
        assert (read(xpu1_checked, a)[:256] == data[256:]).all()


def test_destination_on_the_other_device(xpu, xpu1_checked, stream1):
    """memcpy_dtod also writes into the other device's memory (TensorFlow's cross-device copy
    runs on the source device's stream); sync_memcpy_dtod still refuses it."""
    data = random_bytes(64, 11)
    with xpu.allocate(64) as mem0, on_device(xpu1_checked, data) as mem1:
        with pytest.raises(InvalidArgumentError, match="device destination .* XPU device 1"):
            xpu1_checked.sync_memcpy_dtod(mem0, mem1)
        xpu1_checked.memcpy_dtod(stream1, mem0, mem1)
        stream1.synchronize()
        assert (read(xpu, mem0) == data).all()
        assert stream1.status().ok


def test_destination_outside_every_live_allocation_is_refused(xpu1_checked, stream1):
    with xpu1_checked.allocate(64) as src:
        host = np.zeros(64, np.uint8)  # host memory: in no device's arena
        wild = DeviceMemory.unchecked(xpu1_checked, host.ctypes.data, 64)
        with pytest.raises(InvalidArgumentError,
                           match="memcpy_dtod: device destination .* is not inside a live "
                                 "allocation of XPU device 1 or of another XPU device"):
            xpu1_checked.memcpy_dtod(stream1, wild, src)
        stream1.synchronize()
        assert stream1.status().ok


def test_source_outside_every_live_allocation_is_refused(xpu, xpu1_checked, stream1):
    with xpu1_checked.allocate(128) as dst:
        bogus = DeviceMemory.unchecked(xpu, 0x10, 64)
        with pytest.raises(InvalidArgumentError,
                           match="not inside a live allocation of XPU device 1 or of another"):
            xpu1_checked.memcpy_dtod(stream1, dst, bogus)
        with pytest.raises(InvalidArgumentError, match="not inside a live allocation"):
            xpu1_checked.sync_memcpy_dtod(dst, bogus)
        # Inside XPU:0's arena, but in memory that was freed: XPU:0's allocations decide.
        freed = xpu.allocate(128)
        stale = DeviceMemory.unchecked(xpu, freed.address, 128)
        freed.close()
        with pytest.raises(InvalidArgumentError,
                           match="not inside a live allocation of XPU device 0"):
            xpu1_checked.memcpy_dtod(stream1, dst, stale)
        with pytest.raises(InvalidArgumentError,
                           match="not inside a live allocation of XPU device 0"):
            xpu1_checked.sync_memcpy_dtod(dst, stale)
        stream1.synchronize()
        assert stream1.status().ok


def test_source_range_past_its_allocation_is_refused(xpu, xpu1_checked, stream1):
    with xpu.allocate(256) as src, xpu1_checked.allocate(256) as dst:
        too_long = DeviceMemory.unchecked(xpu, src.address + 200, 100)
        with pytest.raises(OutOfRangeError, match="run past the end .* XPU device 0"):
            xpu1_checked.memcpy_dtod(stream1, dst, too_long)
        with pytest.raises(OutOfRangeError, match="run past the end .* XPU device 0"):
            xpu1_checked.sync_memcpy_dtod(dst, too_long)
        # The last byte of the allocation is fine.
        last = DeviceMemory.unchecked(xpu, src.address + 255, 1)
        xpu1_checked.memcpy_dtod(stream1, dst, last)
        stream1.synchronize()


def test_peer_copies_count_as_memcpy_dtod_faults(xpu, xpu1_checked, stream1, faults):
    with xpu.allocate(64) as src, xpu1_checked.allocate(64) as dst:
        faults("memcpy_dtod:1,memcpy_dtod:2")
        with pytest.raises(InternalError, match="injected fault"):
            xpu1_checked.memcpy_dtod(stream1, dst, src)
        with pytest.raises(InternalError, match="injected fault"):
            xpu1_checked.sync_memcpy_dtod(dst, src)
        xpu1_checked.memcpy_dtod(stream1, dst, src)  # the third call goes through
        stream1.synchronize()
