"""Small copies through the staging ring: ordering of upload, op and download, reuse of
staging memory only after the device copy that read it, threads, and errors."""
from __future__ import annotations

import contextlib

import numpy as np
import pytest

import pluggable
from pluggable import ops
from pluggable.base import limits
from pluggable.devices import staging
from pluggable.tensors import tensor as tensors
from pluggable.errors import (
    DeadlineExceededError, InternalError, ResourceExhaustedError)


@pytest.fixture(autouse=True)
def through_the_ring():
    """Uploads on an idle compute stream are copied in C without the ring
    (tests/memory/test_copier.py); here every upload takes the Python path."""
    devices = [pluggable.get_device(f"XPU:{i}") for i in (0, 1)]
    for device in devices:
        device._copier = False
    yield
    for device in devices:
        device._copier = None


@pytest.fixture
def small_ring(xpu_platform):
    """XPU:0's executor with a 16 KiB staging ring (fences every 2 KiB) for the test, so
    that a few dozen uploads come round to memory whose copies may still be queued."""
    executor = xpu_platform.executor(0)
    pluggable.get_device("XPU:0")  # the device (and its streams) exist
    saved = executor.staging
    ring = staging.StagingRing(executor, capacity=16 << 10)
    executor._staging = ring
    yield ring
    executor._staging = saved
    ring.close(wait=True)


@contextlib.contextmanager
def faults_on_host_regions(executor, refusals: int):
    """The executor's pinned host pool refuses the next ``refusals`` allocations, as a
    plugin short of pinned memory does."""
    pool = executor.host_allocator

    class Refusing:
        def __init__(self):
            self.left = refusals

        def allocate(self, size):
            if self.left:
                self.left -= 1
                raise ResourceExhaustedError(f"refused {size} bytes of pinned memory")
            return pool.allocate(size)

        def __getattr__(self, name):
            return getattr(pool, name)

    executor._host_allocator = Refusing()
    try:
        yield
    finally:
        executor._host_allocator = pool


def test_many_small_uploads_ops_and_downloads_keep_their_order(small_ring, stream_delay):
    stream_delay(20)  # the device lags the host: copies are still queued when reused
    device = pluggable.get_device("XPU:0")
    results = []
    for i in range(600):
        host = np.arange(i, i + 1 + i % 40, dtype=np.float32)  # 4 to 160 bytes
        x = pluggable.tensor(host, device=device)
        host[:] = -1  # the caller's array is free once tensor() returns
        y = ops.add(x, pluggable.tensor(np.float32(1000), device=device))
        results.append((i, y))
    assert small_ring._head > 3 * small_ring.capacity  # came round several times
    for i, y in results:
        expected = np.arange(i, i + 1 + i % 40, dtype=np.float32) + 1000
        np.testing.assert_array_equal(y.numpy(), expected)


def test_staging_is_reused_only_after_the_copy_that_read_it(small_ring, stream_delay):
    device = pluggable.get_device("XPU:0")
    stream_delay(2000)  # 2 ms per stream operation: a lap of the ring outruns the device
    uploads = [pluggable.tensor(np.full(256, i, np.int64), device=device)  # 2 KiB each
               for i in range(24)]
    stream_delay(0)
    # 24 uploads of 2 KiB through 16 KiB: the ring waited for fences at least twice.
    assert small_ring._tail >= 2 * small_ring.capacity - (16 << 10)
    for i, t in enumerate(uploads):
        assert t.numpy().tolist() == [i] * 256


def test_an_upload_too_large_for_the_ring_goes_straight(small_ring):
    head = small_ring._head
    values = np.arange(1025, dtype=np.float32)  # more than a quarter of 16 KiB
    t = pluggable.tensor(values, device="xpu:0")
    assert small_ring._head == head
    np.testing.assert_array_equal(t.numpy(), values)


def test_a_plugin_short_of_pinned_memory_gets_a_smaller_ring_or_none(xpu_platform):
    executor = xpu_platform.executor(0)
    ring = staging.StagingRing(executor, capacity=staging.MIN_RING_BYTES * 4)
    stream = pluggable.get_device("XPU:0").compute_stream
    try:
        with faults_on_host_regions(executor, 2):  # the first two sizes are refused
            assert ring.copy(stream, 64, lambda address: None) != 0
        assert ring.capacity == staging.MIN_RING_BYTES
    finally:
        ring.close(wait=True)
    ring = staging.StagingRing(executor, capacity=staging.MIN_RING_BYTES)
    with faults_on_host_regions(executor, 1):
        assert ring.copy(stream, 64, lambda address: None) == 0  # none: copies go straight
    assert ring.capacity == 0
    ring.close(wait=True)


def test_a_small_round_trip_makes_no_stream_dependency_and_one_event(plugin_calls):
    device = pluggable.get_device("XPU:0")
    executor = device.executor
    x = pluggable.tensor(np.float32([1, 2]), device=device)
    executor.event_manager.synchronize()
    names = plugin_calls(executor)
    y = ops.add(pluggable.tensor(np.float32([3, 4]), device=device), x)
    assert names == ["memcpy_htod"]  # kernels run through the kernel API, not _call
    names.clear()
    assert y.numpy().tolist() == [4, 6]
    assert names == ["memcpy_dtoh", "record_event"]
    assert executor.event_manager.pending == 0  # nothing handed to the poller thread


def test_a_download_sees_a_chain_of_ops_it_did_not_wait_for(stream_delay):
    device = pluggable.get_device("XPU:0")
    stream_delay(200)
    x = pluggable.tensor(np.float64([0.5]), device=device)
    for _ in range(50):
        x = ops.add(x, x)
    assert x.numpy().tolist() == [0.5 * 2 ** 50]


def test_a_download_of_a_peer_copy_waits_for_its_stream(stream_delay):
    source = pluggable.tensor(np.arange(64, dtype=np.int32), device="xpu:0")
    stream_delay(3000)
    copy = source.to("xpu:1")  # on XPU:1's device-to-device stream, behind the delay
    assert copy._ready is not None and copy._ready.event is not None
    assert copy.numpy().tolist() == list(range(64))


def test_a_large_upload_goes_straight_and_is_waited_for(plugin_calls):
    device = pluggable.get_device("XPU:0")
    executor = device.executor
    host = np.arange((tensors.STAGE_LIMIT // 4) + 1, dtype=np.float32)
    pluggable.tensor(host, device=device)
    names = plugin_calls(executor)
    t = pluggable.tensor(host, device=device)
    host[:] = 0  # waited for: the device has its own copy already
    assert "memcpy_htod" in names and "record_event" in names
    assert t._ready is None
    np.testing.assert_array_equal(t.numpy()[:5], [0, 1, 2, 3, 4])
    assert t.numpy()[-1] == tensors.STAGE_LIMIT // 4


def test_threads_on_two_devices_each_see_their_own_values(in_threads):
    def work(seed: int):
        device = pluggable.get_device(f"XPU:{seed % 2}")
        for i in range(200):
            value = seed * 100_000 + i
            x = pluggable.tensor(np.int64([value, -value]), device=device)
            y = ops.add(x, pluggable.tensor(np.int64([1, 1]), device=device))
            got = y.numpy().tolist()
            assert got == [value + 1, 1 - value], (seed, i, got)

    in_threads(work, 4)


def test_a_refused_copy_gives_its_staging_back(faults):
    device = pluggable.get_device("XPU:0")
    ring = device.executor.staging
    pluggable.tensor(np.int32([1]), device=device)
    head = ring._head
    faults("memcpy_htod:1")
    with pytest.raises(InternalError, match="injected fault"):
        pluggable.tensor(np.int32([7, 8]), device=device)
    assert ring._head == head
    assert pluggable.tensor(np.int32([9]), device=device).numpy().tolist() == [9]


def test_out_of_device_memory_is_reported_before_staging():
    device = pluggable.get_device("XPU:0")
    ring = device.executor.staging
    pluggable.tensor(np.int32([1]), device=device)
    head = ring._head
    hogs = []
    try:
        for size in (64 << 20, 1 << 20, 64 << 10):  # fill the device down to < 64 KiB
            while True:
                try:
                    hogs.append(pluggable.empty((size,), "uint8", device=device))
                except ResourceExhaustedError:
                    break
        with pytest.raises(ResourceExhaustedError, match="out of memory"):
            pluggable.tensor(np.zeros(64 << 10, np.uint8), device=device)
        assert ring._head == head  # refused before any staging was taken
    finally:
        del hogs
    assert pluggable.tensor(np.int32([5]), device=device).numpy().tolist() == [5]


def test_a_failed_stream_is_the_downloads_error(faults):
    device = pluggable.get_device("XPU:0")
    x = pluggable.tensor(np.float32([1, 2]), device=device)
    device.synchronize()  # x is known written: the failure below cannot have taken it
    faults("stream:1")  # the next stream operation fails: the add
    y = ops.add(x, x)
    with pytest.raises(InternalError, match="injected fault"):
        y.numpy()
    faults("")
    # The failed stream was replaced: the device is usable again.
    assert ops.add(x, x).numpy().tolist() == [2, 4]


def test_a_download_is_bounded_by_the_deadline(stream_delay):
    device = pluggable.get_device("XPU:0")
    x = pluggable.tensor(np.float32([1]), device=device)
    device.synchronize()
    limits.set_deadline(0.2)
    try:
        stream_delay(2_000_000)  # 2 s per stream operation
        y = ops.add(x, x)
        with pytest.raises(DeadlineExceededError, match="deadline"):
            y.numpy()
        # The copy is still queued: its destination array went to the event manager.
        assert device.executor.event_manager.pending >= 1
    finally:
        limits.set_deadline(None)
        stream_delay(0)
    assert y.numpy().tolist() == [2]


def test_a_large_upload_past_the_deadline_frees_its_memory_once_copied(stream_delay):
    device = pluggable.get_device("XPU:0")
    executor = device.executor
    host = np.ones(tensors.STAGE_LIMIT // 4 + 1, np.float32)
    pluggable.tensor(host, device=device)
    executor.event_manager.synchronize()
    in_use = executor.allocator.stats()["bytes_in_use"]
    limits.set_deadline(0.2)
    try:
        stream_delay(1_000_000)  # 1 s per stream operation
        with pytest.raises(DeadlineExceededError, match="deadline"):
            pluggable.tensor(host, device=device)
        # Still queued: the device memory it writes is not free yet.
        assert executor.allocator.stats()["bytes_in_use"] > in_use
    finally:
        limits.set_deadline(None)
        stream_delay(0)
    device.synchronize()
    executor.event_manager.synchronize()
    assert executor.allocator.stats()["bytes_in_use"] == in_use


def test_the_ring_of_a_closed_executor_refuses_copies(run_python):
    # (Uploads and downloads to a closed device are refused before any path is chosen:
    # test_copier.py.)
    code = """
import pluggable
from pluggable.errors import FailedPreconditionError
d = pluggable.get_device("xpu:0")
ring = d.executor.staging
d.close()
d.executor.close()
try:
    ring.copy(d.compute_stream, 4, lambda address: None)
except FailedPreconditionError as e:
    print("staging refused:", e)
"""
    out = run_python(code).stdout.splitlines()
    assert out[0].startswith("staging refused:") and "is closed" in out[0]


def test_closing_the_executor_returns_the_fences_events(run_python):
    code = """
import numpy as np
import pluggable
from pluggable.devices import staging
d = pluggable.get_device("xpu:0")
d._copier = False  # every upload through the ring
ex = d.executor
for i in range(staging.RING_BYTES // staging.FENCES_PER_LAP // 64 * 3):
    pluggable.tensor(np.int32([i]), device=d)
print("held", ex.staging.held_events)
ex.close()
print("left", ex._staging.held_events, len(ex._event_manager._pool))
"""
    out = run_python(code).stdout.splitlines()
    assert out[0] == "held 3"
    assert out[1] == "left 0 0"  # handed back, then destroyed with the pool


def test_without_fences_the_ring_never_reuses_memory_still_queued(small_ring, faults,
                                                                  stream_delay):
    device = pluggable.get_device("XPU:0")
    stream_delay(200)
    faults("record_event")  # no event can be recorded: no fence, and no bounded wait
    uploads = []
    with pytest.raises(InternalError, match="injected fault"):
        for i in range(40):  # 1 KiB each through 16 KiB: the ring comes round
            uploads.append(pluggable.tensor(np.full(128, i, np.int64), device=device))
    assert 8 <= len(uploads) < 40  # refused when it needed memory it could not see free
    faults("")
    stream_delay(0)
    for i in range(len(uploads), 40):  # with events again, the ring reclaims and goes on
        uploads.append(pluggable.tensor(np.full(128, i, np.int64), device=device))
    assert small_ring._head > 2 * small_ring.capacity
    for i, t in enumerate(uploads):
        assert t.numpy().tolist() == [i] * 128
