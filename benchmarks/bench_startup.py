"""Start-up cost: `import pluggable` + plugin discovery + the first XPU device ready, against
`python -c pass` measured in the same run.

    python benchmarks/bench_startup.py [--runs N]

Each sample is a fresh interpreter (discovery happens once per process). The figure that
matters is the median difference: what pluggable adds to an interpreter's start.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

REFERENCE = "pass"
MEASURED = "import pluggable; pluggable.get_device('XPU:0')"
IMPORT_ONLY = "import pluggable"


def sample(code: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    for code in (REFERENCE, MEASURED):  # warm the file cache
        sample(code)
    times = {REFERENCE: [], IMPORT_ONLY: [], MEASURED: []}
    for _ in range(args.runs):  # interleaved, so drift hits all equally
        for code in times:
            times[code].append(sample(code))
    base = statistics.median(times[REFERENCE])
    print(f"{'command':<55} {'median':>9} {'added':>9} {'ratio':>6}")
    for code, values in times.items():
        median = statistics.median(values)
        print(f"python -c {code!r:<45} {median * 1e3:7.1f}ms {(median - base) * 1e3:7.1f}ms "
              f"{median / base:6.2f}")


if __name__ == "__main__":
    main()
