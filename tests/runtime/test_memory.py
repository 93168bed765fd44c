"""Device, host and unified memory on the XPU: allocation, statistics, bad pointers."""
from __future__ import annotations

import numpy as np
import pytest

from pluggable.errors import (
    FailedPreconditionError, InvalidArgumentError, OutOfRangeError, PluggableError,
    ResourceExhaustedError)
from pluggable.devices.memory import DeviceMemory

GIB = 1 << 30


def test_allocate_updates_statistics_and_usage(xpu):
    before = xpu.allocator_stats()
    free_before, total = xpu.memory_usage()
    assert total == GIB  # XPU_MEMORY_BYTES default
    memory = xpu.allocate(1000)
    assert memory.size == 1000 and memory.address != 0
    stats = xpu.allocator_stats()
    assert stats["bytes_in_use"] - before["bytes_in_use"] >= 1000
    assert stats["num_allocs"] == before["num_allocs"] + 1
    assert stats["bytes_limit"] == GIB
    assert stats["largest_alloc_size"] >= 1000
    assert xpu.memory_usage()[0] <= free_before - 1000
    memory.close()
    assert xpu.allocator_stats()["bytes_in_use"] == before["bytes_in_use"]
    assert memory.is_closed


def test_allocations_do_not_overlap_and_are_aligned(xpu):
    blocks = [xpu.allocate(size) for size in (1, 255, 256, 4097, 1 << 20)]
    ranges = sorted((b.address, b.address + b.size) for b in blocks)
    for (_, end), (start, _) in zip(ranges, ranges[1:]):
        assert end <= start
    assert all(b.address % 256 == 0 for b in blocks)
    for b in blocks:
        b.close()


def test_zero_byte_allocation(xpu):
    memory = xpu.allocate(0)
    assert (memory.size, memory.address) == (0, 0)
    memory.close()


def test_out_of_memory_is_resource_exhausted_and_the_arena_stays_usable(xpu):
    keep = xpu.allocate(1 << 20)
    with pytest.raises(ResourceExhaustedError) as info:
        xpu.allocate(2 * GIB)
    message = str(info.value)
    assert "could not allocate 2147483648 bytes" in message and "REF_XPU" in message
    assert "bytes are free" in message
    again = xpu.allocate(1 << 20)
    stream = xpu.create_stream()
    xpu.memcpy_dtod(stream, again, keep)
    stream.synchronize()
    again.close()
    keep.close()
    stream.close()


def test_bad_sizes_are_rejected_by_the_host(xpu):
    with pytest.raises(InvalidArgumentError, match="non-negative"):
        xpu.allocate(-1)
    with pytest.raises(TypeError, match="integer"):
        xpu.allocate("12")


def test_views_are_checked(xpu):
    with xpu.allocate(64) as memory:
        view = memory.view(16, 32)
        assert (view.address, view.size) == (memory.address + 16, 32)
        with pytest.raises(InvalidArgumentError, match="does not fit"):
            memory.view(40, 32)
    assert view.is_closed  # the owner was freed
    with pytest.raises(FailedPreconditionError, match="already freed"):
        memory.view(0, 1)


def test_out_of_arena_pointer_is_an_error(xpu):
    stream = xpu.create_stream()
    bogus = DeviceMemory.unchecked(xpu, 0x10, 64)
    with pytest.raises(InvalidArgumentError, match="memcpy_htod"):
        xpu.memcpy_htod(stream, bogus, bytes(64))
    with pytest.raises(InvalidArgumentError):
        xpu.memcpy_dtoh(stream, bytearray(64), bogus)
    stream.synchronize()
    stream.close()


def test_copy_past_the_end_of_an_allocation_is_an_error(xpu):
    stream = xpu.create_stream()
    with xpu.allocate(256) as memory:
        too_long = DeviceMemory.unchecked(xpu, memory.address + 200, 100)
        with pytest.raises(PluggableError) as info:
            xpu.memcpy_htod(stream, too_long, bytes(100))
        assert isinstance(info.value, (InvalidArgumentError, OutOfRangeError))
        # The host refuses what it can see itself.
        with pytest.raises(InvalidArgumentError, match="larger than the device destination"):
            xpu.memcpy_htod(stream, memory, bytes(300))
        stream.synchronize()
    stream.close()


def test_freed_memory_is_a_bad_pointer_for_the_plugin(xpu):
    stream = xpu.create_stream()
    memory = xpu.allocate(128)
    stale = DeviceMemory.unchecked(xpu, memory.address, 128)
    memory.close()
    with pytest.raises(InvalidArgumentError):
        xpu.memcpy_htod(stream, stale, bytes(128))
    stream.close()


def test_host_memory(xpu):
    with xpu.host_memory_allocate(4096) as host:
        assert host.size == 4096 and host.kind == "host"
        array = host.numpy()
        array[:] = np.arange(4096) % 251
        assert xpu.live_handles()["host_allocations"] >= 1
        with xpu.allocate(4096) as device:
            stream = xpu.create_stream()
            xpu.memcpy_htod(stream, device, host)
            out = np.empty(4096, np.uint8)
            xpu.memcpy_dtoh(stream, out, device)
            stream.synchronize()
            stream.close()
        assert (out == array).all()
    with pytest.raises(FailedPreconditionError):
        host.numpy()


def test_unified_memory(xpu):
    assert xpu.platform.supports_unified_memory
    with xpu.unified_memory_allocate(1024) as unified:
        unified.numpy()[:] = 3
        assert unified.memoryview()[1023] == 3


def test_finalizers_queue_releases_for_a_safe_point(xpu):
    import gc

    before = xpu.live_handles()["allocations"]
    memory = xpu.allocate(64)
    assert xpu.live_handles()["allocations"] == before + 1
    del memory
    gc.collect()
    # Nothing was freed from inside the garbage collector...
    assert xpu.live_handles()["allocations"] == before + 1
    # ...but at the next safe point it is.
    xpu.flush_releases()
    assert xpu.live_handles()["allocations"] == before


def test_close_frees_once_and_allocate_zero_owns_nothing(xpu):
    before = xpu.live_handles()["allocations"]
    memory = xpu.allocate(128)
    address = memory.address
    assert address and memory.size == 128 and not memory.is_closed
    memory.close()
    memory.close()
    assert memory.is_closed and xpu.live_handles()["allocations"] == before
    assert xpu.allocate(128).address == address  # the range really went back
    empty = xpu.allocate(0)
    assert empty.address == 0 and empty.size == 0 and not empty.is_closed
    empty.close()
    assert xpu.live_handles()["allocations"] == before


def test_allocations_from_threads_never_share_a_struct(xpu):
    import threading

    errors = []

    def worker(value):
        try:
            for _ in range(200):
                with xpu.allocate(64) as memory:
                    xpu.sync_memcpy_htod(memory, np.full(64, value, np.uint8))
                    out = np.empty(64, np.uint8)
                    xpu.sync_memcpy_dtoh(out, memory)
                    assert (out == value).all(), "another thread's range was used"
        except Exception as exc:  # reported to the main thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(v,)) for v in (3, 7, 11)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
