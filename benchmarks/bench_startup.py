"""Start-up cost: `import pluggable` + plugin discovery + the first XPU device ready, against
`python -c pass` measured in the same run.

    python benchmarks/bench_startup.py [--runs N] [--baseline SRC]

Each sample is a fresh interpreter (discovery happens once per process). The figure that
matters is the median difference: what pluggable adds to an interpreter's start.

Discovery probes each plugin in a child process once per plugin build and caches the
verdict: the measured rows run with a warm cache (a cache directory of the benchmark's own),
and the "cold cache" row with an empty one each time, which pays the probe. ``--baseline SRC``
adds the same measurement with another source tree first on PYTHONPATH (e.g. an export of an
older commit, with its built libraries), interleaved with the others.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REFERENCE = "pass"
MEASURED = "import pluggable; pluggable.get_device('XPU:0')"
IMPORT_ONLY = "import pluggable"


def sample(code: str, env=None) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--baseline", help="another source tree to measure against")
    args = parser.parse_args()
    cache = tempfile.mkdtemp(prefix="bench-startup-cache-")
    warm = dict(os.environ, PLUGGABLE_CACHE_DIR=cache)
    rows = {f"python -c {REFERENCE!r}": (REFERENCE, warm),
            f"python -c {IMPORT_ONLY!r}": (IMPORT_ONLY, warm),
            f"python -c {MEASURED!r}": (MEASURED, warm),
            "the same, cold probe cache": (MEASURED, None)}
    if args.baseline:
        rows["the same, --baseline tree"] = (
            MEASURED, dict(warm, PYTHONPATH=os.path.abspath(args.baseline)))
    for code, env in rows.values():  # warm the file cache and the probe cache
        sample(code, env or warm)
    times = {name: [] for name in rows}
    try:
        for _ in range(args.runs):  # interleaved, so drift hits all equally
            for name, (code, env) in rows.items():
                if env is None:
                    cold = tempfile.mkdtemp(prefix="bench-startup-cold-")
                    times[name].append(sample(code, dict(os.environ,
                                                         PLUGGABLE_CACHE_DIR=cold)))
                    shutil.rmtree(cold, ignore_errors=True)
                else:
                    times[name].append(sample(code, env))
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    base = statistics.median(next(iter(times.values())))
    print(f"{'command':<66} {'median':>9} {'added':>9} {'ratio':>6}")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:<66} {median * 1e3:7.1f}ms {(median - base) * 1e3:7.1f}ms "
              f"{median / base:6.2f}")


if __name__ == "__main__":
    main()
