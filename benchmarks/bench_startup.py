"""Start-up cost: a whole process running `import pluggable` and plugin discovery, against
`python -c pass` measured in the same run.

    python benchmarks/bench_startup.py [--runs N] [--write]

Each sample is a fresh interpreter (discovery happens once per process), timed from the
parent; the commands run interleaved, one of each per round, so that the machine's load
hits them alike, and each round gives a ratio to that round's `python -c pass`. Goal: the
median ratio of `import pluggable; list_physical_devices()` at most 3x.

The children run with bytecode caching on (PYTHONDONTWRITEBYTECODE removed from their
environment), as an installed package is: pip compiles the .pyc files at install time, and
the warm-up round writes them for an editable install. Without them every start compiles
the package's sources again (~25 ms here), which no user pays twice.

Discovery probes each plugin in a child process once per plugin build and caches the
verdict: the rows run with a warm probe cache (a cache directory of the benchmark's own),
except "cold probe cache", which starts from an empty one each time and pays the probe.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _ratios import Report, add_write_flag, rounds  # noqa: E402

REFERENCE = "pass"
COMMANDS = {
    "python -c pass": REFERENCE,
    "import pluggable": "import pluggable",
    "import + list_physical_devices()":
        "import pluggable; pluggable.config.list_physical_devices()",
    "import + get_device('XPU:0')": "import pluggable; pluggable.get_device('XPU:0')",
}

CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
COLD = "import + get_device('XPU:0'), cold probe cache"
NOTE = """Each sample is a fresh interpreter timed from the parent, the commands interleaved
one of each per round. The children keep bytecode caches, as an installed package has them,
and a warm probe cache (discovery probes each plugin build once in a child process and
caches the verdict) except in the cold row, which pays the probe every time."""


def sampler(code: str, cold: bool = False):
    def sample() -> float:
        env = CHILD_ENV
        if cold:
            env = dict(CHILD_ENV, PLUGGABLE_CACHE_DIR=tempfile.mkdtemp(prefix="bench-cold-"))
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, env=env)
        elapsed = time.perf_counter() - started
        if cold:
            shutil.rmtree(env["PLUGGABLE_CACHE_DIR"], ignore_errors=True)
        return elapsed
    return sample


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    add_write_flag(parser)
    args = parser.parse_args()
    report = Report(__file__, "Start-up: import, discovery, first XPU device", NOTE)
    cache = tempfile.mkdtemp(prefix="bench-startup-cache-")
    CHILD_ENV["PLUGGABLE_CACHE_DIR"] = cache
    samplers = {name: sampler(code) for name, code in COMMANDS.items()}
    samplers[COLD] = sampler(COMMANDS["import + get_device('XPU:0')"], cold=True)
    try:
        samples = rounds(samplers, args.runs)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    report.table(f"Whole-process start-up, {args.runs} rounds", samples, "python -c pass",
                 "ms", 1e3, goal=3, goal_rows=["import + list_physical_devices()"])
    report.finish(args.write)


if __name__ == "__main__":
    main()
