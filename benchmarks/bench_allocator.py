"""Latency of an allocate + free pair through `BFCAllocator`, against the plugin's own
``SP_StreamExecutor.allocate`` + ``deallocate`` called through ctypes in the same run.

    python benchmarks/bench_allocator.py [--batches N] [--batch-size M]

Each batch times M pairs with ``time.perf_counter_ns``; the table shows the median over N
batches, per pair, in nanoseconds. Sizes 256 B, 4 KiB and 64 KiB, on XPU:0. Two more rows
say where the time goes: a ctypes call into the runtime library that returns at once (the
floor of any call from Python), and the BFC pair driven through the bare ctypes functions
without the Python method around them. Goal: the BFC pair at most 1.5 us median.

A second table times the public `StreamExecutor.allocate(n).close()` (a `DeviceMemory`
object per allocation) against the same raw plugin pair, in interleaved rounds (each sample:
the fastest of 10 batches of 200 pairs): per-round ratio min / median / max and the
machine's load. Goal: at most 2x the raw pair.
"""
from __future__ import annotations

import argparse
import ctypes
import statistics
import time

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _ratios import best_per_call, print_table, rounds  # noqa: E402

import pluggable  # noqa: E402
from pluggable import allocator as bfc_module  # noqa: E402
from pluggable.abi.stream_executor import SP_DeviceMemoryBase  # noqa: E402
from pluggable.devices.allocator import BFCAllocator  # noqa: E402

SIZES = [256, 4 << 10, 64 << 10]


def median_per_pair(pair, batches: int, batch_size: int) -> float:
    """Median over `batches` of the mean time of one call of `pair()` in a batch, in ns."""
    timer = time.perf_counter_ns
    loop = range(batch_size)
    for _ in loop:  # warm up
        pair()
    samples = []
    for _ in range(batches):
        started = timer()
        for _ in loop:
            pair()
        samples.append((timer() - started) / batch_size)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=50)
    parser.add_argument("--batch-size", type=int, default=2000)
    args = parser.parse_args()
    executor = pluggable.get_platform("REF_XPU").executor(0)
    raw_allocate, raw_deallocate = executor._fns["allocate"], executor._fns["deallocate"]
    device = executor._device_ptr
    base = SP_DeviceMemoryBase.new()
    ref = ctypes.byref(base)

    rows = []
    with BFCAllocator(executor, memory_limit=256 << 20, allow_growth=True) as bfc:
        allocate, deallocate = bfc.allocate, bfc.deallocate
        c_allocate, c_deallocate = bfc_module._BFCAllocate, bfc_module._BFCDeallocate
        handle = bfc.handle
        bfc.deallocate(bfc.allocate(1 << 20))  # the first region exists before timing

        def empty_call():
            c_deallocate(handle, 0)  # returns at once: the cost of crossing into C

        floor = median_per_pair(empty_call, args.batches, args.batch_size)
        for size in SIZES:
            def raw_pair(size=size):
                raw_allocate(device, size, 0, ref)
                raw_deallocate(device, ref)

            def bfc_pair(size=size):
                deallocate(allocate(size))

            def bare_bfc_pair(size=size):
                c_deallocate(handle, c_allocate(handle, size))

            # Interleaved, so drift affects all three alike.
            raw = median_per_pair(raw_pair, args.batches, args.batch_size)
            mine = median_per_pair(bfc_pair, args.batches, args.batch_size)
            bare = median_per_pair(bare_bfc_pair, args.batches, args.batch_size)
            rows.append((size, raw, mine, bare))
        bfc.check()
        assert bfc.stats()["bytes_in_use"] == 0

    print(f"{'size':>8} {'plugin allocate+deallocate':>27} {'BFCAllocator pair':>18} "
          f"{'ratio':>6} {'bare ctypes BFC pair':>21}")
    for size, raw, mine, bare in rows:
        print(f"{size:>8} {raw:>24.0f} ns {mine:>15.0f} ns {mine / raw:>6.2f} {bare:>18.0f} ns")
    print(f"one ctypes call into the runtime library that returns at once: {floor:.0f} ns")
    worst = max(mine for _, _, mine, _ in rows)
    print(f"goal: BFCAllocator pair <= 1500 ns median: {'met' if worst <= 1500 else 'MISSED'} "
          f"(worst {worst:.0f} ns)")

    allocate = executor.allocate
    for size in SIZES:
        def raw_pair(size=size):
            raw_allocate(device, size, 0, ref)
            raw_deallocate(device, ref)

        def public_pair(size=size):
            allocate(size).close()

        samples = rounds({"plugin allocate + deallocate (ctypes)":
                          best_per_call(raw_pair, 200, 10),
                          "StreamExecutor.allocate(n).close()":
                          best_per_call(public_pair, 200, 10)},
                         args.batches)
        print_table(f"{size} B: public allocator pair against the raw plugin pair",
                    samples, "plugin allocate + deallocate (ctypes)", "ns", 1e9, goal=2.0)


if __name__ == "__main__":
    main()
