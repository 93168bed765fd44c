"""Per-call cost of variable updates: ``Variable.assign_add`` and
``raw_ops.ResourceApplyGradientDescent`` on XPU:0 (the XPU's kernels through
kernels_experimental.h), against ``ops.add`` of the same tensors on XPU:0 (an op on the fast
path) measured in the same run, and ``assign_add`` through the host's own kernel (the XPU's
disabled: read after the stream, NumPy, write back); 1 and 2^16 float32 elements.

    python benchmarks/bench_variables.py [--batches 20] [--ops 500] [--write]

A batch issues `--ops` calls back to back, then waits for the device; a sample is the batch
time divided by the calls (launch and execution). The rows take turns in each of
`--batches` rounds, and each is reported as its per-round ratio to `ops.add`, min / median /
max.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _ratios import Report, add_write_flag, rounds, time_per_call  # noqa: E402

import pluggable  # noqa: E402
from pluggable import ops, raw_ops  # noqa: E402
from pluggable.kernels.registry import registered_kernels  # noqa: E402

NOTE = """A repeated variable op is a run dispatch remembered (docs/design.md, remembered
plans): it checks that each variable is alive, has the shape it had and an intact value,
then runs the kernel's plan, which locks the variable; no plan keys such an op, because the
variable is named by a handle read on the host. The host's own kernel, used where a device
registers none, waits for the device at every call (read after the compute stream, NumPy,
write back)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--ops", type=int, default=500)
    add_write_flag(parser)
    args = parser.parse_args()
    report = Report(__file__, "Variable updates on the XPU", NOTE, uses=("numpy",))
    device = pluggable.get_device("XPU:0")
    alpha = pluggable.tensor(np.float32(0.01), device=device)  # no upload per call
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

            samples = rounds(
                {name: (lambda batch=batch: time_per_call(batch, 1) / args.ops)
                 for name, batch in (("ops.add (fast path)", add_batch),
                                     ("Variable.assign_add (XPU kernel)", assign_add_batch),
                                     ("ResourceApplyGradientDescent (XPU kernel)", sgd_batch),
                                     ("Variable.assign_add, host kernel", host_kernel_batch))},
                args.batches)
        report.table(f"{size} float32 element(s) on XPU:0, {args.batches} rounds of "
                     f"{args.ops} calls, per call", samples, "ops.add (fast path)", "µs", 1e6)
    report.finish(args.write)


if __name__ == "__main__":
    main()
