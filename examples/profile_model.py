"""Profile a small model: host dispatch and XPU kernels side by side, saved for TensorBoard,
exported for Perfetto, and summarised in the terminal.

    python examples/profile_model.py [LOGDIR]

The profile lands in LOGDIR/plugins/profile/<time>/<host>.xplane.pb (TensorBoard's profile
plugin reads that layout: `tensorboard --logdir LOGDIR`); trace.json.gz beside it opens in
https://ui.perfetto.dev or chrome://tracing.
"""
import os
import sys
import tempfile

import numpy as np

import pluggable
from pluggable import ops, profiler


def model(x, w1, b1, w2, b2):
    hidden = ops.relu(ops.bias_add(ops.matmul(x, w1), b1))
    return ops.softmax(ops.bias_add(ops.matmul(hidden, w2), b2))


def main(logdir: str) -> None:
    rng = np.random.default_rng(0)
    arrays = [rng.normal(size=(64, 32)), rng.normal(size=(32, 64)), np.zeros(64),
              rng.normal(size=(64, 10)), np.zeros(10)]
    with profiler.Profile(logdir) as session:
        for device in ("/xpu:0", "/xpu:1"):
            with pluggable.device(device):
                params = [pluggable.tensor(a.astype(np.float32)) for a in arrays]
                for step in range(3):
                    # A step marker on the host plane, named in TensorBoard's step view.
                    with profiler.Trace("inference", step_num=step, device=device):
                        out = model(*params)
                out.numpy()
    result = session.result
    # A plugin names its planes as TensorBoard's profile tools read devices ("/device:GPU:0");
    # `devices` says which device each records.
    print("planes:", ", ".join(f"{plane} ({device})" if device != plane else plane
                               for plane, device in result.devices.items()))
    print("saved:", result.path)
    trace = os.path.join(os.path.dirname(result.path), "trace.json.gz")
    result.export_chrome_trace(trace)
    print("Perfetto trace:", trace)
    print(result.summary())
    kernels = [e for e in result.events()
               if result.devices[e.plane].startswith("/device:XPU") and e.name == "MatMul"]
    assert len(kernels) == 2 * 3 * 2, f"expected 12 MatMul kernels, found {len(kernels)}"


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="pluggable-profile-"))
