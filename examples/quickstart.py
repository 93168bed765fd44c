"""Quickstart: find the devices, put tensors on them, run ops there, read memory statistics.

Run it with `python examples/quickstart.py` after `python -m pip install .`; the reference
XPU plugin that the package installs provides the XPU devices.
"""
import numpy as np

import pluggable
from pluggable import ops


def main() -> None:
    # Every device the plugins provide, and the CPU that is always there.
    for device in pluggable.config.list_physical_devices():
        print(f"{device.name:28} {device.device_type:6} {device.subdevice_type}")
    details = pluggable.config.get_device_details("XPU:0")
    print("XPU:0 is", details["device_name"], "from", details["vendor"])

    # A tensor lives on one device; `.to()` copies it to another.
    x = pluggable.tensor(np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(3, 4),
                         device="/xpu:0")
    w = pluggable.tensor(np.full((4, 2), 0.5, dtype=np.float32), device="/xpu:0")
    print("x is on", x.device, "with shape", x.shape, "and dtype", x.dtype)

    # Ops run on the device of the scope, with TensorFlow's names and semantics.
    results = {}
    for where in ("/cpu:0", "/xpu:0", "/xpu:1"):
        with pluggable.device(where):
            y = ops.relu(ops.matmul(x.to(where), w.to(where)))
        results[where] = y.numpy()  # .numpy() waits for the device, then copies to the host
        print(f"relu(x @ w) on {y.device}:", results[where].ravel())
    assert all(np.allclose(r, results["/cpu:0"]) for r in results.values())

    # Memory: what the device's allocator holds now and at its peak.
    info = pluggable.config.get_memory_info("XPU:0")
    print(f"XPU:0 memory in use: {info['current']} bytes (peak {info['peak']})")


if __name__ == "__main__":
    main()
