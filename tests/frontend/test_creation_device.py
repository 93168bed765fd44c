"""``device=`` on every function that makes a tensor: an explicit device wins over the
``with pluggable.device(...)`` scope, and without one the scope (else the CPU) decides."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import pluggable
from pluggable import ops, random

X = pluggable.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))

MAKERS = [
    ("constant", lambda **d: ops.constant([1.0, 2.0], **d), [1.0, 2.0]),
    ("constant with shape", lambda **d: ops.constant(7, shape=[2], **d), [7, 7]),
    ("convert_to_tensor", lambda **d: ops.convert_to_tensor([3, 4], **d), [3, 4]),
    ("convert_to_tensor of a tensor", lambda **d: ops.convert_to_tensor(X[0], **d),
     [0.0, 1.0, 2.0]),
    ("zeros", lambda **d: ops.zeros([2], **d), [0.0, 0.0]),
    ("ones", lambda **d: ops.ones([2], "int32", **d), [1, 1]),
    ("zeros_like", lambda **d: ops.zeros_like(X[0], **d), [0.0, 0.0, 0.0]),
    ("ones_like", lambda **d: ops.ones_like(X[0], dtype="int64", **d), [1, 1, 1]),
    ("fill", lambda **d: ops.fill([3], 2.5, **d), [2.5, 2.5, 2.5]),
    ("range", lambda **d: ops.range(1, 7, 2, **d), [1, 3, 5]),
    ("eye", lambda **d: ops.eye(2, **d), [[1.0, 0.0], [0.0, 1.0]]),
    ("random.uniform", lambda **d: random.uniform([3], 5, 6, **d), "in [5, 6)"),
    ("random.normal", lambda **d: random.normal([2], 1.0, 0.0, **d), [1.0, 1.0]),
    ("random.truncated_normal", lambda **d: random.truncated_normal([2], 3.0, 0.0, **d),
     [3.0, 3.0]),
    ("random.stateless_uniform", lambda **d: random.stateless_uniform([2], [1, 2], 4, 5, **d),
     "in [4, 5)"),
    ("random.stateless_normal", lambda **d: random.stateless_normal([1], [1, 2], 2.0, 0.0,
                                                                    **d), [2.0]),
    ("random.stateless_truncated_normal",
     lambda **d: random.stateless_truncated_normal([1], [1, 2], 2.0, 0.0, **d), [2.0]),
]


# The XPU has no random kernels: the numbers are made on the CPU (soft placement, which
# warns) and the result moved to the device asked for.
@pytest.mark.filterwarnings("ignore::pluggable.eager.dispatch.PlacementWarning")
@pytest.mark.parametrize("what, make, expected", MAKERS, ids=[m[0] for m in MAKERS])
def test_explicit_device_wins_over_the_scope(what, make, expected):
    assert make().device == "/device:CPU:0"
    assert make(device="/xpu:1").device == "/device:XPU:1"
    with pluggable.device("/xpu:0"):
        assert make().device == "/device:XPU:0"
        on_one = make(device="xpu:1")
        on_cpu = make(device="CPU")
        assert on_one.device == "/device:XPU:1" and on_cpu.device == "/device:CPU:0"
    for made in (on_one, on_cpu):
        values = made.numpy()
        if isinstance(expected, str):  # "in [low, high)"
            low, high = (float(v) for v in expected[4:-1].split(","))
            assert ((low <= values) & (values < high)).all(), values
        else:
            assert values.tolist() == expected


def test_eye_as_tensorflows():
    assert ops.eye(2, 3, dtype="int32").numpy().tolist() == [[1, 0, 0], [0, 1, 0]]
    batch = ops.eye(2, batch_shape=[3], device="/xpu:0")
    assert batch.shape == (3, 2, 2) and batch.numpy().sum() == 6


def test_every_creation_function_takes_device():
    for function in (ops.constant, ops.convert_to_tensor, ops.zeros, ops.ones, ops.zeros_like,
                     ops.ones_like, ops.fill, ops.range, ops.eye, pluggable.tensor,
                     pluggable.zeros, pluggable.empty, pluggable.Variable,
                     *(getattr(random, name) for name in random.__all__ if name != "set_seed")):
        assert "device" in inspect.signature(function).parameters, function


def test_unknown_explicit_devices_raise():
    with pytest.raises(pluggable.errors.NotFoundError, match="numbered from 0"):
        ops.ones([2], device="/xpu:7")
    with pytest.raises(pluggable.errors.InvalidArgumentError):
        ops.zeros([2], device="/cpu:3")


def test_variable_device():
    with pluggable.device("/xpu:0"):
        v = pluggable.Variable([1.0, 2.0], device="/xpu:1")
        assert v.device == "/device:XPU:1" and v.read_value().device == "/device:XPU:1"
        assert pluggable.Variable([1.0]).device == "/device:XPU:0"
    assert v.numpy().tolist() == [1.0, 2.0]
