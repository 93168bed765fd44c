"""Lifetimes: a producer's deleter runs exactly once, after the last user of its memory is
gone, also when a capsule is never consumed; our own exports keep the tensor's memory alive
until the consumer is done; 10 000 round trips leave host RSS and device memory flat."""
from __future__ import annotations

import gc
import os
import threading

import numpy as np
import pytest

import pluggable
from pluggable.tensors.dlpack import live_exports

ROUND_TRIPS = 10_000


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def test_deleter_runs_once_after_the_last_user(producer):
    calls = producer.deleter_calls
    values = np.arange(8, dtype=np.float32)
    t = pluggable.from_dlpack(producer.capsule(values))
    view = np.from_dlpack(t)  # NumPy now shares it too
    again = pluggable.from_dlpack(t)
    np.testing.assert_array_equal(again.numpy(), values)
    del t
    gc.collect()
    assert producer.deleter_calls == calls
    del again
    gc.collect()
    assert producer.deleter_calls == calls
    np.testing.assert_array_equal(view, values)  # still the producer's memory, still alive
    del view
    gc.collect()
    assert producer.deleter_calls == calls + 1


@pytest.mark.parametrize("versioned", [True, False])
def test_unconsumed_capsules_are_freed_once(producer, versioned):
    calls = producer.deleter_calls
    capsule = producer.capsule(np.arange(3, dtype=np.float32), versioned=versioned)
    del capsule
    assert producer.deleter_calls == calls + 1
    t = pluggable.tensor(np.arange(3.0))
    before = live_exports()
    capsule = t.__dlpack__(max_version=(1, 0) if versioned else None)
    if not versioned:
        assert live_exports() == before + 1
    del capsule
    assert live_exports() == before


def test_our_export_outlives_the_tensor(torch):
    """The consumer keeps the memory: dropping every pluggable reference changes nothing."""
    t = pluggable.tensor(np.arange(5, dtype=np.int64) * 7)
    theirs = torch.utils.dlpack.from_dlpack(pluggable.to_dlpack(t))
    before = live_exports()
    del t
    gc.collect()
    assert theirs.tolist() == [0, 7, 14, 21, 28]
    del theirs
    gc.collect()
    assert live_exports() == before - 1


def test_xpu_export_keeps_device_memory_until_the_consumer_is_done():
    device = pluggable.get_device("XPU:0")
    allocator = device.executor.allocator
    t = pluggable.tensor(np.ones(1 << 16, np.float32), device=device)
    gc.collect()
    device.executor.event_manager.synchronize()  # frees deferred by earlier work are done
    in_use = allocator.stats()["bytes_in_use"]
    capsule = t.__dlpack__(max_version=(1, 0))
    del t
    gc.collect()
    assert allocator.stats()["bytes_in_use"] == in_use  # the capsule holds the buffer
    del capsule
    gc.collect()
    device.executor.event_manager.synchronize()  # the upload's marker may still be pending
    assert allocator.stats()["bytes_in_use"] == in_use - (1 << 18)


def test_deleter_called_from_another_thread_and_during_an_exception(torch):
    before = live_exports()
    theirs = torch.utils.dlpack.from_dlpack(pluggable.to_dlpack(pluggable.tensor(np.arange(4.0))))
    assert live_exports() == before + 1
    holder = [theirs]
    del theirs

    def drop():
        holder.clear()  # torch frees the tensor on this thread and calls our deleter

    worker = threading.Thread(target=drop)
    worker.start()
    worker.join()
    gc.collect()
    assert live_exports() == before
    # A capsule NumPy refuses (XPU memory) is destroyed while NumPy's error is pending.
    xpu_tensor = pluggable.tensor([1.0], device="/xpu:0")
    with pytest.raises(RuntimeError, match="Unsupported device"):
        np.from_dlpack(xpu_tensor)
    assert live_exports() == before


@pytest.mark.skipif("-fsanitize" in os.environ.get("PLUGGABLE_TEST_CFLAGS", ""),
                    reason="AddressSanitizer's quarantine holds freed memory: RSS is not flat")
def test_cpu_round_trips_stay_flat(producer):
    values = np.arange(256, dtype=np.float32)
    calls, live = producer.deleter_calls, producer.live
    exports = live_exports()

    def once():
        t = pluggable.from_dlpack(producer.capsule(values))
        back = np.from_dlpack(t)
        assert back[5] == 5.0
        torn = pluggable.from_dlpack(pluggable.to_dlpack(t))
        assert torn.shape == (256,)

    for _ in range(200):
        once()
    gc.collect()
    rss = rss_bytes()
    for _ in range(ROUND_TRIPS):
        once()
    gc.collect()
    assert producer.deleter_calls == calls + ROUND_TRIPS + 200
    assert producer.live == live
    assert live_exports() == exports
    assert rss_bytes() - rss < 8 << 20, "host memory grew over the round trips"


def test_xpu_round_trips_stay_flat():
    device = pluggable.get_device("XPU:0")
    allocator = device.executor.allocator
    t = pluggable.tensor(np.arange(1024, dtype=np.float32), device=device)
    exports = live_exports()

    def once(i):
        same = pluggable.from_dlpack(t)
        assert same._buffer is t._buffer
        if i % 50 == 0:  # a host copy now and then: each is a device-to-host transfer
            host = np.from_dlpack(same, device="cpu")
            assert host[3] == 3.0
        c = pluggable.to_dlpack(same)
        del c

    for i in range(200):
        once(i)
    gc.collect()
    device.executor.event_manager.synchronize()
    rss, in_use = rss_bytes(), allocator.stats()["bytes_in_use"]
    for i in range(ROUND_TRIPS):
        once(i)
    gc.collect()
    device.executor.event_manager.synchronize()
    assert allocator.stats()["bytes_in_use"] == in_use
    assert live_exports() == exports
    assert rss_bytes() - rss < 8 << 20, "host memory grew over the round trips"


EXIT_SCRIPT = """
import numpy as np, pluggable
t = pluggable.tensor(np.arange(5.0))
capsules = [pluggable.to_dlpack(t) for _ in range(3)]  # never consumed
small = pluggable.tensor(np.arange(3, dtype=np.int8))
imported = [pluggable.from_dlpack(pluggable.to_dlpack(small)) for _ in range(2)]
on_xpu = pluggable.tensor(np.arange(4.0), device="/xpu:0")
xpu_capsule = on_xpu.__dlpack__(max_version=(1, 0))
import torch  # imported last: its module goes before ours at shutdown
held_by_torch = torch.utils.dlpack.from_dlpack(pluggable.to_dlpack(t))
class Cycle:
    pass
cycle = Cycle()
cycle.self, cycle.capsule = cycle, pluggable.to_dlpack(t)  # freed by the last collection
print("exported")
"""


def test_capsules_alive_at_exit_do_not_crash(run_python, torch):
    """Capsules and tensors of other libraries still holding our memory when the interpreter
    exits: their deleters run during shutdown, when Python code can no longer run; they must
    not crash it."""
    result = run_python(EXIT_SCRIPT, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "exported"
    assert result.stderr == ""
