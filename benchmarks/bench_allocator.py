"""Allocate + free pairs: through `BFCAllocator` and through the public
`StreamExecutor.allocate(n).close()`, against the XPU plugin's own
``SP_StreamExecutor.allocate`` + ``deallocate`` called through ctypes in the same run.

    python benchmarks/bench_allocator.py [--batches N] [--batch-size M] [--write]

For each size (256 B, 4 KiB and 64 KiB, on XPU:0) the rows take turns in each of N rounds;
a sample is the fastest of 10 batches of M / 10 pairs, per pair. Rows: the plugin's pair
(the reference), the `BFCAllocator` pair (its first region already reserved, growth on),
the same BFC pair through the bare ctypes functions without the Python methods around
them, the public `StreamExecutor.allocate(n).close()` (a `DeviceMemory` object per
allocation), and one ctypes call into the runtime library that returns at once (the floor
of any call from Python). Each row: its median time and its per-round ratio to the
reference, min / median / max. Goals: the BFC pair at most 1.5 us median; the public pair
at most 2x the plugin's pair.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _ratios import Report, add_write_flag, best_per_call, rounds  # noqa: E402

import pluggable  # noqa: E402
from pluggable.devices import allocator as bfc_module  # noqa: E402
from pluggable.abi.stream_executor import SP_DeviceMemoryBase  # noqa: E402
from pluggable.devices.allocator import BFCAllocator  # noqa: E402

SIZES = [256, 4 << 10, 64 << 10]
REFERENCE = "plugin allocate + deallocate (ctypes)"
BFC = "BFCAllocator allocate + deallocate"
PUBLIC = "StreamExecutor.allocate(n).close()"

NOTE = """A pair makes two calls into C, and one ctypes call that returns at once (the
last row) is the floor of any such call from Python; the plugin's own pair goes through
ctypes function pointers with a `byref` struct. The public pair makes one C call
(`pluggable._compiled.Memory` holds the `SP_DeviceMemoryBase` itself), which is why it costs
less than the reference's two."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=50, help="rounds")
    parser.add_argument("--batch-size", type=int, default=2000,
                        help="pairs per sample (the fastest of 10 batches of a tenth)")
    add_write_flag(parser)
    args = parser.parse_args()
    report = Report(__file__, "Allocator: allocate + free pairs", NOTE)
    executor = pluggable.get_platform("REF_XPU").executor(0)
    raw_allocate, raw_deallocate = executor._fns["allocate"], executor._fns["deallocate"]
    device = executor._device_ptr
    base = SP_DeviceMemoryBase.new()
    ref = ctypes.byref(base)
    calls = max(1, args.batch_size // 10)

    worst_bfc = 0.0
    with BFCAllocator(executor, memory_limit=256 << 20, allow_growth=True) as bfc:
        allocate, deallocate = bfc.allocate, bfc.deallocate
        c_allocate, c_deallocate = bfc_module._BFCAllocate, bfc_module._BFCDeallocate
        handle = bfc.handle
        bfc.deallocate(bfc.allocate(1 << 20))  # the first region exists before timing
        public_allocate = executor.allocate

        def empty_call():
            c_deallocate(handle, 0)  # returns at once: the cost of crossing into C

        for size in SIZES:
            def raw_pair(size=size):
                raw_allocate(device, size, 0, ref)
                raw_deallocate(device, ref)

            def bfc_pair(size=size):
                deallocate(allocate(size))

            def bare_bfc_pair(size=size):
                c_deallocate(handle, c_allocate(handle, size))

            def public_pair(size=size):
                public_allocate(size).close()

            samples = rounds({REFERENCE: best_per_call(raw_pair, calls, 10),
                              BFC: best_per_call(bfc_pair, calls, 10),
                              "the same through bare ctypes calls":
                                  best_per_call(bare_bfc_pair, calls, 10),
                              PUBLIC: best_per_call(public_pair, calls, 10),
                              "one ctypes call that returns at once":
                                  best_per_call(empty_call, calls, 10)},
                             args.batches)
            report.table(f"{size} B, per pair", samples, REFERENCE, "ns", 1e9, goal=2.0,
                         goal_rows=[PUBLIC], goal_label="the public pair")
            worst_bfc = max(worst_bfc, statistics.median(samples[BFC]))
        bfc.check()
        assert bfc.stats()["bytes_in_use"] == 0
    report.goal("BFCAllocator pair <= 1500 ns median at every size", worst_bfc <= 1.5e-6,
                f"worst {worst_bfc * 1e9:.0f} ns")
    report.finish(args.write)


if __name__ == "__main__":
    main()
