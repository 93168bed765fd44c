"""The XPU stream worker's wait: CPU time against wall time while ops stream in, single-op
latency, and two Python threads on two devices against one thread.

    python benchmarks/bench_worker.py [--rounds 7] [--ops 5000] [--batches 3]
                                      [--switch-interval S] [--write]
    python benchmarks/bench_worker.py --against /path/to/other/libxpu_plugin.so

Figures, each a ratio measured in the same run (min / median / max over the rounds):
- stream: `--ops` 1-element AddV2 issued back to back on XPU:0, then one synchronize;
  process CPU time (all threads, `time.process_time`) / wall time. Goal <= 1.3. On a loaded
  machine the process gets less than a core and CPU / wall falls below 1 whatever the worker
  does, so process CPU time / the issuing thread's CPU time (`time.thread_time`) is shown
  too: what the stream workers add on top of the thread that issues the ops.
- latency: AddV2 followed by `device.synchronize()`, per op; reported against the stream's
  per-op time of the same round (how much a wait per op costs).
- two threads: two Python threads, one on XPU:0 and one on XPU:1, each issuing `--ops` ops
  and synchronizing; total throughput / one thread's throughput on XPU:0 alone in the same
  round. Goal >= 1.0. The threads are started first and released together (a barrier); each
  stamps its own start and end, and the two-thread time runs from the first start to the
  last end, so thread creation is not counted and neither is the main thread's wait for the
  GIL. Each round takes the best of `--batches` one-thread and two-thread batches,
  alternating (a batch that was preempted says nothing about the code). Beside it, the
  issuing threads' CPU time per op (`time.thread_time`, which a preempted or waiting thread
  does not accrue) / one thread's: what sharing the GIL costs the threads themselves, the
  figure least moved by the machine's load. Both figures are also taken, in the same
  batches, with every kernel run releasing the GIL (`pluggable._compiled.hold_gil_bytes(-1)`,
  the per-op path before small runs kept it), and reported against the same one-thread
  batches.
- the interpreter's own figure, the reference for the one above: the same two-thread and
  one-thread batches (same barrier, same stamps) issuing `np.add(h, h)` on 1-element NumPy
  arrays instead of ops, with nothing of pluggable's. Whatever holds the GIL per call loses
  the same hand-over there; "2 threads / the interpreter's own figure" is what pluggable adds.
`--switch-interval S` runs everything with `sys.setswitchinterval(S)` (CPython's default is
0.005 s): how much of the two-thread figure is the interpreter handing the GIL over, which
costs a thread wake-up every interval. Use `--ops 20000` or more with it: a batch of 5000
ops takes about 5 ms, one default interval.
With `--against OTHER.so`, the script runs itself on this build's plugin and on OTHER.so in
alternating child processes and prints this build's figures / OTHER's (A/B of two builds);
`--write` records the plain run only.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _ratios import Report, add_write_flag, load, spread  # noqa: E402

NOTE = """A small op runs on the calling thread with the GIL held, so two Python threads
issuing ops take turns, and at each switch interval the waiting one must be woken to take
the GIL. The interpreter's own figure (the same batches issuing `np.add` on 1-element
arrays, nothing of pluggable's) is what CPython allows any call that holds the GIL, so
"2 threads / the interpreter" is what pluggable adds."""


def measure(rounds: int, n_ops: int, plugin: str = None, batches: int = 3) -> dict:
    import numpy as np

    import pluggable
    from pluggable import _compiled, ops

    if plugin:
        pluggable.load_plugin(plugin)
    dev0, dev1 = pluggable.get_device("XPU:0"), pluggable.get_device("XPU:1")
    x0 = pluggable.tensor(np.ones(1, np.float32), device=dev0)
    x1 = pluggable.tensor(np.ones(1, np.float32), device=dev1)

    def stream(x, device, count):
        for _ in range(count):
            ops.add(x, x)
        device.synchronize()

    h0, h1 = np.ones(1, np.float32), np.ones(1, np.float32)

    def numpy_stream(h, _device, count):
        add = np.add
        for _ in range(count):
            add(h, h)

    def latency(count):
        for _ in range(count):
            ops.add(x0, x0)
            dev0.synchronize()

    out = {"cpu_per_main": [], "cpu_per_wall": [], "stream_us": [], "latency_us": [], "latency_cpu_per_wall": [],
           "two_threads_vs_one": [], "two_threads_cpu_per_op_vs_one": [],
           "released_two_threads_vs_one": [], "released_two_threads_cpu_per_op_vs_one": [],
           "numpy_two_threads_vs_one": []}
    stream(x0, dev0, n_ops)
    stream(x1, dev1, n_ops)
    latency(n_ops // 10)
    for _ in range(rounds):
        wall, cpu, main = time.perf_counter(), time.process_time(), time.thread_time()
        stream(x0, dev0, n_ops)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        main = time.thread_time() - main
        out["cpu_per_wall"].append(cpu / wall)
        out["cpu_per_main"].append(cpu / main)
        out["stream_us"].append(wall / n_ops * 1e6)

        count = n_ops // 5
        wall, cpu = time.perf_counter(), time.process_time()
        latency(count)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        out["latency_us"].append(wall / count * 1e6)
        out["latency_cpu_per_wall"].append(cpu / wall)

        one, one_cpu = 0.0, float("inf")
        two = {"": [0.0, float("inf")], "released_": [0.0, float("inf")]}
        numpy_one = numpy_two = 0.0
        for _ in range(batches):
            started = time.perf_counter()
            numpy_stream(h0, None, n_ops)
            numpy_one = max(numpy_one, n_ops / (time.perf_counter() - started))
            seconds, _ = two_threads(numpy_stream, ((h0, None), (h1, None)), n_ops)
            numpy_two = max(numpy_two, 2 * n_ops / seconds)
            started, cpu = time.perf_counter(), time.thread_time()
            stream(x0, dev0, n_ops)
            one = max(one, n_ops / (time.perf_counter() - started))
            one_cpu = min(one_cpu, (time.thread_time() - cpu) / n_ops)
            for key, threshold in (("", _compiled.HOLD_GIL_BYTES), ("released_", -1)):
                _compiled.hold_gil_bytes(threshold)
                seconds, cpu = two_threads(stream, ((x0, dev0), (x1, dev1)), n_ops)
                _compiled.hold_gil_bytes(_compiled.HOLD_GIL_BYTES)
                two[key][0] = max(two[key][0], 2 * n_ops / seconds)
                two[key][1] = min(two[key][1], cpu / (2 * n_ops))
        out["numpy_two_threads_vs_one"].append(numpy_two / numpy_one)
        for key, (throughput, cpu_per_op) in two.items():
            out[key + "two_threads_vs_one"].append(throughput / one)
            out[key + "two_threads_cpu_per_op_vs_one"].append(cpu_per_op / one_cpu)
    return out


def two_threads(stream, targets, n_ops: int):
    """Seconds from the first of the threads starting `stream` on its (tensor, device) to the
    last one finishing, and the CPU seconds the threads spent; the threads are made and
    started before, and released together."""
    gate = threading.Barrier(len(targets))
    stamps = []

    def run(x, device):
        gate.wait()
        started, cpu = time.perf_counter(), time.thread_time()
        stream(x, device, n_ops)
        stamps.append((started, time.perf_counter(), time.thread_time() - cpu))

    threads = [threading.Thread(target=run, args=target) for target in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return (max(s[1] for s in stamps) - min(s[0] for s in stamps), sum(s[2] for s in stamps))


def describe(values) -> str:
    return "{:7.2f} {:7.2f} {:7.2f}".format(*spread(values))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--ops", type=int, default=5000)
    parser.add_argument("--batches", type=int, default=3,
                        help="batches per round of the two-thread figure, best taken")
    parser.add_argument("--against", help="another build's libxpu_plugin.so (A/B)")
    parser.add_argument("--switch-interval", type=float,
                        help="sys.setswitchinterval for the run (default: CPython's)")
    parser.add_argument("--plugin", help=argparse.SUPPRESS)  # child of --against
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    add_write_flag(parser)
    args = parser.parse_args()
    if args.write and (args.against or args.json):
        parser.error("--write records the plain run; --against is printed only")
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    if args.json:
        print(json.dumps(measure(args.rounds, args.ops, args.plugin, args.batches)))
        return
    print(f"XPU stream worker, {args.rounds} rounds of {args.ops} ops, switch interval "
          f"{sys.getswitchinterval() * 1e3:g} ms  ({load()})")
    if not args.against:
        report = Report(__file__, "XPU stream worker: streams, waits and two threads", NOTE,
                        uses=("numpy",))
        r = measure(args.rounds, args.ops, batches=args.batches)
        per_round = f"{args.rounds} rounds of {args.ops} ops"
        report.spread(f"A stream of 1-element AddV2 on XPU:0, and op + synchronize, "
                      f"{per_round}", [
            ("stream: process CPU time / wall time", r["cpu_per_wall"]),
            ("stream: process CPU time / issuing thread's CPU time", r["cpu_per_main"]),
            ("stream: µs per op", r["stream_us"]),
            ("latency (op + synchronize): µs per op", r["latency_us"]),
            ("latency / stream per op, same round",
             [a / b for a, b in zip(r["latency_us"], r["stream_us"])]),
            ("latency: process CPU time / wall time", r["latency_cpu_per_wall"])])
        cpu_per_wall = statistics.median(r["cpu_per_wall"])
        report.goal("stream: process CPU time / wall time, median <= 1.3", cpu_per_wall <= 1.3,
                    f"{cpu_per_wall:.2f}")
        ours_vs_interpreter = [a / b for a, b in zip(r["two_threads_vs_one"],
                                                     r["numpy_two_threads_vs_one"])]
        kept_vs_released = [a / b for a, b in zip(r["two_threads_vs_one"],
                                                  r["released_two_threads_vs_one"])]
        report.spread(f"Two threads (XPU:0, XPU:1) against one, {per_round} per thread, "
                      f"best of {args.batches}, switch interval "
                      f"{sys.getswitchinterval() * 1e3:g} ms", [
            ("2 threads on 2 devices / 1 thread (throughput)", r["two_threads_vs_one"]),
            ("the interpreter: 2 threads of np.add / 1 thread", r["numpy_two_threads_vs_one"]),
            ("2 threads / the interpreter, same round", ours_vs_interpreter),
            ("2 threads: CPU time per op / 1 thread", r["two_threads_cpu_per_op_vs_one"]),
            ("every run releasing the GIL: 2 threads / 1 thread",
             r["released_two_threads_vs_one"]),
            ("every run releasing the GIL: CPU time per op / 1 thread",
             r["released_two_threads_cpu_per_op_vs_one"]),
            ("2 threads: keeping / releasing the GIL, same round", kept_vs_released)])
        two = statistics.median(r["two_threads_vs_one"])
        interpreter = statistics.median(r["numpy_two_threads_vs_one"])
        report.goal("2 threads / 1 thread, median >= 1.0", two >= 1.0,
                    f"{two:.2f}; the interpreter's own figure {interpreter:.2f}")
        report.finish(args.write)
        return
    # A/B: children alternate between the two builds, one round each, so load hits both alike.
    env = dict(os.environ, PLUGGABLE_DISABLE_AUTOLOAD="1")
    mine = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src",
                        "tensorflow-plugins", "libxpu_plugin.so")
    results = {"this": [], "other": []}
    for _ in range(args.rounds):
        for name, path in (("this", mine), ("other", args.against)):
            child = subprocess.run([sys.executable, __file__, "--json", "--rounds", "1",
                                    "--ops", str(args.ops), "--batches", str(args.batches),
                                    "--switch-interval", str(sys.getswitchinterval()),
                                    "--plugin", path],
                                   env=env, capture_output=True, text=True, check=True)
            results[name].append(json.loads(child.stdout.splitlines()[-1]))
    print(f"  {'this build / other build, per round':<52} {'min':>7} {'median':>7} {'max':>7}")
    for key, label in (("cpu_per_wall", "stream CPU/wall"),
                       ("cpu_per_main", "stream CPU/main thread CPU"), ("stream_us", "stream per op"),
                       ("latency_us", "latency per op"),
                       ("latency_cpu_per_wall", "latency CPU/wall"),
                       ("two_threads_vs_one", "2 threads / 1 thread"),
                       ("numpy_two_threads_vs_one", "np.add 2 threads / 1 thread"),
                       ("two_threads_cpu_per_op_vs_one", "2 threads CPU/op / 1 thread")):
        ratios = [a[key][0] / b[key][0] for a, b in zip(results["this"], results["other"])]
        this = statistics.median(r[key][0] for r in results["this"])
        other = statistics.median(r[key][0] for r in results["other"])
        print(f"  {label:<30} ({this:7.2f} vs {other:7.2f}) {describe(ratios)}")
    print(f"  ({load()})")


if __name__ == "__main__":
    main()
