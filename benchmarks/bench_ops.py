"""Per-op cost on the XPU: AddV2 on 1 and 1024 float32 elements, against `np.add` and
`torch.add` (CPU) in the same run; MatMul 1024x1024 float32 on the XPU against NumPy.

    python benchmarks/bench_ops.py [--batches 30] [--ops 2000]

An XPU op is enqueued on the device's compute stream and runs asynchronously, so a batch
issues `--ops` ops back to back and then waits for the device: the figure is the batch time
divided by the number of ops, launch and execution included. The reference ops run
synchronously on the host. PyTorch is optional (`pip install torch==2.13.0`, the CPU build).
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import pluggable
from pluggable import ops


def per_op(run_batch, ops_per_batch: int, batches: int) -> float:
    run_batch()  # warm-up: kernels instantiated, memory pooled
    samples = []
    for _ in range(batches):
        started = time.perf_counter()
        run_batch()
        samples.append((time.perf_counter() - started) / ops_per_batch)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--ops", type=int, default=2000)
    args = parser.parse_args()
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        torch = None
    device = pluggable.get_device("XPU:0")
    rows = []
    for size in (1, 1024):
        host = np.ones(size, np.float32)
        x = pluggable.tensor(host, device=device)

        def xpu_batch():
            for _ in range(args.ops):
                y = ops.add(x, x)
            device.synchronize()
            return y

        def numpy_batch():
            for _ in range(args.ops):
                np.add(host, host)

        rows.append((f"AddV2, {size} element(s), XPU:0", per_op(xpu_batch, args.ops, args.batches)))
        rows.append((f"np.add, {size} element(s)", per_op(numpy_batch, args.ops, args.batches)))
        if torch is not None:
            t = torch.ones(size)

            def torch_batch():
                for _ in range(args.ops):
                    torch.add(t, t)

            rows.append((f"torch.add, {size} element(s)", per_op(torch_batch, args.ops,
                                                                args.batches)))
    a = np.random.default_rng(0).standard_normal((1024, 1024)).astype(np.float32)
    b = np.random.default_rng(1).standard_normal((1024, 1024)).astype(np.float32)
    xa, xb = pluggable.tensor(a, device=device), pluggable.tensor(b, device=device)

    def xpu_matmul():
        ops.matmul(xa, xb)
        device.synchronize()

    matmul_rows = [("MatMul 1024x1024 float32, XPU:0", per_op(xpu_matmul, 1, 10)),
                   ("np.matmul 1024x1024 float32", per_op(lambda: np.matmul(a, b), 1, 10))]
    print(f"{'operation':<40} {'median':>12}")
    for name, seconds in rows:
        print(f"{name:<40} {seconds * 1e6:9.2f} µs")
    for name, seconds in matmul_rows:
        print(f"{name:<40} {seconds * 1e3:9.2f} ms")
    print(f"MatMul XPU / NumPy: {matmul_rows[0][1] / matmul_rows[1][1]:.2f}x")


if __name__ == "__main__":
    main()
