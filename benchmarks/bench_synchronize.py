"""`device.synchronize()` on an idle device: with a deadline (the default, which runs the
blocking plugin call on a helper thread so that it can be given up on) against without one
(`pluggable.config.set_deadline(0)`: the plugin's call made directly), in the same rounds.

    python benchmarks/bench_synchronize.py [--rounds 5] [--calls 2000] [--batches 5] [--write]

Each sample is the fastest of `--batches` batches of `--calls` calls on XPU:0, per call;
the two rows alternate within each round, and the default is reported as its per-round
ratio to the direct call, min / median / max.
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _ratios import Report, add_write_flag, best_per_call, rounds  # noqa: E402

NOTE = """With a deadline the call runs on a pthread of `pluggable._compiled`'s helper pool: the
caller releases the GIL, spins up to 50 µs on the call's done flag, then sleeps until the
deadline. What the default costs over the direct call is that hand-off."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--batches", type=int, default=5)
    add_write_flag(parser)
    args = parser.parse_args()
    report = Report(__file__, "Idle device.synchronize(): with and without a deadline", NOTE)

    import pluggable

    device = pluggable.get_device("XPU:0")
    sample = best_per_call(device.synchronize, args.calls, args.batches)

    def with_deadline(seconds):
        def run() -> float:
            pluggable.config.set_deadline(seconds)
            try:
                return sample()
            finally:
                pluggable.config.set_deadline(None)
        return run

    samples = rounds({"deadline 0 (direct call)": with_deadline(0),
                      "default deadline": with_deadline(None)}, args.rounds)
    report.table(f"Idle device.synchronize() on XPU:0, {args.rounds} rounds, best of "
                 f"{args.batches} x {args.calls} calls, per call", samples,
                 "deadline 0 (direct call)", "µs", 1e6)
    report.finish(args.write)


if __name__ == "__main__":
    main()
