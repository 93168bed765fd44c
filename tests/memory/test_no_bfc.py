"""A platform whose SP_Platform.use_bfc_allocator is 0 asks the host not to pool its memory:
every allocation goes to the plugin's allocate and every free to its deallocate, as
TensorFlow does for such a platform, while statistics and limits stay the host's."""
from __future__ import annotations

import ctypes

import pytest


def _platform(private_manager, build_test_plugin, **macros):
    path = build_test_plugin(**macros)
    platform = private_manager.load_plugin(path)
    live = ctypes.CDLL(path).test_plugin_live_allocations
    live.restype = ctypes.c_int64
    return platform.executor(0), live


def test_every_allocation_is_the_plugins(private_manager, build_test_plugin):
    executor, live = _platform(private_manager, build_test_plugin, NO_BFC_ALLOCATOR=True)
    assert not executor.platform.use_bfc_allocator
    allocator = executor.allocator
    start = live()
    addresses = [allocator.allocate(40) for _ in range(3)]
    assert live() == start + 3  # one plugin allocation per request
    stats = allocator.stats()
    assert stats["bytes_in_use"] == 3 * 256 and stats["num_allocs"] == 3
    # Each is its own region: the request rounded to 256 bytes (256 more when the plugin's
    # memory comes back misaligned, as malloc's does), nothing kept beyond it.
    assert 3 * 256 <= stats["bytes_reserved"] <= 3 * 512
    allocator.deallocate(addresses.pop())
    assert live() == start + 2  # freed at once to the plugin
    assert allocator.stats()["bytes_in_use"] == 2 * 256
    for address in addresses:
        allocator.deallocate(address)
    assert live() == start and allocator.stats()["bytes_reserved"] == 0
    assert allocator.stats()["peak_bytes_in_use"] == 3 * 256


def test_a_pooling_platform_keeps_one_region_for_many(private_manager, build_test_plugin):
    executor, live = _platform(private_manager, build_test_plugin)
    assert executor.platform.use_bfc_allocator
    allocator = executor.allocator
    start = live()
    addresses = [allocator.allocate(40) for _ in range(3)]
    assert live() == start + 1  # one region serves all three
    # a region of most of the device's 1 MiB, for 3 x 256 bytes in use
    assert allocator.stats()["bytes_reserved"] > 100 * 3 * 256
    for address in addresses:
        allocator.deallocate(address)
    assert live() == start + 1  # kept for the next allocation


def test_the_limit_still_holds_without_pooling(private_manager, build_test_plugin):
    from pluggable.errors import ResourceExhaustedError

    executor, live = _platform(private_manager, build_test_plugin, NO_BFC_ALLOCATOR=True)
    executor.allocator_options = {"memory_limit": 4096}
    allocator = executor.allocator
    kept = [allocator.allocate(1000) for _ in range(3)]
    with pytest.raises((ResourceExhaustedError, MemoryError)):
        allocator.allocate(2048)
    for address in kept:
        allocator.deallocate(address)
    assert allocator.stats()["bytes_in_use"] == 0
