"""DLPack exchange of a 1024-element float32 tensor: export + import round trips through
pluggable, against PyTorch and NumPy exchanging the same array in the same run.

    python benchmarks/bench_dlpack.py [--repeats 7] [--number 20000] [--write]

References (both measured here): ``torch.from_dlpack(np_array)`` (NumPy exports, PyTorch
imports) and ``np.from_dlpack(torch_tensor)`` (the other way); the tables use the one whose
median is lower. The goal is a pluggable round trip (``pluggable.from_dlpack`` of a
pluggable tensor) no slower than that reference. The rows take turns in each of
``--repeats`` rounds, a sample being the time per call over ``--number`` calls; each row is
reported as its per-round ratio to the reference, min / median / max.
Needs torch (``pip install .[interop]``); without it the reference is
``pluggable.from_dlpack(np_array)`` and there is no goal.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _ratios import Report, add_write_flag, rounds, time_per_call  # noqa: E402

import pluggable  # noqa: E402

GOAL_ROW = "pluggable.from_dlpack(pluggable_tensor)"
NOTE = """A CPU tensor is exported by NumPy's own exporter on the tensor's array and host
memory imported by NumPy's own consumer; importing from PyTorch pays for PyTorch's Python
`__dlpack_device__` and `__dlpack__`, and legacy `"dltensor"` capsules (`to_dlpack`, what
JAX asks for) are built by pluggable through ctypes."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7, help="rounds")
    parser.add_argument("--number", type=int, default=20000, help="calls per sample")
    add_write_flag(parser)
    args = parser.parse_args()
    report = Report(__file__, "DLPack exchange", NOTE, uses=("numpy", "torch"))
    array = np.arange(1024, dtype=np.float32)
    t = pluggable.tensor(array)
    from_dlpack, to_dlpack = pluggable.from_dlpack, pluggable.to_dlpack
    rows = {}
    try:
        import torch
    except ImportError:
        torch = None
    references = []
    if torch is not None:
        torch.set_num_threads(1)
        theirs = torch.from_numpy(array.copy())
        rows["torch.from_dlpack(np_array)"] = lambda: torch.from_dlpack(array)
        rows["np.from_dlpack(torch_tensor)"] = lambda: np.from_dlpack(theirs)
        references = list(rows)
    rows.update({
        GOAL_ROW: lambda: from_dlpack(t),
        "np.from_dlpack(pluggable_tensor)": lambda: np.from_dlpack(t),
        "pluggable.from_dlpack(np_array)": lambda: from_dlpack(array),
        "from_dlpack(to_dlpack(t)) (legacy capsules)": lambda: from_dlpack(to_dlpack(t)),
    })
    if torch is not None:
        rows["torch.from_dlpack(pluggable_tensor)"] = lambda: torch.from_dlpack(t)
        rows["pluggable.from_dlpack(torch_tensor)"] = lambda: from_dlpack(theirs)
    samples = rounds({name: (lambda fn=fn: time_per_call(fn, args.number))
                      for name, fn in rows.items()}, args.repeats)
    if references:
        reference = min(references, key=lambda name: statistics.median(samples[name]))
    else:
        reference = "pluggable.from_dlpack(np_array)"
    # The reference first, then the other rows in their order.
    ordered = {reference: samples[reference]}
    ordered.update((name, values) for name, values in samples.items() if name != reference)
    report.table(f"Export + import of 1024 float32, {args.repeats} rounds of {args.number} "
                 f"calls, per call", ordered, reference, "µs", 1e6,
                 goal=1.0 if references else None, goal_rows=[GOAL_ROW])
    report.finish(args.write)


if __name__ == "__main__":
    main()
