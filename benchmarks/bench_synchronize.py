"""`device.synchronize()` on an idle device: with a deadline (the default, which runs the
blocking plugin call on a helper thread so that it can be given up on) against without one
(`pluggable.config.set_deadline(0)`: the plugin's call made directly), in the same rounds.

    python benchmarks/bench_synchronize.py [--rounds 5] [--calls 2000] [--batches 5]

Each sample is the fastest of `--batches` batches of `--calls` calls on XPU:0, per call;
the two rows alternate within each round.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _ratios import best_per_call, load, ratio_stats, rounds  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--batches", type=int, default=5)
    args = parser.parse_args()

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

    samples = rounds({"default deadline": with_deadline(None),
                      "deadline 0 (direct call)": with_deadline(0)}, args.rounds)
    print(f"idle device.synchronize(), {args.rounds} rounds, best of {args.batches} x "
          f"{args.calls} calls  ({load()})")
    for name, values in samples.items():
        print(f"  {name:<28} median {statistics.median(values) * 1e6:7.2f} µs  "
              f"(min {min(values) * 1e6:.2f}, max {max(values) * 1e6:.2f})")
    low, median, high = ratio_stats(samples["default deadline"],
                                    samples["deadline 0 (direct call)"])
    print(f"  default / deadline 0, same round: {low:.2f} / {median:.2f} / {high:.2f} "
          f"(min / median / max)")


if __name__ == "__main__":
    main()
