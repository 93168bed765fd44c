"""The front end's costs: the per-op fast path (AddV2 on the XPU, 1 element) in this tree
and, when ``--before`` names another source tree (e.g. an export of the previous commit), in
that one, measured in alternating child processes of the same run; indexing a tensor (one
StridedSlice) against one AddV2 on the same device; and a remembered run with constant host
inputs (Sum over a fixed axis), the path indexing takes on a device with a StridedSlice
kernel.

    python benchmarks/bench_frontend.py [--before /tmp/old/src] [--rounds 5] [--batches 20]
                                        [--ops 2000] [--write]

Each round runs a child process (with ``--before``, one on that tree first); a child's
figure is the median over ``--batches`` batches of ``--ops`` ops issued back to back and
then waited for, divided by the number of ops. The tables give each figure's median over
the rounds and its per-round ratio to AddV2 on the same device (with ``--before``, this
tree's AddV2 to the other tree's), min / median / max.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _ratios import Report, add_write_flag  # noqa: E402
CHILD = r"""
import json, sys, warnings
import numpy as np
import pluggable
from pluggable import ops

ops_per_batch, batches, what = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
sys.path.insert(0, sys.argv[4])  # this benchmarks directory
from _ratios import per_op as batch_median
from pluggable.kernels.registry import registered_kernels

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
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # the XPU may lack StridedSlice: soft placement
        results["t[1:, 3] of 32x32, XPU:0"] = per_op(index)
    results["facts"] = {
        "xpu_strided_slice": bool(registered_kernels("StridedSlice", "XPU")),
        "soft_placements": len(caught)}
    # The path indexing takes on a device with a StridedSlice kernel (the XPU may not have
    # one yet): a remembered run with constant host inputs, here Sum over axis 1.
    from pluggable.eager.dispatch import execute_with_constants

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
                         env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"the child process on {src} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


XPU_ADD, CPU_ADD = "AddV2, 1 element, XPU:0", "AddV2, 1 element, CPU"
NOTE = """On a plugin device a repeated index takes `dispatch.execute_with_constants`: its
first run leaves a plan whose host inputs (begin, end, strides) are constants in the kernel
request, so a repeated index costs one prepared kernel run, like a repeated AddV2; the
planned Sum measures that path with another op. On the CPU a repeated index reuses its
NumPy index."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", help="the src directory of the tree to compare with")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--ops", type=int, default=2000)
    add_write_flag(parser)
    args = parser.parse_args()
    report = Report(__file__, "Front end: indexing and remembered runs against AddV2", NOTE,
                    uses=("numpy",))
    here = os.path.join(os.path.dirname(HERE), "src")
    samples: dict = {}
    facts = {}
    for _ in range(args.rounds):
        if args.before:
            for name, value in run_child(args.before, "add", args).items():
                samples.setdefault(f"{name} (before)", []).append(value)
        results = run_child(here, "all", args)
        facts = results.pop("facts")
        for name, value in results.items():
            samples.setdefault(name, []).append(value)
    unit = f"{args.rounds} rounds of {args.batches} x {args.ops} ops, per op"
    report.table(f"XPU:0, {unit}",
                 {name: samples[name] for name in (XPU_ADD, "t[1:, 3] of 32x32, XPU:0",
                                                   "Sum, constant axis (planned), XPU:0")},
                 XPU_ADD, "µs", 1e6)
    placed = (f"was soft-placed on the CPU {facts['soft_placements']} times"
              if facts["soft_placements"] else "ran there (no soft placement on the CPU)")
    report.text(f"The XPU {'has a' if facts['xpu_strided_slice'] else 'has no'} "
                f"StridedSlice kernel; indexing on XPU:0 {placed}.")
    report.table(f"CPU, {unit}",
                 {name: samples[name] for name in (CPU_ADD, "t[1:, 3] of 32x32, CPU")},
                 CPU_ADD, "µs", 1e6)
    if args.before:
        report.table(f"AddV2 on XPU:0, this tree against {args.before}, {unit}",
                     {f"{XPU_ADD} (before)": samples[f"{XPU_ADD} (before)"],
                      XPU_ADD: samples[XPU_ADD]}, f"{XPU_ADD} (before)", "µs", 1e6)
    report.finish(args.write)


if __name__ == "__main__":
    main()
