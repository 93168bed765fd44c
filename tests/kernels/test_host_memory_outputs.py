"""Kernels that keep an output in host memory (TensorFlow's ``HostMemory("output")``): the
runtime gives the kernel host memory for it, the kernel writes it during compute, and the
result is a tensor of the op's device whose values are also kept on the host, usable by the
device's kernels, by host-memory inputs of later ops and by ``numpy()``. The XPU's Shape is
one; tests/plugins/kernel_c_plugin.c built with WITH_SHAPE has another (SHAPE_ON_DEVICE: the
same kernel with its output in device memory, as before)."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import pluggable
from pluggable import ops
from pluggable.kernels.registry import registered_kernels

HERE = os.path.dirname(os.path.abspath(__file__))
KERNEL_C_PLUGIN = os.path.join(os.path.dirname(HERE), "plugins", "kernel_c_plugin.c")


def test_the_xpu_registers_shape_with_its_output_in_host_memory(xpu_platform):
    shapes = [r for r in registered_kernels("Shape", "XPU") if r.plugin == xpu_platform.path]
    assert {r.kernel_name for r in shapes} == {"XPU:Shape:int32", "XPU:Shape:int64"}
    assert all(r.host_memory == frozenset({"output"}) for r in shapes)


@pytest.mark.parametrize("out_type, np_type", [("int32", np.int32), ("int64", np.int64)])
def test_shape_on_the_xpu_is_a_device_tensor_with_its_values_on_the_host(xpu_platform,
                                                                         out_type, np_type):
    x = np.zeros((4, 3, 2), np.float32)
    with pluggable.device("/xpu:0"):
        s = ops.shape(pluggable.tensor(x), out_type=out_type)
        scalar = ops.shape(pluggable.tensor(np.float32(1.0)), out_type=out_type)
    assert s.device == "/device:XPU:0" and s.dtype.name == out_type and s.shape == (3,)
    assert s.numpy().dtype == np_type and s.numpy().tolist() == [4, 3, 2]
    assert s._array is not None and s._buffer is not None  # host values + the device copy
    assert not s.numpy().flags.writeable
    assert scalar.shape == (0,) and scalar.numpy().tolist() == []
    # A device kernel reads the device copy; a host-memory input the host values.
    with pluggable.device("/xpu:0"):
        doubled = s * 2
        reshaped = ops.reshape(pluggable.tensor(np.arange(24, dtype=np.float32)), s)
        flipped = ops.reshape(reshaped, s[::-1])
    assert doubled.device == "/device:XPU:0" and doubled.numpy().tolist() == [8, 6, 4]
    assert reshaped.device == "/device:XPU:0"
    assert np.array_equal(reshaped.numpy(), np.arange(24, dtype=np.float32).reshape(4, 3, 2))
    assert flipped.shape == (2, 3, 4)
    # Moved like any device tensor.
    assert s.to("/cpu:0").numpy().tolist() == [4, 3, 2]
    other = s.to("/xpu:1")
    assert other.device == "/device:XPU:1" and other.numpy().tolist() == [4, 3, 2]
    with pluggable.device("/xpu:1"):
        assert (other + 1).numpy().tolist() == [5, 4, 3]


def test_shape_repeated_on_the_xpu_is_a_remembered_plan(xpu_platform):
    """A repeated call runs the plan the first one left (the kernel runs each time, from C)
    and follows its input's shape."""
    from pluggable.eager import dispatch

    with pluggable.device("/xpu:0"):
        x = ops.zeros((3, 5))
        first = ops.shape(x)
        plans = [p for p in dispatch._plans.values() if p.kernel_name == "XPU:Shape:int32"]
        again = [ops.shape(x) for _ in range(3)]
        got = [ops.shape(ops.zeros((n, 2 * n))).numpy().tolist() for n in (1, 2, 3, 2)]
    assert plans, "no plan kept for Shape"
    assert [t.numpy().tolist() for t in (first, *again)] == [[3, 5]] * 4
    assert all(t._array is not None and t.device == "/device:XPU:0" for t in again)
    assert len({id(t._array) for t in (first, *again)}) == 4  # each run its own memory
    assert got == [[1, 2], [2, 4], [3, 6], [2, 4]]


def test_a_shape_on_the_xpu_exports_through_dlpack_as_a_device_tensor(xpu_platform):
    """The host values are not what DLPack hands out: the tensor is the XPU's."""
    with pluggable.device("/xpu:0"):
        s = ops.shape(ops.zeros((5, 7)))
    plain = pluggable.zeros((2,), dtype="int32", device="/xpu:0")
    assert s.__dlpack_device__() == plain.__dlpack_device__()
    for t in (s, plain):  # NumPy takes host memory only: it refuses both alike
        with pytest.raises(RuntimeError, match="Unsupported device"):
            np.from_dlpack(t)


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
    """The plan checks the output against the op's definition, frees the host memory the
    kernel was given, and the host goes on working."""
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
    assert "<Kernel 'ShapeKernel32' for Shape node='Shape'> produced output 0 of shape (3,) " \
           "and type code 3; the op's definition says shape (2,) and int32" in out["error"]
    assert out["after"] == 30.0
