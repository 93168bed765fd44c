"""What profiling costs a user: a session around 10 000 one-element adds (start, the ops,
stop and save) against the same adds without a session, in one run.

    python benchmarks/bench_profiler.py [--rounds 9] [--ops 10000] [--write]

A round times two units back to back, in alternating order: `--ops` AddV2 on 1-element
float32 tensors on XPU:0 and a wait for the device (no session); and the same inside a
session: `profiler.start(logdir)`, the ops, the wait, `profiler.stop()` saving the
.xplane.pb. Both goals are read from the session unit, split where stop() is called: what
recording costs per op is (start + ops) / plain unit - 1, taken per round (min / median /
max), and stop() + save is the rest. (The whole unit over the plain one is shown too; with
stop() allowed 5 ms against about 12 ms of ops it cannot be within 5 %, so the per-op goal
is the recording's.) Each unit is timed
twice: wall time, and CPU time of the calling thread (less sensitive to other jobs on the
machine; it leaves out the plugin profiler's own threads and the device's worker). The session uses the
default `ProfilerOptions` (host tracer level 2, plugin profilers on), so the XPU's own
profiler records too. Goals: at most +5 % per op, stop() + save at most 5 ms (medians).
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
from _ratios import Report, add_write_flag  # noqa: E402

NOTE = """A session (host tracer level 2 and the XPU's own profiler) records every op
(with its correlation id), allocation and free on the host plane and each kernel on the
device plane, with timestamps read from the time-stamp counter. stop() encodes the host
plane from the records kept in C, checks the plugin's XSpace by walking its wire format
and writes the pieces to the file; nothing is parsed. Figures measured on a shared
machine (2 cores, other jobs running) are noisy: the spread of the per-round ratio says how
much."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--ops", type=int, default=10000)
    add_write_flag(parser)
    args = parser.parse_args()
    report = Report(__file__, "Profiling: what a session costs", NOTE,
                    uses=("numpy", "protobuf"))
    device = pluggable.get_device("XPU:0")
    x = pluggable.tensor(np.ones(1, np.float32), device=device)
    logdir = tempfile.mkdtemp(prefix="bench_profiler_")

    cpu = time.thread_time

    def plain():
        """(wall, thread CPU) seconds."""
        started, started_cpu = time.perf_counter(), cpu()
        for _ in range(args.ops):
            y = ops.add(x, x)
        device.synchronize()
        del y
        return time.perf_counter() - started, cpu() - started_cpu

    def session():
        """(the whole unit, start + ops, stop() + save) in wall seconds, the same in thread
        CPU seconds, and the result."""
        started, started_cpu = time.perf_counter(), cpu()
        profiler.start(logdir)
        for _ in range(args.ops):
            y = ops.add(x, x)
        device.synchronize()
        del y
        stopping, stopping_cpu = time.perf_counter(), cpu()
        result = profiler.stop()
        ended, ended_cpu = time.perf_counter(), cpu()
        return ((ended - started, stopping - started, ended - stopping),
                (ended_cpu - started_cpu, stopping_cpu - started_cpu, ended_cpu - stopping_cpu),
                result)

    plain()  # warm-up: plans made, memory pooled, the profilers' first session
    os.remove(session()[2].path)
    plains, sessions, recording, stops = [], [], [], []
    cpu_plains, cpu_sessions, cpu_recording, cpu_stops = [], [], [], []
    events, result = 0, None
    for round_ in range(args.rounds):
        if round_ % 2:
            wall_plain, cpu_plain = plain()
        (whole, ops_part, stop), (cpu_whole, cpu_ops, cpu_stop), result = session()
        if not round_ % 2:
            wall_plain, cpu_plain = plain()
        plains.append(wall_plain)
        cpu_plains.append(cpu_plain)
        sessions.append(whole)
        recording.append(ops_part)
        stops.append(stop)
        cpu_sessions.append(cpu_whole)
        cpu_recording.append(cpu_ops)
        cpu_stops.append(cpu_stop)
        events = sum(1 for _ in result.events())
        os.remove(result.path)
    per_op = [r / p for r, p in zip(recording, plains)]
    report.table(f"{args.ops} AddV2, 1 element, XPU:0, {args.rounds} rounds: the whole unit "
                 f"(a session: start + ops + stop and save; {events} events, planes "
                 f"{', '.join(result.planes)})",
                 {"no session": plains, "session": sessions,
                  "of which start + ops (what recording costs)": recording,
                  "of which stop() + save": stops},
                 "no session", "ms", 1e3)
    report.table("The same rounds in CPU time of the calling thread",
                 {"no session": cpu_plains, "session": cpu_sessions,
                  "of which start + ops (what recording costs)": cpu_recording,
                  "of which stop() + save": cpu_stops},
                 "no session", "ms", 1e3)
    ratio = statistics.median(per_op)
    stop_ms = statistics.median(stops) * 1e3
    report.goal("recording (start + ops) / no session, per op, median <= 1.05 "
                f"(min {min(per_op):.3f}, max {max(per_op):.3f})", ratio <= 1.05,
                f"{ratio:.3f}")
    report.goal("stop() + save <= 5 ms median", stop_ms <= 5, f"{stop_ms:.2f} ms")
    report.finish(args.write)


if __name__ == "__main__":
    main()
