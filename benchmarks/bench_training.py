"""The kernels of a training step on the XPU against the CPU device's NumPy reference kernels
of the same ops, in the same run: convolution gradients, max pooling and its gradient, the
sparse cross entropy, ConcatV2, GatherV2 and an Adam step on a variable.

    python benchmarks/bench_training.py [--repeats 5] [--write]

Each XPU sample is the time of one op, enqueued and waited for (device.synchronize()); each
CPU sample the time of the same op through pluggable on the CPU device, right after it (the
two alternate, `--repeats` rounds). The table gives the median times and the per-round
ratio XPU time / CPU time, min / median / max (below 1: the XPU kernel is faster than
NumPy).
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _ratios import Report, add_write_flag, rounds, time_per_call  # noqa: E402

import pluggable  # noqa: E402
from pluggable.eager import dispatch  # noqa: E402

NOTE = """The convolution gradients run as GEMMs over the im2col matrix on the XPU's blocked
GEMM; the element-wise and copy kernels (pooling, the cross entropy, gather, concat) are
plain loops, and at these sizes much of their time is the op's launch and the wait for the
stream."""


def paired(xpu_run, cpu_run, repeats: int):
    """(XPU samples, CPU samples), one of each per round, after a warm-up of each."""
    samples = rounds({"xpu": lambda: time_per_call(xpu_run, 1),
                      "cpu": lambda: time_per_call(cpu_run, 1)}, repeats)
    return samples["xpu"], samples["cpu"]


def cases(rng):
    f32 = np.float32
    x = rng.standard_normal((8, 32, 32, 16)).astype(f32)
    w = rng.standard_normal((3, 3, 16, 32)).astype(f32)
    conv = dict(strides=[1, 1, 1, 1], padding="SAME")
    dy = rng.standard_normal((8, 32, 32, 32)).astype(f32)
    pool = dict(ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID")
    with pluggable.device("CPU"):
        (pooled,) = dispatch.execute("MaxPool", [x], pool)
    logits = rng.standard_normal((256, 1000)).astype(f32)
    labels = rng.integers(0, 1000, 256)
    parts = [rng.standard_normal((256, 1024)).astype(f32) for _ in range(4)]
    table = rng.standard_normal((10000, 64)).astype(f32)
    index = rng.integers(0, 10000, 4096)
    return [
        ("Conv2DBackpropInput 8x32x32x16, 3x3x16x32", "Conv2DBackpropInput",
         [np.array(x.shape, np.int32), w, dy], conv),
        ("Conv2DBackpropFilter 8x32x32x16, 3x3x16x32", "Conv2DBackpropFilter",
         [x, np.array(w.shape, np.int32), dy], conv),
        ("MaxPool 2x2 of 8x32x32x16", "MaxPool", [x], pool),
        ("MaxPoolGrad 2x2 of 8x32x32x16", "MaxPoolGrad", [x, pooled.numpy(), pooled.numpy()],
         pool),
        ("SparseSoftmaxCrossEntropyWithLogits 256x1000", "SparseSoftmaxCrossEntropyWithLogits",
         [logits, labels], None),
        ("ConcatV2 4 x 256x1024 on axis 1", "ConcatV2", [parts, np.int32(1)], None),
        ("GatherV2 4096 rows of 10000x64", "GatherV2", [table, index, np.int32(0)], None),
    ]


def on(device: str, value):
    if isinstance(value, list):
        return [pluggable.tensor(v, device=device) for v in value]
    return pluggable.tensor(value, device=device)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    add_write_flag(parser)
    args = parser.parse_args()
    report = Report(__file__, "Training-step kernels: XPU against the CPU device's NumPy "
                    "kernels", NOTE, uses=("numpy",))
    device = pluggable.get_device("XPU:0")
    rows = []
    for title, op, inputs, attrs in cases(np.random.default_rng(0)):
        xpu_inputs = [on("xpu:0", v) for v in inputs]
        cpu_inputs = [on("CPU", v) for v in inputs]

        def xpu_run():
            with pluggable.device("xpu:0"):
                dispatch.execute(op, xpu_inputs, attrs)
            device.synchronize()

        def cpu_run():
            with pluggable.device("CPU"):
                dispatch.execute(op, cpu_inputs, attrs)

        rows.append((title, *paired(xpu_run, cpu_run, args.repeats)))
    size = 1 << 20
    with pluggable.device("xpu:0"):
        var, m, v = (pluggable.Variable(np.zeros(size, np.float32)) for _ in range(3))
    with pluggable.device("CPU"):
        cvar, cm, cv = (pluggable.Variable(np.zeros(size, np.float32)) for _ in range(3))
    grad = np.ones(size, np.float32)
    scalars = [np.float32(s) for s in (0.9, 0.999, 0.001, 0.9, 0.999, 1e-7)]
    xg, cg = on("xpu:0", grad), on("CPU", grad)

    def adam_xpu():
        with pluggable.device("xpu:0"):
            dispatch.execute("ResourceApplyAdam", [var, m, v, *scalars, xg])
        device.synchronize()

    def adam_cpu():
        with pluggable.device("CPU"):
            dispatch.execute("ResourceApplyAdam", [cvar, cm, cv, *scalars, cg])

    rows.append(("ResourceApplyAdam, 2^20 float32", *paired(adam_xpu, adam_cpu, args.repeats)))
    report.pairs(f"One op, float32, {args.repeats} rounds", rows, "XPU:0", "CPU (NumPy)",
                 "ms", 1e3)
    report.finish(args.write)


if __name__ == "__main__":
    main()
