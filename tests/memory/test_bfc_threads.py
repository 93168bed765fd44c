"""The BFC allocator under eight threads: allocations never overlap, the data each thread
writes through the plugin survives, and the statistics return to zero."""
from __future__ import annotations

import bisect
import random
import threading
import time

import numpy as np

from pluggable.devices.allocator import BFCAllocator
from pluggable.errors import ResourceExhaustedError
from pluggable.devices.memory import DeviceMemory

KIB = 1 << 10
MIB = 1 << 20
THREADS = 8
RUN_SECONDS = 2.0


class LiveRanges:
    """Address ranges currently handed out, across threads; reports any overlap."""

    def __init__(self):
        self.lock = threading.Lock()
        self.starts = []
        self.ends = {}
        self.overlaps = []

    def add(self, start, size):
        with self.lock:
            i = bisect.bisect_left(self.starts, start)
            if i > 0 and self.ends[self.starts[i - 1]] > start:
                self.overlaps.append((self.starts[i - 1], start))
            if i < len(self.starts) and start + size > self.starts[i]:
                self.overlaps.append((start, self.starts[i]))
            self.starts.insert(i, start)
            self.ends[start] = start + size

    def remove(self, start):
        with self.lock:
            self.starts.remove(start)
            del self.ends[start]


def test_eight_threads_allocate_write_and_free(xpu):
    allocator = BFCAllocator(xpu, memory_limit=64 * MIB, allow_growth=True)
    ranges = LiveRanges()
    stop = threading.Event()
    errors = []
    counts = [0] * THREADS

    def work(index):
        rng = random.Random(index)
        mine = []  # (address, size, pattern) this thread holds
        try:
            while not stop.is_set():
                if len(mine) < 6 and (not mine or rng.random() < 0.6):
                    size = rng.choice([rng.randint(1, 4 * KIB), rng.randint(4 * KIB, 256 * KIB),
                                       rng.randint(256 * KIB, MIB)])
                    try:
                        address = allocator.allocate(size)
                    except ResourceExhaustedError:
                        continue
                    ranges.add(address, size)
                    pattern = np.full(size, (index * 31 + counts[index]) % 251, np.uint8)
                    xpu.sync_memcpy_htod(DeviceMemory.unchecked(xpu, address, size), pattern)
                    mine.append((address, size, pattern))
                    counts[index] += 1
                else:
                    address, size, pattern = mine.pop(rng.randrange(len(mine)))
                    out = np.empty(size, np.uint8)
                    xpu.sync_memcpy_dtoh(out, DeviceMemory.unchecked(xpu, address, size))
                    if not np.array_equal(out, pattern):
                        errors.append(f"thread {index}: data at 0x{address:x} was overwritten")
                    ranges.remove(address)
                    allocator.deallocate(address)
        except BaseException as exc:  # reported by the main thread
            errors.append(f"thread {index}: {type(exc).__name__}: {exc}")
        finally:
            for address, _, _ in mine:
                ranges.remove(address)
                allocator.deallocate(address)

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(THREADS)]
    for t in threads:
        t.start()
    time.sleep(RUN_SECONDS)
    stop.set()
    for t in threads:
        t.join(timeout=30)
    hung = [t.name for t in threads if t.is_alive()]
    assert not hung, f"threads did not finish (deadlock?): {hung}"
    assert not errors, errors[:5]
    assert not ranges.overlaps, f"live allocations overlapped: {ranges.overlaps[:5]}"
    assert all(c > 20 for c in counts), counts
    allocator.check()
    stats = allocator.stats()
    assert stats["bytes_in_use"] == 0 and stats["num_allocs"] == sum(counts)
    assert allocator.close() == 0
