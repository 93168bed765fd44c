"""DeviceMemory's lifetime: the struct the plugin's allocate filled goes back to deallocate
exactly once, by close() or, for memory dropped open, at the executor's next safe point; never
after the executor closed; and a failed allocate hands out no address."""
from __future__ import annotations

import ctypes
import gc

import numpy as np
import pytest

from pluggable import _compiled
from pluggable.errors import InvalidArgumentError, ResourceExhaustedError
from pluggable.devices.memory import DeviceMemory

LIMIT = 4096  # the test plugin's allocate fails above it, without writing the struct


@pytest.fixture
def limited(private_manager, build_test_plugin):
    """(executor, live allocation count) of the test plugin built with ALLOCATE_LIMIT."""
    path = build_test_plugin(ALLOCATE_LIMIT=LIMIT)
    executor = private_manager.load_plugin(path).executor(0)
    live = ctypes.CDLL(path).test_plugin_live_allocations
    live.restype = ctypes.c_int64
    return executor, live


@pytest.fixture
def invalid_frees(xpu_control):
    return xpu_control.XPU_InvalidFreeCount


def live(xpu):
    return xpu.live_handles()["allocations"]


def test_a_failed_allocate_hands_out_no_address(limited):
    executor, allocations = limited
    before = allocations()
    memory = executor.allocate(64)
    freed = memory.address
    memory.close()
    # The plugin returns without writing the struct: the host passed a fresh one, so there
    # is no address in it (not the one just freed) and the failure is reported as such.
    with pytest.raises(ResourceExhaustedError, match=f"could not allocate {LIMIT + 1} bytes"):
        executor.allocate(LIMIT + 1)
    assert allocations() == before
    again = executor.allocate(64)
    assert again.address and allocations() == before + 1
    again.close()
    assert freed and allocations() == before


def test_close_twice_and_from_threads_frees_once(xpu, in_threads, invalid_frees):
    before, bad = live(xpu), invalid_frees()
    memory = xpu.allocate(256)
    view = memory.view(16, 32)
    assert live(xpu) == before + 1 and not memory.is_closed and not view.is_closed
    in_threads(lambda i: memory.close(), 8)
    memory.close()
    view.close()  # a view owns nothing: a no-op
    assert memory.is_closed and view.is_closed
    assert live(xpu) == before and invalid_frees() == bad


def test_close_after_the_executor_closed_does_not_call_the_plugin(limited):
    executor, allocations = limited
    before = allocations()
    memory = executor.allocate(64)
    dropped = executor.allocate(64)
    executor.close()
    memory.close()  # destroying the device released everything: nothing left to free
    assert memory.is_closed and allocations() == before + 2
    del dropped
    gc.collect()
    assert executor._pending_releases == [] and allocations() == before + 2


def test_memory_dropped_open_is_released_at_the_next_allocation(xpu, invalid_frees):
    before, bad = live(xpu), invalid_frees()
    memory = xpu.allocate(64)
    cycle = [memory]
    cycle.append(cycle)  # freed by the collector, not by reference counting
    del memory, cycle
    gc.collect()
    assert live(xpu) == before + 1  # queued, not freed from inside the collector
    kept = xpu.allocate(64)  # a safe point: the queued release happens first
    assert live(xpu) == before + 1
    kept.close()
    assert live(xpu) == before and invalid_frees() == bad


def test_the_plugin_s_fields_and_a_non_owning_copy(xpu):
    before = live(xpu)
    memory = xpu.allocate(1000)
    assert memory.size == 1000 and memory.payload != 0  # the XPU's block id
    copy = DeviceMemory(xpu, memory.address, memory.size, memory.payload)
    assert (copy.address, copy.size, copy.payload) == (memory.address, 1000, memory.payload)
    copy.close()  # owns nothing
    assert not copy.is_closed and not memory.is_closed and live(xpu) == before + 1
    memory.close()
    assert live(xpu) == before


def test_views_and_copies_see_the_same_range(xpu):
    with xpu.allocate(64) as memory:
        view = memory.view(8, 16)
        inner = view.view(4, 4)
        assert inner._owner is memory and inner.address == memory.address + 12
        xpu.sync_memcpy_htod(memory, np.arange(64, dtype=np.uint8))
        out = np.zeros(16, np.uint8)
        xpu.sync_memcpy_dtoh(out, view)
        assert (out == np.arange(8, 24)).all()
        assert view._base.opaque == memory.address + 8 and view._base.size == 16
    assert inner.is_closed


@pytest.mark.parametrize("size, memory_space, error, words", [
    (-1, 0, InvalidArgumentError, "size must be a non-negative integer"),
    (1 << 63, 0, InvalidArgumentError, "too large"),
    ("12", 0, TypeError, "size must be an integer, not str"),
    (16, "0", TypeError, "memory_space must be an integer, not str"),
    (16, 1 << 63, InvalidArgumentError, "memory_space 9223372036854775808 does not fit"),
])
def test_bad_arguments_are_refused_before_the_plugin(xpu, size, memory_space, error, words):
    before = live(xpu)
    with pytest.raises(error, match=words):
        xpu.allocate(size, memory_space)
    assert live(xpu) == before


def test_integers_of_other_types_are_accepted(xpu):
    with xpu.allocate(np.int64(48), np.int32(0)) as memory:
        assert memory.size == 48 and memory.address
    with pytest.raises(ResourceExhaustedError, match="memory space -1"):
        xpu.allocate(16, -1)  # the XPU has memory space 0 only


def test_device_memory_made_directly_is_checked(xpu):
    with pytest.raises(TypeError, match="address must be an integer, not str"):
        DeviceMemory(xpu, "0x10", 4)
    with pytest.raises(ValueError, match="size must be an integer from 0 to 2..64 - 1, got -4"):
        DeviceMemory(xpu, 0x10, -4)
    with pytest.raises(TypeError, match="owner must be a DeviceMemory or None, not int"):
        DeviceMemory(xpu, 0x10, 4, 0, 5)
    with pytest.raises(AttributeError):
        DeviceMemory(xpu, 0x10, 4).executor = None


def test_the_plugin_allocator_refuses_what_it_cannot_call(xpu):
    with pytest.raises(TypeError, match="must subclass Memory"):
        _compiled.PluginAllocator(int, lambda *a: a, 1, 2, 3)
    with pytest.raises(TypeError, match="check_arguments must be callable"):
        _compiled.PluginAllocator(DeviceMemory, None, 1, 2, 3)
    with pytest.raises(ValueError, match="allocate must be a non-zero address"):
        _compiled.PluginAllocator(DeviceMemory, lambda *a: a, 1, 0, 3)
    odd = _compiled.PluginAllocator(DeviceMemory, lambda *a: ("x", 0), 1, 2, 3)
    with pytest.raises(TypeError, match="must return .size, memory_space. as integers"):
        odd.allocate(xpu, -1, 0)  # refused before anything is called through the addresses


def test_memory_dropped_while_its_executor_s_lock_is_held_is_still_released(run_python):
    # The collector may destroy open memory on a thread that holds the executor's lock (in
    # flush_releases, or while the executor makes its allocator): queueing the release must
    # not wait for that lock. In a child process with a bounded join, so that a regression
    # fails instead of hanging the suite.
    out = run_python("""
import threading
import pluggable
executor = pluggable.get_device("XPU:0").executor
memory = executor.allocate(64)
def drop():
    global memory
    with executor._lock:
        memory = None  # deallocated here, the lock held
worker = threading.Thread(target=drop, daemon=True)
worker.start()
worker.join(10)
print("stuck" if worker.is_alive() else "queued", len(executor._pending_releases))
executor.flush_releases()
print(len(executor._pending_releases))
""").stdout.split()
    assert out == ["queued", "1", "0"]
