"""XPU kernels against NumPy (and PyTorch's CPU kernels when installed), in the same run:
AddV2, Mul and a whole-array Sum on 10^5..10^7 float32 elements, MatMul on 128..2048 square
float32 matrices, and Conv2D 3x3 on a batch of 16 images of 32x32x64 against PyTorch.

    python benchmarks/bench_kernels.py [--rounds 7] [--quick] [--write]
    python benchmarks/bench_kernels.py --grain [--rounds 5]

A sample issues the op `repeat` times in a row (about 2*10^7 elements' or 2*10^9
multiply-adds' worth) and, on XPU:0, then waits for the device: the figure is the sample's
time per op, launch, execution and the final wait included, as a stream of ops on a device
runs. The references run synchronously on the host: `np.add` / `np.multiply` into a touched
array (the XPU's output comes from its warm allocator, so NumPy gets no page faults either),
`np.sum`, and `np.matmul` (OpenBLAS, its own threads, as many as the XPU's); the torch rows
use PyTorch's default intra-op threads (as many as the cores, like the XPU), and PyTorch's
convolution is the reference for Conv2D. Rounds interleave the candidates; the figure is the
per-round ratio candidate / reference, min / median / max. Goal: every XPU row <= 1.0x its
reference at every size. Each sample starts once no thread of the process is using the CPU
any more (settle: OpenBLAS's idle threads spin for ~50 ms after each call).

`--grain` measures where splitting element-wise work across the helper threads starts to
pay: child processes with XPU_KERNEL_THREADS=1 and with all CPUs and XPU_ELEMENTWISE_SPLIT=0
(every output of 2 x 32768 elements or more split into tasks of 32768) alternate, each timing
a stream of AddV2 at sizes 2^16..2^24, and the ratio split / one-thread per size is printed
(below 1: splitting helps). The plugin's default XPU_ELEMENTWISE_SPLIT (xpu_internal.h) is
set from these figures. `--write` records the main run only, not `--grain`.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _ratios import Report, add_write_flag, load, ratio_stats, rounds  # noqa: E402

import pluggable  # noqa: E402
from pluggable import ops  # noqa: E402


TITLE = "XPU kernels against NumPy and PyTorch: element-wise, Sum, MatMul, Conv2D"
GOAL = 1.0

NOTE = """A sample is a stream of ops and, on XPU:0, one wait for the device; NumPy
(OpenBLAS for MatMul) and PyTorch run synchronously on the host with their own threads, as
many as the XPU's kernel threads (the cores). Conv2D's reference is PyTorch's convolution in
its default layout (NCHW; the XPU's input is the same images in NHWC). Every sample starts
once no thread of the process uses the CPU, since OpenBLAS's idle threads spin for about
50 ms after a call and would take a core from the next sample. `--grain` (printed only)
measures where splitting element-wise kernels across threads pays."""


def settle(limit: float = 0.5) -> None:
    """Waits until no other thread of this process uses the CPU (at most `limit` seconds).

    OpenBLAS's threads spin for about 50 ms of CPU after each call before they sleep (PyTorch's
    OpenMP threads do the same); a sample taken right after one would share the cores with
    the previous candidate's spinning threads (with a 1024² MatMul of ~15 ms, a whole core of
    the two). Every sample therefore starts once the process is quiet."""
    # The kernel accounts other threads' CPU time in ticks of a few ms: windows of 20 ms,
    # two in a row without a tick.
    deadline, quiet = time.perf_counter() + limit, 0
    while time.perf_counter() < deadline and quiet < 2:
        cpu = time.process_time()
        time.sleep(0.02)
        quiet = quiet + 1 if time.process_time() - cpu < 0.002 else 0


def timed(fn, repeat: int, wait=None):
    """A sampler: seconds per call of `fn` over `repeat` calls in a row, then `wait()`; it
    starts once the process is quiet (settle)."""
    def sample() -> float:
        settle()
        started = time.perf_counter()
        for _ in range(repeat):
            fn()
        if wait is not None:
            wait()
        return (time.perf_counter() - started) / repeat
    return sample


GRAIN_SIZES = [1 << p for p in range(16, 25)]


def grain_child() -> None:
    """Prints the per-op time (µs) of a stream of AddV2 at each of GRAIN_SIZES, as JSON."""
    device = pluggable.get_device("XPU:0")
    out = []
    for n in GRAIN_SIZES:
        x = pluggable.tensor(np.ones(n, np.float32), device=device)
        stream = timed(lambda: ops.add(x, x), max(20, 2 * 10**7 // n), device.synchronize)
        stream()  # warm-up
        out.append(min(stream() for _ in range(5)) * 1e6)
    print(json.dumps(out))


def grain(rounds: int) -> None:
    results = {"1": [], "all": []}
    for _ in range(rounds):
        for threads in results:
            env = dict(os.environ)
            env.pop("XPU_KERNEL_THREADS", None)
            env.pop("XPU_ELEMENTWISE_SPLIT", None)
            if threads == "1":
                env["XPU_KERNEL_THREADS"] = "1"
            else:
                env["XPU_ELEMENTWISE_SPLIT"] = "0"
            child = subprocess.run([sys.executable, __file__, "--grain-child"], env=env,
                                   capture_output=True, text=True, check=True)
            results[threads].append(json.loads(child.stdout.splitlines()[-1]))
    print(f"add on XPU:0, split across all threads / XPU_KERNEL_THREADS=1, {rounds} rounds  "
          f"({load()})")
    for i, n in enumerate(GRAIN_SIZES):
        lo, mid, hi = ratio_stats([r[i] for r in results["all"]], [r[i] for r in results["1"]])
        print(f"  {n:>8} elements  {lo:6.2f} {mid:6.2f} {hi:6.2f}")
    print(f"  ({load()})")


def elementwise(report: Report, device, torch, rng, n: int, rounds_: int) -> None:
    """AddV2, Mul and a whole-array Sum of n float32: one table each, NumPy the reference."""
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    c = np.empty_like(a)
    xa, xb = pluggable.tensor(a, device=device), pluggable.tensor(b, device=device)
    ta = tb = tc = None
    if torch is not None:
        ta, tb, tc = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(c)
    repeat = max(3, 2 * 10**7 // n)
    cases = [
        ("AddV2", "np.add(a, b, out=c)", lambda: np.add(a, b, out=c), lambda: ops.add(xa, xb),
         "torch.add(out=)", lambda: torch.add(ta, tb, out=tc), a + b, 1e-6),
        ("Mul", "np.multiply(a, b, out=c)", lambda: np.multiply(a, b, out=c),
         lambda: ops.multiply(xa, xb), "torch.mul(out=)", lambda: torch.mul(ta, tb, out=tc),
         a * b, 1e-6),
        ("Sum", "np.sum(a)", lambda: np.sum(a), lambda: ops.reduce_sum(xa), "torch.sum",
         lambda: torch.sum(ta), np.sum(a, dtype=np.float64), 1e-4),
    ]
    for op, ref, ref_fn, xpu_fn, tname, torch_fn, expected, rtol in cases:
        samplers = {ref: timed(ref_fn, repeat),
                    f"{op} on XPU:0": timed(xpu_fn, repeat, device.synchronize)}
        if torch is not None:
            samplers[tname] = timed(torch_fn, repeat)
        np.testing.assert_allclose(xpu_fn().numpy(), expected, rtol=rtol, atol=rtol * 10)
        report.table(f"{op} of 10^{len(str(n)) - 1} float32, {rounds_} rounds, per op",
                     rounds(samplers, rounds_), ref, "µs", 1e6, goal=GOAL,
                     goal_rows=[f"{op} on XPU:0"])


def matmul(report: Report, device, torch, rng, n: int, rounds_: int) -> None:
    """MatMul of two n x n float32 matrices against np.matmul (OpenBLAS)."""
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    xa, xb = pluggable.tensor(a, device=device), pluggable.tensor(b, device=device)
    repeat = max(1, int(2e9 / n**3))
    samplers = {"np.matmul": timed(lambda: np.matmul(a, b), repeat),
                "MatMul on XPU:0": timed(lambda: ops.matmul(xa, xb), repeat,
                                         device.synchronize)}
    if torch is not None:
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        samplers["torch.matmul"] = timed(lambda: torch.matmul(ta, tb), repeat)
    np.testing.assert_allclose(ops.matmul(xa, xb).numpy(), a @ b, rtol=2e-3, atol=2e-3)
    report.table(f"MatMul {n}x{n} float32, {rounds_} rounds, per op",
                 rounds(samplers, rounds_), "np.matmul", "ms", 1e3, goal=GOAL,
                 goal_rows=["MatMul on XPU:0"])


def conv2d(report: Report, device, torch, rng, rounds_: int) -> None:
    """Conv2D 3x3, SAME, 64 -> 64 channels on 16 images of 32x32x64, against PyTorch's CPU
    convolution (NCHW, its default layout; the same input and filter transposed)."""
    x = rng.standard_normal((16, 32, 32, 64)).astype(np.float32)
    w = (rng.standard_normal((3, 3, 64, 64)) / 24).astype(np.float32)
    xx, xw = pluggable.tensor(x, device=device), pluggable.tensor(w, device=device)
    tx = torch.from_numpy(np.ascontiguousarray(x.transpose(0, 3, 1, 2)))
    tw = torch.from_numpy(np.ascontiguousarray(w.transpose(3, 2, 0, 1)))
    conv = torch.nn.functional.conv2d
    repeat = 3
    samplers = {"torch conv2d (NCHW)": timed(lambda: conv(tx, tw, padding=1), repeat),
                "Conv2D on XPU:0 (NHWC)": timed(lambda: ops.conv2d(xx, xw, 1, "SAME"), repeat,
                                                device.synchronize)}
    expected = conv(tx, tw, padding=1).numpy().transpose(0, 2, 3, 1)
    np.testing.assert_allclose(ops.conv2d(xx, xw, 1, "SAME").numpy(), expected, rtol=2e-3,
                               atol=2e-3)
    report.table(f"Conv2D 3x3, 16x32x32x64 -> 64 channels, float32, {rounds_} rounds, per op",
                 rounds(samplers, rounds_), "torch conv2d (NCHW)", "ms", 1e3, goal=GOAL,
                 goal_rows=["Conv2D on XPU:0 (NHWC)"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="fewer sizes (1e5, 1e6; 256, 1024)")
    parser.add_argument("--grain", action="store_true", help="threads against one thread")
    parser.add_argument("--grain-child", action="store_true", help=argparse.SUPPRESS)
    add_write_flag(parser)
    args = parser.parse_args()
    if args.write and (args.grain or args.grain_child):
        parser.error("--write records the main run; --grain is printed only")
    if args.grain_child:
        grain_child()
        return
    if args.grain:
        grain(args.rounds)
        return
    try:
        import torch
    except ImportError:
        torch = None
    report = Report(__file__, TITLE, NOTE, uses=("numpy", "torch"))
    device = pluggable.get_device("XPU:0")
    rng = np.random.default_rng(0)

    for n in ((10**5, 10**6) if args.quick else (10**5, 10**6, 10**7)):
        elementwise(report, device, torch, rng, n, args.rounds)
    for n in ((128, 1024) if args.quick else (128, 256, 512, 1024, 2048)):
        matmul(report, device, torch, rng, n, args.rounds)
    if torch is not None:
        conv2d(report, device, torch, rng, args.rounds)
    else:
        report.text("Conv2D is measured against PyTorch's convolution, which is not installed "
                    "(pip install torch==2.13.0): no Conv2D table.")
    report.finish(args.write)


if __name__ == "__main__":
    main()
