"""What profiling costs a user: a session around 10 000 one-element adds (start, the ops,
stop and save) against the same adds without a session, in one run.

    python benchmarks/bench_profiler.py [--rounds 9] [--ops 10000] [--write]

A round times two units back to back, in alternating order: `--ops` AddV2 on 1-element
float32 tensors on XPU:0 and a wait for the device (no session); and the same inside a
session: `profiler.start(logdir)`, the ops, the wait, `profiler.stop()` saving the
.xplane.pb. The session's cost per op is (session unit / plain unit - 1), taken per round
(min / median / max); stop() + save is timed inside the session unit. The session uses the
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
from _ratios import Report, add_write_flag, ratio_stats  # noqa: E402

NOTE = """A session (host tracer level 2 and the XPU's own profiler) records every op
(with its correlation id), allocation and free on the host plane and each kernel on the
device plane, with timestamps read from the time-stamp counter. Figures measured on a shared
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

    def plain() -> float:
        started = time.perf_counter()
        for _ in range(args.ops):
            y = ops.add(x, x)
        device.synchronize()
        del y
        return time.perf_counter() - started

    def session():
        """(the whole unit, start + ops, stop() + save) in seconds, and the result."""
        started = time.perf_counter()
        profiler.start(logdir)
        for _ in range(args.ops):
            y = ops.add(x, x)
        device.synchronize()
        del y
        stopping = time.perf_counter()
        result = profiler.stop()
        ended = time.perf_counter()
        return ended - started, stopping - started, ended - stopping, result

    plain()  # warm-up: plans made, memory pooled, the profilers' first session
    os.remove(session()[3].path)
    plains, sessions, recording, stops, events, result = [], [], [], [], 0, None
    for round_ in range(args.rounds):
        if round_ % 2:
            plains.append(plain())
        whole, ops_part, stop, result = session()
        if not round_ % 2:
            plains.append(plain())
        sessions.append(whole)
        recording.append(ops_part)
        stops.append(stop)
        events = sum(1 for _ in result.events())
        os.remove(result.path)
    per_op = [s / p for s, p in zip(sessions, plains)]
    report.table(f"{args.ops} AddV2, 1 element, XPU:0, {args.rounds} rounds: the whole unit "
                 f"(a session: start + ops + stop and save; {events} events, planes "
                 f"{', '.join(result.planes)})",
                 {"no session": plains, "session": sessions,
                  "of which start + ops (what recording costs)": recording,
                  "of which stop() + save": stops},
                 "no session", "ms", 1e3)
    ratio = statistics.median(per_op)
    stop_ms = statistics.median(stops) * 1e3
    report.goal("session / no session, per op, median <= 1.05 "
                f"(min {min(per_op):.3f}, max {max(per_op):.3f})", ratio <= 1.05,
                f"{ratio:.3f}")
    report.goal("stop() + save <= 5 ms median", stop_ms <= 5, f"{stop_ms:.2f} ms")
    report.finish(args.write)


if __name__ == "__main__":
    main()
