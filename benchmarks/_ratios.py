"""Ratios against a reference measured in the same run, for every benchmark here.

A figure is only meaningful beside its reference taken on the same machine at the same
moment: this 2-core machine is shared, so absolute times move by 2x with the load. Each
benchmark therefore measures in rounds, the candidate and its reference back to back in
each round, and reports the per-round ratio candidate / reference as min / median / max,
with the 1-minute load average (os.getloadavg) before and after.
"""
from __future__ import annotations

import os
import statistics
import time
from typing import Callable, Dict, List, Sequence


def load() -> str:
    """The 1-, 5- and 15-minute load averages and the core count, for the report."""
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def time_per_call(fn: Callable[[], object], calls: int) -> float:
    """Seconds per call of `fn`, over `calls` calls in a row."""
    started = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - started) / calls


def best_per_call(fn: Callable[[], object], calls: int, batches: int) -> Callable[[], float]:
    """A sampler: the fastest of `batches` batches of `calls` calls, per call. On a loaded
    machine a batch that was preempted says nothing about the code; the fastest one does."""
    def sample() -> float:
        return min(time_per_call(fn, calls) for _ in range(batches))
    return sample


def rounds(candidates: Dict[str, Callable[[], float]], count: int) -> Dict[str, List[float]]:
    """Runs every sampler once per round, interleaved, `count` rounds; the samples by name."""
    out: Dict[str, List[float]] = {name: [] for name in candidates}
    for sampler in candidates.values():  # warm-up: caches, pools, lazily built plans
        sampler()
    for _ in range(count):
        for name, sampler in candidates.items():
            out[name].append(sampler())
    return out


def ratio_stats(samples: Sequence[float], reference: Sequence[float]):
    """(min, median, max) of the per-round ratios samples[i] / reference[i]."""
    ratios = [s / r for s, r in zip(samples, reference)]
    return min(ratios), statistics.median(ratios), max(ratios)


def print_table(title: str, samples: Dict[str, List[float]], reference: str, unit: str,
                scale: float, goal: float = None, goal_rows: Sequence[str] = ()) -> None:
    """One table: each row's median time and its min/median/max ratio to `reference`; with
    `goal`, whether the median ratio of `goal_rows` (default: every other row) meets it."""
    print(f"\n{title}  ({load()})")
    print(f"  {'':<44} {'median':>12} {'ratio min':>9} {'median':>7} {'max':>7}")
    for name, values in samples.items():
        lo, mid, hi = ratio_stats(values, samples[reference])
        mark = "" if name != reference else "  (reference)"
        print(f"  {name:<44} {statistics.median(values) * scale:9.2f} {unit:<2} "
              f"{lo:9.2f} {mid:7.2f} {hi:7.2f}{mark}")
    if goal is not None:
        rows = goal_rows or [n for n in samples if n != reference]
        worst = max(ratio_stats(samples[n], samples[reference])[1] for n in rows)
        print(f"  goal: median ratio <= {goal}: {'met' if worst <= goal else 'MISSED'} "
              f"(worst median {worst:.2f})")
