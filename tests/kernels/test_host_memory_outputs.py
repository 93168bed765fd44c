"""Kernels that keep an output in host memory (TensorFlow's ``HostMemory("output")``): the
runtime gives the kernel host memory for it, the kernel writes it during compute, and the
result is a tensor of the op's device whose values are also kept on the host.
tests/plugins/kernel_c_plugin.c built with WITH_SHAPE has such a kernel (SHAPE_ON_DEVICE:
the same kernel with its output in device memory)."""
from __future__ import annotations

import json
import os


HERE = os.path.dirname(os.path.abspath(__file__))
KERNEL_C_PLUGIN = os.path.join(os.path.dirname(HERE), "plugins", "kernel_c_plugin.c")


def run_kc(run_python, path, body):
    result = run_python(f"""
import ctypes, json, warnings
import numpy as np
import pluggable
from pluggable import ops
warnings.simplefilter("error", pluggable.PluginLoadWarning)
pluggable.load_plugin({path!r})
lib = ctypes.CDLL({path!r})
""" + body, env={"PLUGGABLE_DISABLE_AUTOLOAD": "1"})
    return json.loads(result.stdout.strip().splitlines()[-1])


SHAPE_BODY = """
x = np.zeros((6, 5), np.float32)
with pluggable.device("/device:KC:0"):
    s = ops.shape(x)
    wide = ops.shape(x, out_type="int64")
print(json.dumps({"s": s.numpy().tolist(), "device": s.device, "dtype": s.dtype.name,
                  "wide": wide.numpy().tolist(), "wide_dtype": wide.dtype.name,
                  "on_host": lib.KC_ShapeOutputOnHost(), "kept": s._array is not None,
                  "cpu": s.to("/cpu:0").numpy().tolist()}))
"""


def test_a_test_plugin_kernel_with_a_host_memory_output(run_python, build_test_plugin):
    path = build_test_plugin(KERNEL_C_PLUGIN, WITH_SHAPE=True, PLATFORM_NAME="KCS_DEV",
                             DEVICE_TYPE="KC")
    out = run_kc(run_python, path, SHAPE_BODY)
    assert out == {"s": [6, 5], "device": "/device:KC:0", "dtype": "int32", "wide": [6, 5],
                   "wide_dtype": "int64", "on_host": 1, "kept": True, "cpu": [6, 5]}


def test_the_same_kernel_with_its_output_in_device_memory(run_python, build_test_plugin):
    """Without HostMemory("output") the output is device memory, read back by numpy()."""
    path = build_test_plugin(KERNEL_C_PLUGIN, WITH_SHAPE=True, SHAPE_ON_DEVICE=True,
                             PLATFORM_NAME="KCD_DEV", DEVICE_TYPE="KC")
    out = run_kc(run_python, path, SHAPE_BODY)
    assert out == {"s": [6, 5], "device": "/device:KC:0", "dtype": "int32", "wide": [6, 5],
                   "wide_dtype": "int64", "on_host": 0, "kept": False, "cpu": [6, 5]}


def test_a_host_memory_output_of_the_wrong_shape_is_refused(run_python, build_test_plugin):
    """The host checks the output against the op's definition, frees what the kernel
    allocated, and goes on working."""
    path = build_test_plugin(KERNEL_C_PLUGIN, WITH_SHAPE=True, BUG_SHAPE_LENGTH=True,
                             PLATFORM_NAME="KCB_DEV", DEVICE_TYPE="KC")
    out = run_kc(run_python, path, """
from pluggable import errors
x = np.zeros((6, 5), np.float32)
with pluggable.device("/device:KC:0"):
    try:
        ops.shape(x)
        error = None
    except errors.InternalError as exc:
        error = str(exc)
    after = (pluggable.tensor(x) + 1.0).numpy().sum()
print(json.dumps({"error": error, "after": float(after)}))
""")
    assert "kernel ShapeKernel32 for Shape on /device:KC:0 returned an output of type code 3 " \
           "and shape (3,); the op says int32 and (2,)" in out["error"]
    assert out["after"] == 30.0
