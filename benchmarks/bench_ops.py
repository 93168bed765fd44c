"""Per-op cost on the XPU: a 1-element and a 1024-element float32 AddV2 issued as
`ops.add(a, b)`, `a + b` and `raw_ops.AddV2(x=a, y=b)`, against `torch.add` on the CPU (one
thread) and `np.add` in the same run.

    python benchmarks/bench_ops.py [--rounds 9] [--ops 5000] [--batches 3]

An XPU op is enqueued on the device's compute stream and runs asynchronously, so a sample
issues `--ops` ops back to back and then waits for the device: launch and execution are
both in the figure. The references run synchronously on the host. A sample is the fastest
of `--batches` batches; the rows take turns in each of `--rounds` rounds, and each row is
reported as its per-round ratio to `torch.add` (min / median / max). Goal (issue 14): every
XPU row at most 1.0x `torch.add`. PyTorch is optional (`pip install torch==2.13.0`, the CPU
build); without it the reference is `np.add`.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _ratios import print_table, rounds  # noqa: E402

import pluggable  # noqa: E402
from pluggable import ops, raw_ops  # noqa: E402


def sampler(batch, ops_per_batch: int, batches: int):
    def sample() -> float:
        import time

        best = float("inf")
        for _ in range(batches):
            started = time.perf_counter()
            batch()
            best = min(best, (time.perf_counter() - started) / ops_per_batch)
        return best
    return sample


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--ops", type=int, default=5000)
    parser.add_argument("--batches", type=int, default=3)
    args = parser.parse_args()
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        torch = None
    device = pluggable.get_device("XPU:0")
    n = args.ops
    for size in (1, 1024):
        host = np.ones(size, np.float32)
        a = pluggable.tensor(host, device=device)
        b = pluggable.tensor(host, device=device)

        def xpu_ops_add():
            for _ in range(n):
                ops.add(a, b)
            device.synchronize()

        def xpu_operator():
            for _ in range(n):
                a + b
            device.synchronize()

        def xpu_raw_ops():
            for _ in range(n):
                raw_ops.AddV2(x=a, y=b)
            device.synchronize()

        def numpy_add():
            for _ in range(n):
                np.add(host, host)

        candidates = {}
        if torch is not None:
            t = torch.ones(size)

            def torch_add():
                for _ in range(n):
                    torch.add(t, t)

            candidates["torch.add (CPU, 1 thread)"] = sampler(torch_add, n, args.batches)
        candidates["np.add"] = sampler(numpy_add, n, args.batches)
        candidates["ops.add(a, b) on XPU:0"] = sampler(xpu_ops_add, n, args.batches)
        candidates["a + b on XPU:0"] = sampler(xpu_operator, n, args.batches)
        candidates["raw_ops.AddV2(x=a, y=b) on XPU:0"] = sampler(xpu_raw_ops, n, args.batches)
        samples = rounds(candidates, args.rounds)
        reference = next(iter(candidates))
        print_table(f"AddV2 of {size} float32 element(s), per op", samples, reference, "µs",
                    1e6, goal=1.0, goal_rows=[k for k in candidates if "XPU" in k])


if __name__ == "__main__":
    main()
