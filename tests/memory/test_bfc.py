"""The BFC allocator's behaviour: alignment, reuse, best fit, splitting and coalescing, region
growth, limits, out-of-memory handling, statistics and errors."""
from __future__ import annotations

import ctypes
import gc

import numpy as np
import pytest

from pluggable.base import native as _native
from pluggable.abi.stream_executor import SP_AllocatorStats
from pluggable.devices.allocator import BFCAllocator, Chunk, _fns
from pluggable.errors import (
    FailedPreconditionError, InvalidArgumentError, ResourceExhaustedError)
from pluggable.devices.memory import DeviceMemory

KIB = 1 << 10
MIB = 1 << 20


@pytest.fixture
def make_bfc(xpu):
    """``make_bfc(memory_limit=..., allow_growth=..., kind=...)``: a BFCAllocator over XPU:0.
    After the test its invariants must hold and it is closed (the xpu fixture then checks
    that every region went back to the plugin)."""
    made = []

    def make(**options) -> BFCAllocator:
        allocator = BFCAllocator(xpu, **options)
        made.append(allocator)
        return allocator

    yield make
    for allocator in made:
        if not allocator.is_closed:
            allocator.check()
            allocator.close()


def round_up(size):
    return (size + 255) // 256 * 256


def layout(allocator):
    """The chunks as (size, in_use) pairs, region by region."""
    return [(c.size, c.in_use) for c in allocator.chunks()]


def test_addresses_are_aligned_and_sizes_rounded_up(make_bfc):
    a = make_bfc(memory_limit=8 * MIB, allow_growth=True)
    sizes = [1, 255, 256, 257, 1000, 4096, 65537, MIB]
    addresses = [a.allocate(size) for size in sizes]
    assert all(address % 256 == 0 and address != 0 for address in addresses)
    assert [a.allocated_size(p) for p in addresses] == [round_up(s) for s in sizes]
    ranges = sorted((p, p + round_up(s)) for p, s in zip(addresses, sizes))
    assert all(end <= start for (_, end), (start, _) in zip(ranges, ranges[1:]))
    assert a.stats()["bytes_in_use"] == sum(round_up(s) for s in sizes)
    for p in addresses:
        a.deallocate(p)
    assert a.stats()["bytes_in_use"] == 0


def test_size_zero_gives_address_zero_and_changes_nothing(make_bfc):
    a = make_bfc(memory_limit=MIB)
    before = a.stats()
    assert a.allocate(0) == 0
    a.deallocate(0)
    assert a.stats() == before and a.chunks() == []


def test_freed_memory_is_reused(make_bfc):
    a = make_bfc(memory_limit=4 * MIB, allow_growth=True)
    first = a.allocate(1000)
    a.deallocate(first)
    assert a.allocate(1000) == first
    assert a.stats()["num_allocs"] == 2 and a.stats()["bytes_reserved"] == 2 * MIB


def test_split_and_coalesce_with_both_neighbours(make_bfc):
    a = make_bfc(memory_limit=2 * MIB, allow_growth=True)
    x, y, z = a.allocate(KIB), a.allocate(KIB), a.allocate(KIB)
    assert (y - x, z - y) == (KIB, KIB)
    rest = 2 * MIB - 3 * KIB
    assert layout(a) == [(KIB, True), (KIB, True), (KIB, True), (rest, False)]
    a.deallocate(y)  # neighbours in use: stays alone
    assert layout(a) == [(KIB, True), (KIB, False), (KIB, True), (rest, False)]
    a.deallocate(x)  # merges with the free chunk after it
    assert layout(a) == [(2 * KIB, False), (KIB, True), (rest, False)]
    a.deallocate(z)  # merges with both neighbours: the region is one free chunk again
    assert layout(a) == [(2 * MIB, False)]
    a.check()


def make_holes(a, sizes):
    """Allocates chunks of `sizes`, each followed by a 256-byte separator that stays in use,
    then frees them: free holes of those sizes that cannot coalesce. Returns their addresses."""
    holes = []
    for size in sizes:
        holes.append(a.allocate(size))
        a.allocate(256)
    for address in holes:
        a.deallocate(address)
    return holes


def test_best_fit_takes_the_smallest_hole_that_fits(make_bfc):
    a = make_bfc(memory_limit=2 * MIB, allow_growth=True)
    # Four holes in the same size class [2 KiB, 4 KiB), then one in [1 KiB, 2 KiB).
    h3k, h2_5k, h3_5k, h2_25k, h1k = make_holes(
        a, [3 * KIB, 2560, 3584, 2304, KIB])
    assert a.allocate(2200) == h2_25k  # 2304 bytes: the exact hole, not the first one
    assert a.allocate(2400) == h2_5k
    assert a.allocate(3000) == h3k
    assert a.allocate(KIB) == h1k
    # Nothing left in [1 KiB, 2 KiB): the smallest chunk of a larger class, split.
    assert a.allocate(1000) == h3_5k
    assert a.allocate(2560) == h3_5k + KIB


def test_equal_holes_are_taken_lowest_address_first(make_bfc):
    a = make_bfc(memory_limit=2 * MIB, allow_growth=True)
    holes = make_holes(a, [4 * KIB] * 5)
    assert [a.allocate(4 * KIB) for _ in holes] == sorted(holes)


def test_growth_doubles_each_region(make_bfc):
    a = make_bfc(memory_limit=64 * MIB, allow_growth=True)
    reserved = []
    with pytest.raises(ResourceExhaustedError):
        while True:
            a.allocate(MIB)
            if not reserved or reserved[-1] != a.stats()["bytes_reserved"]:
                reserved.append(a.stats()["bytes_reserved"])
    # 2, 4, 8, 16, 32 MiB regions, then what is left of the limit (2 MiB).
    assert [r // MIB for r in reserved] == [2, 6, 14, 30, 62, 64]
    assert sorted(size // MIB for _, size in a.regions()) == [2, 2, 4, 8, 16, 32]
    assert a.stats()["bytes_in_use"] == 64 * MIB


def test_growth_region_is_at_least_the_request(make_bfc):
    a = make_bfc(memory_limit=64 * MIB, allow_growth=True)
    a.allocate(5 * MIB)  # bigger than the first region would be
    assert a.stats()["bytes_reserved"] == 5 * MIB
    a.allocate(KIB)  # the next region doubles the previous one
    assert a.stats()["bytes_reserved"] == 15 * MIB


def test_without_growth_the_first_allocation_reserves_the_limit(make_bfc):
    a = make_bfc(memory_limit=8 * MIB + 100, allow_growth=False)
    assert a.stats()["bytes_reserved"] == 0
    a.allocate(1)
    stats = a.stats()
    assert stats["bytes_reserved"] == stats["bytes_limit"] == 8 * MIB  # rounded down to 256
    assert a.regions() == [(a.chunks()[0].address, 8 * MIB)]


@pytest.mark.parametrize("growth", [False, True])
def test_the_limit_is_never_exceeded(make_bfc, growth):
    a = make_bfc(memory_limit=3 * MIB, allow_growth=growth)
    live = []
    with pytest.raises(ResourceExhaustedError):
        while True:
            live.append(a.allocate(256 * KIB))
            assert a.stats()["bytes_reserved"] <= 3 * MIB
    assert len(live) == 12  # 3 MiB / 256 KiB, whatever the region sizes
    assert a.stats()["bytes_reserved"] == 3 * MIB
    for p in live:
        a.deallocate(p)


def test_release_free_regions(make_bfc, xpu):
    before = xpu.live_handles()["allocations"]
    a = make_bfc(memory_limit=64 * MIB, allow_growth=True)
    small, big = a.allocate(2 * MIB), a.allocate(4 * MIB)
    assert xpu.live_handles()["allocations"] == before + 2
    a.deallocate(big)
    assert a.release_free_regions() == 4 * MIB
    assert a.stats()["bytes_reserved"] == 2 * MIB
    assert xpu.live_handles()["allocations"] == before + 1
    assert a.release_free_regions() == 0  # the other region is in use
    a.deallocate(small)
    assert a.release_free_regions() == 2 * MIB
    assert a.stats()["bytes_reserved"] == 0 and a.chunks() == []
    assert xpu.live_handles()["allocations"] == before


def test_out_of_memory_releases_free_regions_and_retries(make_bfc):
    a = make_bfc(memory_limit=14 * MIB, allow_growth=True)
    two, four, eight = a.allocate(2 * MIB), a.allocate(4 * MIB), a.allocate(8 * MIB)
    assert a.stats()["bytes_reserved"] == 14 * MIB
    a.deallocate(two)
    a.deallocate(four)
    # No free chunk holds 6 MiB and the limit is reached: only giving the two free regions
    # back to the plugin makes room for a new one.
    assert a.stats()["largest_free_block_bytes"] == 4 * MIB
    six = a.allocate(6 * MIB)
    assert sorted(size for _, size in a.regions()) == [6 * MIB, 8 * MIB]
    assert a.stats()["bytes_reserved"] == 14 * MIB
    a.deallocate(six)
    a.deallocate(eight)


def test_out_of_memory_message(make_bfc):
    a = make_bfc(memory_limit=4 * MIB, allow_growth=False)
    keep = a.allocate(3 * MIB)
    before = a.stats()
    with pytest.raises(ResourceExhaustedError) as info:
        a.allocate(2 * MIB)
    assert isinstance(info.value, MemoryError)
    message = str(info.value)
    for text in ("could not allocate 2.0 MiB (2097152 bytes)", "no room for another region",
                 "Memory limit 4.0 MiB",
                 "in use 3.0 MiB", "largest free chunk 1.0 MiB",
                 "[2.0 MiB, 4.0 MiB): in use 1 (3.0 MiB), free 0",
                 "[1.0 MiB, 2.0 MiB): in use 0 (0 B), free 1 (1.0 MiB)",
                 "free tensors", "set_memory_limit", "set_memory_growth", "allocate less"):
        assert text in message, (text, message)
    assert "[256 B" not in message  # only non-empty size classes are listed
    assert a.stats() == before
    a.deallocate(keep)


def test_a_request_larger_than_the_limit_says_so(make_bfc):
    a = make_bfc(memory_limit=MIB, allow_growth=True)
    with pytest.raises(ResourceExhaustedError, match="larger than the whole memory limit"):
        a.allocate(MIB + 1)
    assert a.stats()["bytes_reserved"] == 0


def test_deallocating_an_unknown_address_is_an_error_that_changes_nothing(make_bfc):
    a = make_bfc(memory_limit=4 * MIB, allow_growth=True)
    p = a.allocate(4 * KIB)
    before = a.stats()
    for bad in (p + 256, p + 4 * KIB, 0x1234, 1 << 60):
        with pytest.raises(InvalidArgumentError, match=f"address 0x{bad:x} was not allocated"):
            a.deallocate(bad)
    a.deallocate(p)
    with pytest.raises(InvalidArgumentError, match="already freed"):
        a.deallocate(p)  # twice
    assert a.stats()["bytes_in_use"] == 0 and a.stats()["num_allocs"] == before["num_allocs"]
    with pytest.raises(TypeError):
        a.deallocate("p")
    a.check()


def test_bad_sizes(make_bfc):
    a = make_bfc(memory_limit=MIB)
    for bad in (-1, 1 << 64, (1 << 64) + 256):  # ctypes would wrap the last one to 256
        with pytest.raises(InvalidArgumentError):
            a.allocate(bad)
    with pytest.raises(TypeError):
        a.allocate(1.5)
    assert a.allocate(np.int64(300)) != 0  # integer-like sizes are fine
    assert a.stats()["bytes_in_use"] == 512
    for c in a.chunks():
        if c.in_use:
            a.deallocate(np.uint64(c.address))


def test_statistics_peaks_and_reset(make_bfc):
    a = make_bfc(memory_limit=16 * MIB, allow_growth=True)
    small, big = a.allocate(MIB), a.allocate(3 * MIB - 100)
    a.deallocate(big)
    stats = a.stats()
    assert stats == {
        "num_allocs": 2, "bytes_in_use": MIB, "peak_bytes_in_use": 4 * MIB,
        "largest_alloc_size": 3 * MIB, "bytes_limit": 16 * MIB, "bytes_reserved": 6 * MIB,
        "peak_bytes_reserved": 6 * MIB, "bytes_reservable_limit": 16 * MIB,
        "largest_free_block_bytes": 4 * MIB}
    assert a.memory_info() == {"current": MIB, "peak": 4 * MIB}
    a.release_free_regions()
    a.reset_peak()
    stats = a.stats()
    assert (stats["peak_bytes_in_use"], stats["peak_bytes_reserved"]) == (MIB, 2 * MIB)
    assert stats["largest_alloc_size"] == 3 * MIB and stats["num_allocs"] == 2
    a.deallocate(small)
    assert a.memory_info() == {"current": 0, "peak": MIB}


def test_stats_respect_the_callers_struct_size(make_bfc):
    a = make_bfc(memory_limit=MIB, allow_growth=True)
    p = a.allocate(KIB)
    stats = SP_AllocatorStats.new()
    stats.bytes_reserved = stats.largest_free_block_bytes = -7
    stats.struct_size = SP_AllocatorStats.field_end("largest_alloc_size")  # an older host
    _fns["pluggable_BFCGetStats"](a.handle, ctypes.byref(stats))
    assert (stats.num_allocs, stats.bytes_in_use, stats.largest_alloc_size) == (1, KIB, KIB)
    assert stats.has_bytes_limit == 0 and stats.bytes_reserved == -7
    assert stats.largest_free_block_bytes == -7
    a.deallocate(p)


def test_describe_lists_the_non_empty_size_classes(make_bfc):
    a = make_bfc(memory_limit=8 * MIB, allow_growth=True, name="my pool")
    assert "no chunks: nothing is reserved" in a.describe()
    p, q = a.allocate(300), a.allocate(5000)
    text = a.describe()
    assert text.startswith("BFC allocator 'my pool' over device memory")
    assert "limit 8.0 MiB (8388608 bytes)" in text
    assert "in use 5.5 KiB (5632 bytes) in 2 allocation(s)" in text
    assert "reserved 2.0 MiB (2097152 bytes) in 1 region(s), 6.0 MiB unreserved" in text
    assert "[512 B, 1.0 KiB): in use 1 (512 B), free 0 (0 B)" in text
    assert "[4.0 KiB, 8.0 KiB): in use 1 (5.0 KiB), free 0 (0 B)" in text
    assert "[1.0 MiB, 2.0 MiB): in use 0 (0 B), free 1 (2.0 MiB)" in text
    assert text.count("\n    [") == 3
    a.deallocate(p)
    a.deallocate(q)


def test_chunks_tile_the_regions(make_bfc):
    a = make_bfc(memory_limit=8 * MIB, allow_growth=True)
    p = a.allocate(3 * MIB)
    q = a.allocate(100)
    chunks = a.chunks()
    assert chunks[0] == Chunk(p, 3 * MIB, 3 * MIB, True, chunks[0].region)
    assert Chunk(q, 256, 100, True, chunks[-1].region) in chunks
    for region, (start, size) in enumerate(a.regions()):
        mine = [c for c in chunks if c.region == region]
        assert mine[0].address == start
        assert sum(c.size for c in mine) == size
    a.deallocate(p)
    a.deallocate(q)


def test_device_memory_from_the_allocator_is_usable_by_the_plugin(make_bfc, xpu):
    a = make_bfc(memory_limit=4 * MIB, allow_growth=True)
    data = np.arange(1000, dtype=np.float32)
    p, q = a.allocate(data.nbytes), a.allocate(data.nbytes)
    xpu.sync_memcpy_htod(DeviceMemory.unchecked(xpu, p, data.nbytes), data)
    xpu.sync_memcpy_dtod(DeviceMemory.unchecked(xpu, q, data.nbytes),
                         DeviceMemory.unchecked(xpu, p, data.nbytes))
    out = np.zeros_like(data)
    xpu.sync_memcpy_dtoh(out, DeviceMemory.unchecked(xpu, q, data.nbytes))
    assert (out == data).all()
    a.deallocate(p)
    a.deallocate(q)


def test_a_failing_region_allocation_is_out_of_memory_and_leaves_no_trace(make_bfc, faults):
    a = make_bfc(memory_limit=16 * MIB, allow_growth=True)
    before = a.stats()
    faults("allocate:1")  # the plugin refuses the first region
    with pytest.raises(ResourceExhaustedError) as info:
        a.allocate(2 * MIB)  # exactly one first region: there is nothing smaller to try
    assert "the plugin refused a new region" in str(info.value)
    assert "the plugin refused 1 region request(s), the last one of 2.0 MiB" in str(info.value)
    assert a.stats() == before and a.chunks() == []
    p = a.allocate(2 * MIB)
    assert a.stats()["bytes_reserved"] == 2 * MIB
    a.deallocate(p)


def test_a_refused_region_is_retried_smaller(make_bfc, faults):
    a = make_bfc(memory_limit=16 * MIB, allow_growth=True)
    faults("allocate:1")
    p = a.allocate(KIB)  # 2 MiB refused, 1 MiB accepted
    assert a.stats()["bytes_reserved"] == MIB
    assert "refused 1 region request(s), the last one of 2.0 MiB" in a.describe()
    a.deallocate(p)


def test_pinned_host_pool(make_bfc, xpu):
    before = xpu.live_handles()["host_allocations"]
    a = make_bfc(kind="host")
    assert a.allow_growth and a.memory_limit <= 4 << 30
    p = a.allocate(4096)
    assert p % 256 == 0 and xpu.live_handles()["host_allocations"] == before + 1
    view = np.frombuffer((ctypes.c_uint8 * 4096).from_address(p), dtype=np.uint8)
    view[:] = np.arange(4096) % 251
    assert ctypes.string_at(p + 250, 3) == bytes([250, 0, 1])
    # Pinned memory is a host buffer the device copies from directly.
    with xpu.allocate(4096) as device:
        xpu.sync_memcpy_htod(device, view)
        out = bytearray(4096)
        xpu.sync_memcpy_dtoh(out, device)
    assert bytes(out) == view.tobytes()
    del view
    a.deallocate(p)
    a.close()
    assert xpu.live_handles()["host_allocations"] == before


def test_default_limits(xpu):
    total = xpu.memory_usage()[1]
    with BFCAllocator(xpu) as a:
        assert a.memory_limit == int(total * 0.9) // 256 * 256
        assert a.stats()["bytes_limit"] == a.memory_limit
        assert a.allow_growth is False  # REF_XPU does not force memory growth
        assert a.kind == "device" and a.name == "XPU:0 (REF_XPU) device memory"


def test_bad_arguments(xpu):
    for limit in (0, 255, -1):
        with pytest.raises(InvalidArgumentError, match="memory_limit"):
            BFCAllocator(xpu, memory_limit=limit)
    with pytest.raises(TypeError):
        BFCAllocator(xpu, memory_limit=1.5e6)
    with pytest.raises(InvalidArgumentError, match="'device' or 'host'"):
        BFCAllocator(xpu, kind="unified")
    # The C constructor reports bad arguments through the status.
    status = _native.Status()
    new = _fns["pluggable_BFCNew"]
    assert not new(0, ctypes.addressof(xpu._device), ctypes.addressof(xpu._se), 255, 0,
                   b"tiny", status.address)
    assert status.message == "pluggable_BFCNew(tiny): memory_limit must be at least 256 bytes"
    assert not new(7, ctypes.addressof(xpu._device), ctypes.addressof(xpu._se), MIB, 0,
                   b"k", status.address)
    assert "kind must be 0" in status.message
    assert not new(0, None, None, MIB, 0, None, status.address)
    assert "must not be NULL" in status.message


def test_a_pinned_pool_needs_the_plugins_host_memory_callbacks(private_manager,
                                                               build_test_plugin):
    path = build_test_plugin(PLATFORM_NAME="BFC_NOHOST", DEVICE_TYPE="BFCNOHOST",
                             NULL_SE_CALLBACK="host_memory_allocate",
                             NULL_SE_CALLBACK2="host_memory_deallocate")
    executor = private_manager.load_plugin(path).executor(0)
    with pytest.raises(InvalidArgumentError, match="needs SP_StreamExecutor.host_memory"):
        BFCAllocator(executor, kind="host")
    with BFCAllocator(executor) as a:  # device memory still works
        # The test plugin reports 1 MiB in total and mallocs regions (16-byte aligned): the
        # allocator aligns the region's start and uses a little less of it.
        assert a.memory_limit == int((1 << 20) * 0.9) // 256 * 256
        p = a.allocate(100 * KIB)
        assert p % 256 == 0
        a.check()
        a.deallocate(p)


def test_close_is_idempotent_and_reports_live_allocations(xpu):
    before = xpu.live_handles()["allocations"]
    a = BFCAllocator(xpu, memory_limit=4 * MIB, allow_growth=True)
    a.allocate(KIB)
    a.allocate(KIB)
    assert a.close() == 2 and a.leaked_allocations == 2
    assert a.close() == 0 and a.is_closed and a.handle is None
    assert xpu.live_handles()["allocations"] == before  # regions went back to the plugin
    for call in (lambda: a.allocate(1), lambda: a.deallocate(1 << 20), a.stats, a.check):
        with pytest.raises(FailedPreconditionError, match="is closed"):
            call()
    assert "closed" in repr(a)


def test_the_finalizer_returns_the_regions(xpu):
    before = xpu.live_handles()["allocations"]
    a = BFCAllocator(xpu, memory_limit=4 * MIB, allow_growth=True)
    a.allocate(KIB)
    assert xpu.live_handles()["allocations"] == before + 1
    del a
    gc.collect()
    assert xpu.live_handles()["allocations"] == before


def test_closing_after_the_executor_does_not_touch_the_plugin(private_manager,
                                                              build_test_plugin):
    path = build_test_plugin(PLATFORM_NAME="BFC_CLOSE", DEVICE_TYPE="BFCCLOSE")
    executor = private_manager.load_plugin(path).executor(0)
    a = BFCAllocator(executor, memory_limit=512 * KIB)
    a.allocate(KIB)
    executor.close()  # the device is gone, and with it the plugin's memory
    assert a.close() == 1
