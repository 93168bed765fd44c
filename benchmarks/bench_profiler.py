"""What profiling costs: the per-op cost of small XPU ops with a session running against the
same ops without one, and the latency of `stop()` + save for a session of ~10 000 events.

    python benchmarks/bench_profiler.py [--batches 15] [--ops 10000]

Per-op cost: a batch issues `--ops` AddV2 ops on 1-element float32 tensors on XPU:0 and
waits for the device; batches with and without a session alternate (the session starts
before and stops after its batch, outside the timing), and the figure is the median batch
time per op, wall clock and the main thread's CPU time. The session uses the default `ProfilerOptions` (host tracer level 2, plugin
profilers on), so the XPU's own profiler records too when the plugin has one.

stop() + save: a session of ops sized to about 10 000 events (host plane and device planes
together), then `stop()` timed, saving the .xplane.pb; the reference measured in the same
run is protobuf's own work on the same profile (parse the saved bytes and serialize them
again).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

import pluggable
from pluggable import ops, profiler

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _ratios import load, ratio_stats  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=15)
    parser.add_argument("--ops", type=int, default=10000)
    args = parser.parse_args()
    device = pluggable.get_device("XPU:0")
    x = pluggable.tensor(np.ones(1, np.float32), device=device)
    logdir = tempfile.mkdtemp(prefix="bench_profiler_")

    def batch():
        """(wall seconds, main-thread CPU seconds) per op."""
        started, cpu = time.perf_counter(), time.thread_time()
        for _ in range(args.ops):
            y = ops.add(x, x)
        device.synchronize()
        del y
        return ((time.perf_counter() - started) / args.ops,
                (time.thread_time() - cpu) / args.ops)

    batch()  # warm-up: plans made, memory pooled
    profiler.start(None)
    batch()
    profiler.stop(save=False)
    off, on = [], []
    for _ in range(args.batches):
        off.append(batch())
        profiler.start(None)
        on.append(batch())
        profiler.stop(save=False)
    off_us, on_us = (statistics.median(s[0] for s in runs) * 1e6 for runs in (off, on))
    off_cpu, on_cpu = (statistics.median(s[1] for s in runs) * 1e6 for runs in (off, on))

    # stop() + save for ~10 000 events: measure how many events one op makes first.
    profiler.start(None)
    for _ in range(100):
        ops.add(x, x)
    device.synchronize()
    per_op = max(1, len(list(profiler.stop(save=False).events())) // 100)
    count = 10000 // per_op
    stops, references, events = [], [], 0
    for _ in range(args.batches):
        profiler.start(logdir)
        for _ in range(count):
            ops.add(x, x)
        device.synchronize()
        started = time.perf_counter()
        result = profiler.stop()
        stops.append(time.perf_counter() - started)
        events = len(list(result.events()))
        data = open(result.path, "rb").read()
        started = time.perf_counter()
        space = type(result.space).FromString(data)
        space.SerializeToString()
        references.append(time.perf_counter() - started)
        os.remove(result.path)
    stop_ms, ref_ms = statistics.median(stops) * 1e3, statistics.median(references) * 1e3
    low, mid, high = ratio_stats(stops, references)

    planes = ", ".join(result.planes)
    print(f"AddV2, 1 element, XPU:0, {args.ops} ops per batch, median of {args.batches}")
    print(f"  no session        {off_us:8.2f} µs/op")
    print(f"  session running   {on_us:8.2f} µs/op   ratio {on_us / off_us:.3f} "
          f"(+{(on_us / off_us - 1) * 100:.1f} %)")
    print(f"  main thread's CPU time: {off_cpu:.2f} -> {on_cpu:.2f} µs/op, ratio "
          f"{on_cpu / off_cpu:.3f} (steadier than wall time on a busy machine)")
    print(f"stop() + save, {events} events ({count} ops; planes: {planes}), {load()}")
    print(f"  stop() + save     {stop_ms:8.2f} ms median (min {min(stops) * 1e3:.2f}, max "
          f"{max(stops) * 1e3:.2f}); goal <= 10 ms: {'met' if stop_ms <= 10 else 'MISSED'}")
    print(f"  protobuf parse + serialize of the same profile (reference) {ref_ms:.2f} ms")
    print(f"  ratio to the reference, per round: min {low:.2f} median {mid:.2f} max {high:.2f}")


if __name__ == "__main__":
    main()
