"""Remembered runs of ops whose host inputs are constants (`dispatch.execute_with_constants`,
what indexing uses): the first run is checked and planned, later runs take the plan and stay
right, stale plans are dropped; and the CPU's indexing shortcut agrees with the op."""
from __future__ import annotations

import numpy as np
import pytest

import pluggable
from pluggable.eager import dispatch
from pluggable.kernels import registry as kernels
from pluggable.eager.dispatch import execute, execute_with_constants
from pluggable.errors import InvalidArgumentError


def test_a_plan_with_constant_host_inputs_runs_again_on_new_data():
    axis = np.array([1], np.int32)
    x = pluggable.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), device="xpu:0")
    key = ("test-Sum", None, x.dtype.code, x.shape, x._device, (1,))
    dispatch._plans.pop(key, None)
    first = execute_with_constants(key, "Sum", [x, axis], {"keep_dims": False})[0]
    assert first.device == "/device:XPU:0" and first.numpy().tolist() == [3, 12]
    plan = dispatch._plans[key]
    assert isinstance(plan, dispatch._Plan) and [c.tolist() for c in plan.constants] == [[1]]
    y = pluggable.tensor(np.ones((2, 3), np.float32) * 2, device="xpu:0")
    for _ in range(3):
        assert execute_with_constants(key, "Sum", [y, axis], {"keep_dims": False})[0] \
            .numpy().tolist() == [6, 6]
    kernels.close_all()  # the plan goes stale: the slow path runs and plans again
    assert execute_with_constants(key, "Sum", [x, axis], {"keep_dims": False})[0] \
        .numpy().tolist() == [3, 12]
    assert dispatch._plans[key] is not plan


def test_no_plan_on_the_cpu_or_with_bad_input():
    axis = np.array([5], np.int32)
    x = pluggable.tensor(np.ones((2, 3), np.float32), device="xpu:0")
    key = ("test-bad", None, x.dtype.code, x.shape, x._device, (5,))
    with pytest.raises(InvalidArgumentError, match="reduction axis 5 is out of range"):
        execute_with_constants(key, "Sum", [x, axis], {"keep_dims": False})
    assert key not in dispatch._plans
    cpu_key = ("test-cpu", None)
    out = execute_with_constants(cpu_key, "Sum", [np.ones((2, 2), np.float32),
                                                  np.array([0], np.int32)], {})
    assert out[0].numpy().tolist() == [2, 2] and cpu_key not in dispatch._plans


@pytest.mark.parametrize("key", [(slice(1, None), 2), (Ellipsis, None, -1), 0,
                                 (slice(None, None, -2), slice(3, 0, -1))], ids=repr)
def test_cpu_indexing_shortcut_agrees_with_the_op(key):
    from pluggable.eager.operators import strided_slice_args

    x = np.arange(24, dtype=np.int64).reshape(4, 6)
    t = pluggable.tensor(x)
    begin, end, strides, masks = strided_slice_args(key)
    via_op = execute("StridedSlice", [t, np.array(begin), np.array(end), np.array(strides)],
                     masks)[0]
    assert t[key].shape == via_op.shape == x[key].shape
    assert t[key].numpy().tolist() == via_op.numpy().tolist() == x[key].tolist()
    assert not t[key].numpy().flags.writeable
