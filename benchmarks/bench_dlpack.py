"""DLPack exchange of a 1024-element float32 tensor: export + import round trips through
pluggable, against PyTorch and NumPy exchanging the same array in the same run.

    python benchmarks/bench_dlpack.py [--repeats 7] [--number 20000]

References (both measured here): ``torch.from_dlpack(np_array)`` (NumPy exports, PyTorch
imports) and ``np.from_dlpack(torch_tensor)`` (the other way). The goal is a pluggable round
trip no slower than the faster of the two. Each figure is the best of ``--repeats`` runs of
``--number`` calls (the machine is shared: the best run is the one least disturbed).
Needs torch (``pip install .[interop]``); without it only the pluggable rows are printed.
"""
from __future__ import annotations

import argparse
import timeit

import numpy as np

import pluggable


def per_call(fns, number: int, repeats: int) -> list:
    """The best time per call of each function, the functions taking turns."""
    for fn in fns:
        fn()  # warm-up
    best = [float("inf")] * len(fns)
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            best[i] = min(best[i], timeit.timeit(fn, number=number) / number)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--number", type=int, default=20000)
    args = parser.parse_args()
    array = np.arange(1024, dtype=np.float32)
    t = pluggable.tensor(array)
    from_dlpack, to_dlpack = pluggable.from_dlpack, pluggable.to_dlpack
    rows = []
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        torch.set_num_threads(1)
        theirs = torch.from_numpy(array.copy())
        rows += [
            ("torch.from_dlpack(np_array)  [reference]", lambda: torch.from_dlpack(array)),
            ("np.from_dlpack(torch_tensor) [reference]", lambda: np.from_dlpack(theirs)),
        ]
    rows += [
        ("pluggable.from_dlpack(pluggable_tensor)", lambda: from_dlpack(t)),
        ("np.from_dlpack(pluggable_tensor)", lambda: np.from_dlpack(t)),
        ("pluggable.from_dlpack(np_array)", lambda: from_dlpack(array)),
        ("from_dlpack(to_dlpack(t))  (RFC capsules)", lambda: from_dlpack(to_dlpack(t))),
    ]
    if torch is not None:
        rows += [
            ("torch.from_dlpack(pluggable_tensor)", lambda: torch.from_dlpack(t)),
            ("pluggable.from_dlpack(torch_tensor)", lambda: from_dlpack(theirs)),
        ]
    times = per_call([fn for _, fn in rows], args.number, args.repeats)
    results = [(name, seconds) for (name, _), seconds in zip(rows, times)]
    reference = min(s for name, s in results if "reference" in name) if torch else None
    print(f"1024 float32, best of {args.repeats} x {args.number} calls")
    print(f"{'exchange (export + import)':<46} {'per call':>9} {'vs faster ref':>14}")
    for name, seconds in results:
        ratio = f"{seconds / reference:13.2f}x" if reference else ""
        print(f"{name:<46} {seconds * 1e6:7.2f}us {ratio}")


if __name__ == "__main__":
    main()
