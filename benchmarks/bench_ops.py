"""Per-op cost on the XPU: a 1-element and a 1024-element float32 AddV2 issued as
`ops.add(a, b)`, `a + b` and `raw_ops.AddV2(x=a, y=b)`, against `torch.add` on the CPU (one
thread) and `np.add` in the same run; then a 4 x 4 MatMul as `ops.matmul`, `a @ b` and
`raw_ops.MatMul`, against `torch.matmul` and `np.matmul`; then ops given attributes or host
values (a reduction's axis, a reshape's shape), against `torch.sum` and `np.sum`.

    python benchmarks/bench_ops.py [--rounds 9] [--ops 5000] [--batches 3] [--write]

An XPU op is enqueued on the device's compute stream and runs asynchronously, so a sample
issues `--ops` ops back to back and then waits for the device: launch and execution are
both in the figure. The references run synchronously on the host. A sample is the fastest
of `--batches` batches; the rows take turns in each of `--rounds` rounds, and each row is
reported as its per-round ratio to `torch.add` (min / median / max). Goals: every XPU row of
a 1-element AddV2 at most 0.5x `torch.add` (about twice NumPy's 1-element add), of a
1024-element one at most 1.0x (MatMul and the ops with attributes have no goal of their
own). PyTorch is optional (`pip install torch==2.13.0`, the CPU build); without it the
reference is `np.add`. `--write` puts the tables in BENCHMARKS.md.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _ratios import Report, add_write_flag, rounds  # noqa: E402

import pluggable  # noqa: E402
from pluggable import ops, raw_ops  # noqa: E402


NOTE = """A sample issues the op thousands of times back to back and then waits for the
device (launch and execution included); the reference, PyTorch on the CPU with one thread,
runs synchronously on the host. Small XPU operations on an idle stream run on the calling
thread (`XPU_INLINE_BYTES`), so a repeated op is one call into `pluggable._compiled` running a
remembered plan."""


def sampler(expression: str, names: dict, ops_per_batch: int, batches: int, wait=None):
    """Seconds per op of `expression` (Python source, run on `names`) issued `ops_per_batch`
    times in a loop compiled around it, as a user's code would be, then `wait()` (the XPU's
    device synchronize); the fastest of `batches` batches."""
    namespace = dict(names)
    exec(f"def batch():\n    for _ in range({ops_per_batch}):\n        {expression}\n",
         namespace)
    batch = namespace["batch"]

    def sample() -> float:
        import time

        best = float("inf")
        for _ in range(batches):
            started = time.perf_counter()
            batch()
            if wait is not None:
                wait()
            best = min(best, (time.perf_counter() - started) / ops_per_batch)
        return best
    return sample


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--ops", type=int, default=5000)
    parser.add_argument("--batches", type=int, default=3)
    add_write_flag(parser)
    args = parser.parse_args()
    report = Report(__file__, "Per-op cost on the XPU", NOTE, uses=("numpy", "torch"))
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        torch = None
    device = pluggable.get_device("XPU:0")

    def table(title, host, torch_expression, numpy_expression, xpu_rows, goal=None):
        """One table: the torch (when installed) and NumPy expressions on `t` and `host`,
        then each XPU row's expression on two XPU tensors `a` and `b` holding `host`."""
        names = {"np": np, "torch": torch, "ops": ops, "raw_ops": raw_ops, "host": host,
                 "pluggable": pluggable, "a": pluggable.tensor(host, device=device),
                 "b": pluggable.tensor(host, device=device)}
        candidates = {}
        if torch is not None:
            names["t"] = torch.from_numpy(host.copy())
            candidates[f"{torch_expression} (CPU, 1 thread)"] = sampler(
                torch_expression, names, args.ops, args.batches)
        candidates[numpy_expression] = sampler(numpy_expression, names, args.ops, args.batches)
        for expression in xpu_rows:
            candidates[f"{expression} on XPU:0"] = sampler(expression, names, args.ops,
                                                           args.batches, device.synchronize)
        samples = rounds(candidates, args.rounds)
        report.table(title, samples, next(iter(candidates)), "µs", 1e6, goal=goal,
                     goal_rows=[k for k in candidates if "XPU" in k], goal_label="every XPU row")

    for size in (1, 1024):
        table(f"AddV2 of {size} float32 element(s), per op", np.ones(size, np.float32),
              "torch.add(t, t)", "np.add(host, host)",
              ["ops.add(a, b)", "a + b", "raw_ops.AddV2(x=a, y=b)"],
              goal=0.5 if size == 1 else 1.0)
    square = np.ones((4, 4), np.float32)
    table("MatMul of two 4 x 4 float32 matrices, per op", square, "torch.matmul(t, t)",
          "np.matmul(host, host)", ["ops.matmul(a, b)", "a @ b", "raw_ops.MatMul(a=a, b=b)",
                                    "ops.matmul(a, b, transpose_b=True)"])
    table("Ops with attributes or host values on a 4 x 4 float32 matrix, per op", square,
          "torch.sum(t, 0)", "np.sum(host, 0)",
          ["ops.reduce_sum(a, axis=0)", "ops.transpose(a)", "ops.reshape(a, [16])",
           "ops.cast(a, pluggable.int32)"])
    report.finish(args.write)


if __name__ == "__main__":
    main()
