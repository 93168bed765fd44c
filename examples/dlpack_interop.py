"""Hand tensors to NumPy and PyTorch without copying them, and take theirs back, through
DLPack. A tensor on the XPU (memory only the plugin can address) reaches NumPy as a host copy
made after the XPU finished writing it.

    python examples/dlpack_interop.py
"""
import numpy as np

import pluggable
from pluggable import ops


def main() -> None:
    # pluggable -> NumPy, zero copy: the same memory.
    t = pluggable.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    a = np.from_dlpack(t)
    print("NumPy sees", a.tolist(), "at the tensor's own address:",
          a.ctypes.data == np.from_dlpack(t).ctypes.data)

    # NumPy -> pluggable, zero copy, strides kept: a view of every other column.
    base = np.arange(12, dtype=np.float64).reshape(3, 4)
    view = pluggable.from_dlpack(base[:, ::2])
    print("a strided NumPy view as a tensor:", view.numpy().tolist())
    print("summed on the XPU:", ops.reduce_sum(view.to("/xpu:0")).numpy())

    # XPU -> NumPy: the device's memory is not host-addressable, so NumPy asks for the CPU
    # and gets a copy, taken after the XPU's stream has produced the values.
    with pluggable.device("/xpu:0"):
        y = ops.multiply(pluggable.tensor(np.ones(4, np.float32)), 3.0)
    print("XPU tensor's DLPack device:", y.__dlpack_device__())
    print("copied to the host:", np.from_dlpack(y, device="cpu").tolist())

    try:
        import torch
    except ImportError:
        print("PyTorch is not installed: pip install 'pluggable[interop]' for the rest")
        return
    # The RFC's round trip: pluggable -> torch -> pluggable keeps values, shape and memory.
    t = pluggable.tensor(np.linspace(0, 1, 5, dtype=np.float32))
    pt = torch.from_dlpack(t)
    back = pluggable.from_dlpack(pt)
    print("torch sees", pt.tolist(), "; back in pluggable:", back.numpy().tolist())
    assert pt.data_ptr() == np.from_dlpack(back).ctypes.data


if __name__ == "__main__":
    main()
