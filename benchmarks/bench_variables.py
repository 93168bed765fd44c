"""Per-call cost of variable updates: ``Variable.assign_add`` and
``raw_ops.ResourceApplyGradientDescent`` on XPU:0 (the XPU's kernels through
kernels_experimental.h), against ``ops.add`` of the same tensors on XPU:0 (an op on the fast
path) measured in the same run, and ``assign_add`` through the host's own kernel (the XPU's
disabled: read after the stream, NumPy, write back); 1 and 2^16 float32 elements.

    python benchmarks/bench_variables.py [--batches 20] [--ops 500]

A batch issues `--ops` calls back to back, then waits for the device; the figure is the
batch time divided by the calls (launch and execution). Variable ops take the slow path of
dispatch every time (their resource input is read on the host to find the variable, and the
shape check needs the variable's current shape), which is what the ratio shows.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

import pluggable
from pluggable import ops, raw_ops
from pluggable.kernels import registered_kernels

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _ratios import per_op as per_call  # noqa: E402



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--ops", type=int, default=500)
    args = parser.parse_args()
    device = pluggable.get_device("XPU:0")
    alpha = pluggable.tensor(np.float32(0.01), device=device)  # no upload per call
    print(f"{'case':58s} {'per call':>10s} {'/ AddV2':>8s}")
    for size in (1, 1 << 16):
        with pluggable.device(device):
            x = pluggable.tensor(np.ones(size, np.float32), device=device)
            v = pluggable.Variable(np.zeros(size, np.float32))

            def add_batch():
                for _ in range(args.ops):
                    ops.add(x, x)
                device.synchronize()

            def assign_add_batch():
                for _ in range(args.ops):
                    v.assign_add(x)
                device.synchronize()

            def sgd_batch():
                for _ in range(args.ops):
                    raw_ops.ResourceApplyGradientDescent(var=v, alpha=alpha, delta=x)
                device.synchronize()

            def host_kernel_batch():
                xpu = registered_kernels("AssignAddVariableOp", "XPU")
                for r in xpu:
                    r.set_enabled(False)
                try:
                    assign_add_batch()
                finally:
                    for r in xpu:
                        r.set_enabled(True)

            reference = per_call(add_batch, args.ops, args.batches)
            for name, batch in (("ops.add (fast path)", add_batch),
                                ("Variable.assign_add", assign_add_batch),
                                ("ResourceApplyGradientDescent", sgd_batch),
                                ("Variable.assign_add, host kernel", host_kernel_batch)):
                t = reference if batch is add_batch else per_call(batch, args.ops, args.batches)
                print(f"{name + f', {size} element(s), XPU:0':58s} {t * 1e6:8.1f} us "
                      f"{t / reference:8.2f}")


if __name__ == "__main__":
    main()
