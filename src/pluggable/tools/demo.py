"""``python -m pluggable demo``: the main job on whatever plugins are installed (the reference
XPU by default). It lists the devices, runs one small network on every device and on the CPU,
checks that the results agree, and prints how long each device took."""
from __future__ import annotations

import time
from typing import Dict, List, Sequence, Tuple

import numpy as np

BATCH, FEATURES, HIDDEN, CLASSES = 256, 256, 512, 10
RUNS = 30


def _network(x, w1, b1, w2, b2):
    from .. import ops

    hidden = ops.relu(ops.bias_add(ops.matmul(x, w1), b1))
    return ops.softmax(ops.bias_add(ops.matmul(hidden, w2), b2))


def _weights(seed: int = 0) -> List[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(BATCH, FEATURES)).astype(np.float32),
            rng.normal(scale=FEATURES ** -0.5, size=(FEATURES, HIDDEN)).astype(np.float32),
            np.zeros(HIDDEN, np.float32),
            rng.normal(scale=HIDDEN ** -0.5, size=(HIDDEN, CLASSES)).astype(np.float32),
            np.zeros(CLASSES, np.float32)]


def _progress(items: Sequence, description: str):
    """A progress bar (tqdm) on a terminal; the plain items elsewhere."""
    import sys

    if not sys.stderr.isatty():
        return items
    try:
        from tqdm import tqdm
    except ImportError:
        return items
    return tqdm(items, desc=description, leave=False, unit="run")


def run_on(device: str, arrays: List[np.ndarray]) -> Tuple[np.ndarray, List[float]]:
    """The network's output on ``device`` and the seconds each run took (inputs on the
    device, output read back to the host)."""
    import pluggable

    with pluggable.device(device):
        tensors = [pluggable.tensor(a, device=device) for a in arrays]
        result = _network(*tensors).numpy()  # the first run plans kernels and warms memory
        times = []
        for _ in _progress(range(RUNS), device):
            start = time.perf_counter()
            out = _network(*tensors).numpy()
            times.append(time.perf_counter() - start)
    assert np.array_equal(out, result), f"{device} gave different results on repeated runs"
    return result, times


def main(profile_dir: str = "") -> int:
    """Runs the demo and profiles one run per device into ``profile_dir`` (default: ``logs``
    under the current folder); prints the saved profile, its Perfetto trace and how to see
    them."""
    import os

    import pluggable

    devices = pluggable.config.list_physical_devices()
    print("Devices:")
    for d in devices:
        details = pluggable.config.get_device_details(d)
        print(f"  {d.name:28} {d.subdevice_type:12} {details.get('device_name', '')}")
    arrays = _weights()
    flops = 2 * BATCH * (FEATURES * HIDDEN + HIDDEN * CLASSES)
    print(f"\nNetwork: softmax(relu(x @ W1 + b1) @ W2 + b2), x {BATCH}x{FEATURES}, "
          f"hidden {HIDDEN}, {RUNS} runs per device\n")
    results: Dict[str, Tuple[np.ndarray, List[float]]] = {}
    for d in devices:
        name = d.name.replace("/physical_device:", "/device:")
        results[name] = run_on(name, arrays)
    reference = results["/device:CPU:0"][0]
    rows = []
    ok = True
    for name, (out, times) in results.items():
        agrees = bool(np.allclose(out, reference, rtol=1e-4, atol=1e-6))
        ok &= agrees
        median = float(np.median(times))
        rows.append((name, f"{median * 1e3:.3f}", f"{min(times) * 1e3:.3f}",
                     f"{flops / median / 1e9:.2f}", "yes" if agrees else "NO"))
    headers = ("device", "median ms", "min ms", "GFLOP/s", "agrees with CPU")
    widths = [max(len(str(r[i])) for r in rows + [headers]) for i in range(len(headers))]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))
    if not ok:
        print("\nSome devices disagree with the CPU: see the rows marked NO.")
        return 1
    print("\nEvery device agrees with the CPU.")

    from .. import profiler

    with profiler.Profile(profile_dir or None) as session:
        for d in devices:
            name = d.name.replace("/physical_device:", "/device:")
            with pluggable.device(name), profiler.Trace("network", device=name):
                _network(*[pluggable.tensor(a, device=name) for a in arrays]).numpy()
    result = session.result
    logdir = session.logdir
    trace = result.export_chrome_trace(os.path.join(os.path.dirname(result.path),
                                                    "trace.json.gz"))
    print(f"\nA profile of one run per device: {result.path}")
    print(f"Its Perfetto trace: {trace}")
    print("See them:")
    print(f"  python -m pluggable profile-summary {logdir}    (a table, nothing to install)")
    print(f"  pip install xprof; xprof --logdir {logdir} --port 6006    (then "
          f"http://localhost:6006; or pip install tensorboard tensorboard-plugin-profile; "
          f"tensorboard --logdir {logdir}, Profile tab)")
    print(f"  open {trace} at https://ui.perfetto.dev")
    return 0
