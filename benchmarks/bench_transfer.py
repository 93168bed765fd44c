"""Host <-> device copies of tensors, each against a reference measured in the same run.

    python benchmarks/bench_transfer.py [--rounds 7] [--calls 300] [--sizes 1,64] [--write]
    python benchmarks/bench_transfer.py --sweep | --against OTHER_SRC

- Round trip: upload 1 float32 element (`pluggable.tensor(h, device=XPU:0)`), `ops.add`,
  `.numpy()`, against PyTorch's CPU round trip (`torch.from_numpy(h).clone()`, `torch.add`,
  `.numpy()`, one thread) and NumPy's (`h.copy()`, `np.add`). Goal: at most 0.7x PyTorch.
  Skipped rows: PyTorch when it is not installed (`pip install torch==2.13.0`, CPU build).
- Transfers of `--sizes` MiB of uint8 each way: `pluggable.tensor(array, device=XPU:0)` and
  `Tensor.numpy()` against `np.copyto` into a touched array of the same size. Goal: at least
  0.9x `np.copyto`'s speed, i.e. a time ratio of at most 1.11. `np.array(copy=True)` (a
  fresh array, as `numpy()` must return) is shown for what page faults cost.
- `--sweep`: upload and download times from 4 bytes to 1 MiB against `np.copyto` of the
  same size: in C (`pluggable._compiled.Copier`, the path on an idle compute stream), and on
  the Python paths through the staging ring and straight (`pluggable.tensors.tensor.STAGE_LIMIT`
  is the threshold between them, for uploads behind queued work).
- `--against OTHER_SRC`: A/B of two source trees (each built in place): this tree's `src`
  and OTHER_SRC (a `src` directory) in alternating child processes, each measuring the round
  trip, 4-byte and 1 MiB copies; prints this tree's time / the other's per round.

Each sample is the fastest of a few batches (`_ratios.best_per_call`); the table gives each
row's median time and its per-round ratio to the reference, min / median / max, with the
machine's load. `--write` records the round trip and the transfers, not `--sweep` or
`--against`.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _ratios import Report, add_write_flag, best_per_call, ratio_stats, rounds  # noqa: E402

import pluggable  # noqa: E402
from pluggable import ops  # noqa: E402


def round_trip(device, count: int) -> None:
    h = np.ones(1, np.float32)

    def xpu():
        ops.add(pluggable.tensor(h, device=device), pluggable.tensor(h, device=device)).numpy()

    def xpu_one_upload():
        x = pluggable.tensor(h, device=device)
        ops.add(x, x).numpy()

    samplers = {}
    try:
        import torch

        torch.set_num_threads(1)

        def torch_round_trip():
            t = torch.from_numpy(h).clone()
            torch.add(t, t).numpy()

        samplers["torch: from_numpy().clone(), add, numpy()"] = best_per_call(
            torch_round_trip, count, 5)
        reference = "torch: from_numpy().clone(), add, numpy()"
    except ImportError:
        reference = "numpy: copy(), add"
    samplers["numpy: copy(), add"] = best_per_call(lambda: np.add(h.copy(), h), count, 5)
    samplers["pluggable: tensor(h), add(x, x), numpy()"] = best_per_call(
        xpu_one_upload, count, 5)
    samplers["pluggable: two uploads, add, numpy()"] = best_per_call(xpu, count, 5)
    assert float(ops.add(pluggable.tensor(h, device=device),
                         pluggable.tensor(h, device=device)).numpy()[0]) == 2.0
    REPORT.table("upload 1 float32 + add + numpy(), per round trip",
                 rounds(samplers, ARGS.rounds), reference, "µs", 1e6, goal=0.7,
                 goal_rows=["pluggable: tensor(h), add(x, x), numpy()"])


def transfers(device, mib: int) -> None:
    nbytes = mib << 20
    source = np.random.default_rng(0).integers(0, 255, nbytes, dtype=np.uint8)
    target = np.empty_like(source)
    target[:] = 1
    on_device = pluggable.tensor(source, device=device)
    assert np.array_equal(on_device.numpy(), source)
    calls = max(1, (64 << 20) // nbytes // 4)
    batches = 3
    samplers = {
        "np.copyto into a touched array": best_per_call(lambda: np.copyto(target, source),
                                                        calls, batches),
        "np.array(copy=True)": best_per_call(lambda: np.array(source, copy=True), calls,
                                             batches),
        "pluggable.tensor(array, device=XPU:0)": best_per_call(
            lambda: pluggable.tensor(source, device=device), calls, batches),
        "Tensor.numpy() from XPU:0": best_per_call(on_device.numpy, calls, batches),
    }
    unit, scale = ("µs", 1e6) if mib < 16 else ("ms", 1e3)
    REPORT.table(f"{mib} MiB uint8 each way, per copy", rounds(samplers, ARGS.rounds),
                 "np.copyto into a touched array", unit, scale, goal=1.11,
                 goal_rows=["pluggable.tensor(array, device=XPU:0)",
                            "Tensor.numpy() from XPU:0"],
                 goal_label="upload and download; >= 0.9x the speed of np.copyto")


def sweep(device) -> None:
    from pluggable.tensors import tensor as tensors

    for nbytes in (4, 256, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20):
        source = np.ones(nbytes, np.uint8)
        target = np.empty_like(source)
        on_device = pluggable.tensor(source, device=device)
        samplers = {"np.copyto": best_per_call(lambda: np.copyto(target, source), 200, 5)}
        saved = tensors.STAGE_LIMIT
        for label, limit, copier in (("in C", 0, None), ("staged", 1 << 62, False),
                                     ("straight", 0, False)):
            def up(limit=limit, copier=copier):
                tensors.STAGE_LIMIT = limit
                device._copier = copier
                pluggable.tensor(source, device=device)

            def down(limit=limit, copier=copier):
                tensors.STAGE_LIMIT = limit
                device._copier = copier
                on_device.numpy()

            samplers[f"upload, {label}"] = best_per_call(up, 200, 5)
            samplers[f"download, {label}"] = best_per_call(down, 200, 5)
        try:
            table = rounds(samplers, ARGS.rounds)
        finally:
            tensors.STAGE_LIMIT = saved
            device._copier = None
        REPORT.table(f"{nbytes} bytes", table, "np.copyto", "µs", 1e6)


def child() -> None:
    """One process's figures for `--against`, as JSON: seconds per call (best batch)."""
    import json

    device = pluggable.get_device("XPU:0")
    h = np.ones(1, np.float32)
    small = pluggable.tensor(h, device=device)
    mib = np.ones(1 << 20, np.uint8)
    on_device = pluggable.tensor(mib, device=device)
    figures = {
        "round trip (tensor, add, numpy)": best_per_call(
            lambda: ops.add(pluggable.tensor(h, device=device), small).numpy(), 200, 5),
        "upload 4 bytes": best_per_call(lambda: pluggable.tensor(h, device=device), 200, 5),
        "numpy() 4 bytes": best_per_call(small.numpy, 200, 5),
        "upload 1 MiB": best_per_call(lambda: pluggable.tensor(mib, device=device), 20, 5),
        "numpy() 1 MiB": best_per_call(on_device.numpy, 20, 5),
    }
    print(json.dumps({name: sample() for name, sample in figures.items()}))


def against(other_src: str) -> None:
    import json
    import statistics
    import subprocess

    from _ratios import load

    here = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    samples = {"this": [], "other": []}
    for _ in range(ARGS.rounds):
        for label, src in (("this", here), ("other", other_src)):
            env = dict(os.environ, PYTHONPATH=src)
            out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child"],
                                 env=env, capture_output=True, text=True, check=True)
            samples[label].append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"\nthis tree / {other_src}, {ARGS.rounds} alternating rounds ({load()})")
    print(f"  {'':<36} {'this':>9} {'other':>9} {'ratio min':>9} {'median':>7} {'max':>7}")
    for name in samples["this"][0]:
        mine = [r[name] for r in samples["this"]]
        theirs = [r[name] for r in samples["other"]]
        lo, mid, hi = ratio_stats(mine, theirs)
        print(f"  {name:<36} {statistics.median(mine) * 1e6:7.1f}µs "
              f"{statistics.median(theirs) * 1e6:7.1f}µs {lo:9.2f} {mid:7.2f} {hi:7.2f}")


NOTE = """On an idle compute stream `tensor()` copies straight from the caller's array and
`numpy()` into the new array, in C (`pluggable._compiled.Copier`), and the XPU runs a host copy
of any size at once on the calling thread; PyTorch's round trip never leaves the calling
thread either. Behind queued work an upload of at most 1 MiB goes through the staging ring
(`pluggable.tensors.STAGE_LIMIT`, set from `--sweep`), a larger one straight."""


def main() -> None:
    global ARGS, REPORT
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=300, help="round trips per batch")
    parser.add_argument("--sizes", default="1,64", help="MiB, comma-separated")
    parser.add_argument("--sweep", action="store_true")
    parser.add_argument("--against", metavar="OTHER_SRC")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    add_write_flag(parser)
    ARGS = parser.parse_args()
    if ARGS.write and (ARGS.sweep or ARGS.against or ARGS.child):
        parser.error("--write records the round trip and the transfers; --sweep and "
                     "--against are printed only")
    REPORT = Report(__file__, "Host <-> device transfers", NOTE, uses=("numpy", "torch"))
    if ARGS.child:
        child()
        return
    if ARGS.against:
        against(ARGS.against)
        return
    device = pluggable.get_device("XPU:0")
    if ARGS.sweep:
        sweep(device)
        return
    round_trip(device, ARGS.calls)
    for mib in (int(s) for s in ARGS.sizes.split(",") if s):
        transfers(device, mib)
    REPORT.finish(ARGS.write)


ARGS = REPORT = None

if __name__ == "__main__":
    main()
