"""What a gradient tape costs an op on the XPU: AddV2, Relu, a reduction with an axis and a
MatMul of 8 x 8 float32, issued with no tape, inside a tape that does not see the op's
inputs, and inside a tape that records it (its input watched); then one gradient of a small
MLP's loss on XPU:0.

    python benchmarks/bench_tape.py [--rounds 15] [--ops 2000] [--write]

A sample is the CPU time of the issuing thread per op (time.thread_time) over `--ops` ops:
the tape's cost is host work, and on this shared machine CPU time moves far less with the
load than wall time (the device's own work runs on its stream threads either way). The
three rows of an op take turns in each of `--rounds` rounds and are reported as their
per-round ratio to the op without a tape. Goal: recording at most 1.5x the op without one.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _ratios import Report, add_write_flag, rounds  # noqa: E402

import pluggable  # noqa: E402
from pluggable import ops, raw_ops  # noqa: E402

NOTE = """With no tape recording anywhere, the compiled per-op path holds no recorder and an
op pays that one test. While a tape records, an op run from its remembered plan is run and
recorded in C (`_compiled/taperec.c`); the others go through the Python recorder. A tape that
does not see an op's inputs still costs the op the check of its table."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--ops", type=int, default=2000)
    add_write_flag(parser)
    args = parser.parse_args()
    report = Report(__file__, "Gradient tape cost on the XPU", NOTE, uses=("numpy",))
    with pluggable.device("/xpu:0"):
        a = pluggable.constant(np.ones((8, 8), np.float32))
        b = pluggable.constant(np.ones((8, 8), np.float32))
        cases = {"AddV2 (a + b)": lambda: a + b, "Relu": lambda: ops.relu(a),
                 "Sum(axis=0)": lambda: ops.reduce_sum(a, axis=0),
                 "MatMul": lambda: ops.matmul(a, b)}
        worst = 0.0
        for name, op in cases.items():
            op()

            def timed(mode, op=op):
                def sample():
                    started = time.thread_time()
                    if mode == "none":
                        for _ in range(args.ops):
                            op()
                    else:
                        for _ in range(args.ops // 100):  # a tape per 100 ops, as a step
                            with pluggable.GradientTape() as tape:
                                if mode == "record":
                                    tape.watch(a)
                                for _ in range(100):
                                    op()
                    return (time.thread_time() - started) / args.ops
                return sample

            samples = rounds({"no tape": timed("none"),
                              "a tape, inputs not watched": timed("idle"),
                              "recorded": timed("record")}, args.rounds)
            found = report.table(f"{name}, 8 x 8 float32, CPU time per op", samples,
                                 "no tape", "µs", 1e6, goal=1.5, goal_rows=["recorded"])
            worst = max(worst, found)
        report.text(f"Worst median ratio of a recorded op: {worst:.2f}.")

        rng = np.random.default_rng(0)
        x = pluggable.constant(rng.normal(size=(32, 16)).astype(np.float32))
        labels = rng.integers(0, 4, 32).astype(np.int64)
        w1 = pluggable.Variable(rng.normal(size=(16, 32)).astype(np.float32))
        b1 = pluggable.Variable(np.zeros(32, np.float32))
        w2 = pluggable.Variable(rng.normal(size=(32, 4)).astype(np.float32))
        b2 = pluggable.Variable(np.zeros(4, np.float32))

        def forward():
            hidden = ops.relu(ops.bias_add(ops.matmul(x, w1), b1))
            logits = ops.bias_add(ops.matmul(hidden, w2), b2)
            return ops.reduce_mean(raw_ops.SparseSoftmaxCrossEntropyWithLogits(
                features=logits, labels=labels)[0])

        def step_sample(gradient: bool):
            def sample():
                started = time.perf_counter()
                for _ in range(20):
                    if gradient:
                        with pluggable.GradientTape() as tape:
                            loss = forward()
                        grads = tape.gradient(loss, [w1, b1, w2, b2])
                        grads[0].numpy()
                    else:
                        forward().numpy()
                return (time.perf_counter() - started) / 20
            return sample

        step_sample(True)()
        samples = rounds({"forward only": step_sample(False),
                          "forward on a tape + gradient": step_sample(True)}, args.rounds)
        report.table("MLP 16-32-4, batch 32, float32 on XPU:0, wall time per step", samples,
                     "forward only", "µs", 1e6)
    report.finish(args.write)


if __name__ == "__main__":
    main()
