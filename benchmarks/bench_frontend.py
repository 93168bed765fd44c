"""The front end's costs: the per-op fast path (AddV2 on the XPU, 1 element) in this tree
and, when ``--before`` names another source tree (e.g. an export of the previous commit), in
that one, measured in alternating child processes of the same run; indexing a tensor (one
StridedSlice) against one AddV2 on the same device; and a remembered run with constant host
inputs (Sum over a fixed axis), the path indexing takes on a device with a StridedSlice
kernel.

    python benchmarks/bench_frontend.py [--before /tmp/old/src] [--rounds 5] [--ops 2000]

Each figure is a median over batches of ``--ops`` ops issued back to back and then waited
for, divided by the number of ops (as benchmarks/bench_ops.py measures). Ratios compare
figures of the same run only.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = r"""
import json, sys, warnings
import numpy as np
import pluggable
from pluggable import ops

ops_per_batch, batches, what = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
sys.path.insert(0, sys.argv[4])  # this benchmarks directory
from _ratios import per_op as batch_median

device = pluggable.get_device("XPU:0")


def per_op(run_batch):
    return batch_median(run_batch, ops_per_batch, batches)


def on(where, size):
    x = pluggable.tensor(np.ones(size, np.float32), device=where)
    matrix = pluggable.tensor(np.ones((32, 32), np.float32), device=where)

    def add():
        for _ in range(ops_per_batch):
            y = ops.add(x, x)
        if where != "CPU":
            device.synchronize()
        return y

    def index():
        for _ in range(ops_per_batch):
            y = matrix[1:, 3]
        if where != "CPU":
            device.synchronize()
        return y

    return add, index


results = {}
add, index = on("XPU:0", 1)
results["AddV2, 1 element, XPU:0"] = per_op(add)
if what == "all":
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the XPU may lack StridedSlice: soft placement
        results["t[1:, 3] of 32x32, XPU:0"] = per_op(index)
    # The path indexing takes on a device with a StridedSlice kernel (the XPU may not have
    # one yet): a remembered run with constant host inputs, here Sum over axis 1.
    from pluggable.dispatch import execute_with_constants

    x = pluggable.tensor(np.ones((32, 32), np.float32), device="XPU:0")
    axis = np.array([1], np.int32)
    key = ("bench-Sum", None, x.dtype.code, x.shape, x._device, (1,))

    def planned_sum():
        for _ in range(ops_per_batch):
            y = execute_with_constants(key, "Sum", [x, axis], {"keep_dims": False})
        device.synchronize()
        return y

    results["Sum, constant axis (planned), XPU:0"] = per_op(planned_sum)
    add, index = on("CPU", 1)
    results["AddV2, 1 element, CPU"] = per_op(add)
    results["t[1:, 3] of 32x32, CPU"] = per_op(index)
print(json.dumps(results))
"""


def run_child(src: str, what: str, args) -> dict:
    env = dict(os.environ, PYTHONPATH=src)
    out = subprocess.run([sys.executable, "-c", CHILD, str(args.ops), str(args.batches), what,
                          HERE],
                         env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", help="the src directory of the tree to compare with")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--ops", type=int, default=2000)
    args = parser.parse_args()
    here = os.path.join(os.path.dirname(HERE), "src")
    samples: dict = {}
    for _ in range(args.rounds):
        if args.before:
            for name, value in run_child(args.before, "add", args).items():
                samples.setdefault(f"{name} (before)", []).append(value)
        for name, value in run_child(here, "all", args).items():
            samples.setdefault(name, []).append(value)
    print(f"{'operation':<42} {'median of rounds':>18}")
    medians = {name: statistics.median(values) for name, values in samples.items()}
    for name, value in medians.items():
        print(f"{name:<42} {value * 1e6:15.2f} µs")
    add = medians["AddV2, 1 element, XPU:0"]
    if args.before:
        print(f"AddV2 on the XPU, this tree / before: "
              f"{add / medians['AddV2, 1 element, XPU:0 (before)']:.2f}x")
    print(f"indexing / AddV2 on the XPU: {medians['t[1:, 3] of 32x32, XPU:0'] / add:.2f}x")
    print(f"planned Sum with a constant axis / AddV2 on the XPU: "
          f"{medians['Sum, constant axis (planned), XPU:0'] / add:.2f}x")
    print(f"indexing / AddV2 on the CPU: "
          f"{medians['t[1:, 3] of 32x32, CPU'] / medians['AddV2, 1 element, CPU']:.2f}x")


if __name__ == "__main__":
    main()
