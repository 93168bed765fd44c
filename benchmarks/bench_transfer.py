"""Host <-> device throughput of tensors: `pluggable.tensor(array, device=xpu)` and
`Tensor.numpy()` on 64 MiB, against `np.copyto` of the same size measured in the same run.

    python benchmarks/bench_transfer.py [--mib 64] [--repeats 30]

`np.copyto` writes into an array that is already allocated and touched; `np.array(copy)`
(also shown) allocates a fresh array each time, as `numpy()` must. Each figure is the median
of the repeats, after a warm-up that lets the device allocator reuse its memory.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import pluggable


def measure(fn, repeats: int) -> float:
    fn()  # warm-up
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    nbytes = args.mib << 20
    source = np.random.default_rng(0).integers(0, 255, nbytes, dtype=np.uint8)
    target = np.empty_like(source)
    target[:] = 1
    device = pluggable.get_device("XPU:0")
    on_device = pluggable.tensor(source, device=device)

    rows = [
        ("np.copyto (reference)", measure(lambda: np.copyto(target, source), args.repeats)),
        ("np.array(copy=True)", measure(lambda: np.array(source, copy=True), args.repeats)),
        ("pluggable.tensor(array, device=XPU:0)",
         measure(lambda: pluggable.tensor(source, device=device), args.repeats)),
        ("Tensor.numpy() from XPU:0", measure(on_device.numpy, args.repeats)),
    ]
    reference = rows[0][1]
    print(f"{args.mib} MiB, median of {args.repeats}")
    print(f"{'operation':<40} {'time':>9} {'GB/s':>7} {'vs copyto':>10}")
    for name, seconds in rows:
        print(f"{name:<40} {seconds * 1e3:7.2f}ms {nbytes / seconds / 1e9:7.2f} "
              f"{reference / seconds:9.0%}")


if __name__ == "__main__":
    main()
