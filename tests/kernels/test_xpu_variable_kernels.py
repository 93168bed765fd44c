"""The XPU's resource-variable kernels (xpu_kernels_training.c, written against
kernels_experimental.h): they are the ones that run for Variables on XPU:0, their updates are
ordered on the device's stream even when the stream lags far behind the host, and the
optimizer steps match the same steps on the CPU."""
from __future__ import annotations

import numpy as np
import pytest

import pluggable
from pluggable import config
from pluggable.eager import dispatch
from pluggable.errors import InternalError, InvalidArgumentError

VARIABLE_KERNELS = ["AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp",
                    "ResourceApplyGradientDescent", "ResourceApplyMomentum",
                    "ResourceApplyAdam", "ResourceApplyKerasMomentum", "ResourceApplyRMSProp",
                    "ResourceApplyCenteredRMSProp", "ResourceApplyAdagradV2"]


@pytest.mark.parametrize("op", VARIABLE_KERNELS)
def test_the_xpu_registers_the_variable_kernels(op):
    xpu = config.list_kernels(op, "XPU")
    assert xpu, f"no XPU kernel for {op}"
    assert all(k.source.endswith("libxpu_plugin.so") for k in xpu)


def test_handles_and_reads_are_left_to_the_host_as_in_tensorflow():
    # TensorFlow registers VarHandleOp and ReadVariableOp for every device itself; a plugin
    # registering them would clash there.
    for op in ("VarHandleOp", "ReadVariableOp"):
        assert not [k for k in config.list_kernels(op, "XPU")
                    if k.source.endswith("libxpu_plugin.so")]


def test_variable_updates_run_the_plugin_kernels(faults):
    with pluggable.device("xpu:0"):
        v = pluggable.Variable(np.arange(4, dtype=np.float32))
        delta = pluggable.tensor(np.ones(4, np.float32), device="xpu:0")
        faults("kernel:1")  # the next kernel compute() of the plugin fails
        with pytest.raises(InternalError, match="AssignAddVariableOp: injected fault"):
            v.assign_add(delta, read_value=False)
        faults("")
        v.assign_add(delta, read_value=False)
        assert v.numpy().tolist() == [1, 2, 3, 4]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_a_chain_of_updates_is_ordered_on_a_slow_stream(dtype, stream_delay):
    stream_delay(500)  # every stream operation waits 0.5 ms: the host runs far ahead
    with pluggable.device("xpu:0"):
        v = pluggable.Variable(np.zeros(3, dtype))
        one = pluggable.tensor(np.ones(3, dtype), device="xpu:0")
        for i in range(25):
            v.assign_add(one, read_value=False)
            v.assign_sub(one, read_value=False)
            v.assign_add(one, read_value=False)
        v.assign(v.read_value() * pluggable.tensor(np.asarray(2, dtype), device="xpu:0"),
                 read_value=False)
        assert v.numpy().tolist() == [50, 50, 50]


def test_integer_updates_wrap():
    with pluggable.device("xpu:0"):
        v = pluggable.Variable(np.array([np.iinfo(np.int32).max], np.int32))
        v.assign_add(np.array([1], np.int32), read_value=False)
        assert v.numpy().tolist() == [np.iinfo(np.int32).min]


@pytest.mark.parametrize("dtype", ["float32", "bool", "float16", "complex64"])
def test_assign_copies_any_fixed_size_type(dtype):
    value = np.array([1, 0, 3], dtype)
    with pluggable.device("xpu:0"):
        v = pluggable.Variable(np.zeros(3, dtype))
        v.assign(value, read_value=False)
        np.testing.assert_array_equal(v.numpy(), value)


def test_assign_of_another_shape_needs_validate_shape_false():
    with pluggable.device("xpu:0"):
        v = pluggable.Variable(np.zeros(3, np.float32), shape=[None])
        v.assign(np.arange(5, dtype=np.float32), read_value=False)
        assert v.numpy().tolist() == [0, 1, 2, 3, 4]
        with pytest.raises(InvalidArgumentError):
            v.assign_add(np.ones(3, np.float32))


def _optimizer_run(device, dtype, op, steps, nesterov):
    """`steps` steps of `op` on Variables on `device`; the final variables."""
    rng = np.random.default_rng(7)
    shape = (5, 3)
    grads = [rng.standard_normal(shape).astype(dtype) for _ in range(steps)]
    with pluggable.device(device):
        var = pluggable.Variable(rng.standard_normal(shape).astype(dtype))
        # Slots start above 0: the square roots of the RMSProp and Adagrad steps need it.
        slots = [pluggable.Variable(np.full(shape, 0.25, dtype)) for _ in range(
            {"ResourceApplyGradientDescent": 0, "ResourceApplyMomentum": 1,
             "ResourceApplyAdam": 2, "ResourceApplyKerasMomentum": 1,
             "ResourceApplyRMSProp": 2, "ResourceApplyCenteredRMSProp": 3,
             "ResourceApplyAdagradV2": 1}[op])]
        scalar = lambda x: np.asarray(x, dtype)  # noqa: E731
        for t, g in enumerate(grads, start=1):
            if op == "ResourceApplyGradientDescent":
                dispatch.execute(op, [var, scalar(0.1), g])
            elif op in ("ResourceApplyMomentum", "ResourceApplyKerasMomentum"):
                dispatch.execute(op, [var, slots[0], scalar(0.05), g, scalar(0.9)],
                                 {"use_nesterov": nesterov})
            elif op in ("ResourceApplyRMSProp", "ResourceApplyCenteredRMSProp"):
                dispatch.execute(op, [var, *slots, scalar(0.01), scalar(0.9), scalar(0.5),
                                      scalar(1e-3), g])
            elif op == "ResourceApplyAdagradV2":
                dispatch.execute(op, [var, slots[0], scalar(0.1), scalar(1e-3), g],
                                 {"update_slots": not nesterov})
            else:
                dispatch.execute(op, [var, slots[0], slots[1], scalar(0.9 ** t),
                                      scalar(0.999 ** t), scalar(0.01), scalar(0.9),
                                      scalar(0.999), scalar(1e-7), g],
                                 {"use_nesterov": nesterov})
        return [var.numpy()] + [s.numpy() for s in slots]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op, nesterov", [("ResourceApplyGradientDescent", False),
                                          ("ResourceApplyMomentum", False),
                                          ("ResourceApplyMomentum", True),
                                          ("ResourceApplyAdam", False),
                                          ("ResourceApplyAdam", True),
                                          ("ResourceApplyKerasMomentum", False),
                                          ("ResourceApplyKerasMomentum", True),
                                          ("ResourceApplyRMSProp", False),
                                          ("ResourceApplyCenteredRMSProp", False),
                                          ("ResourceApplyAdagradV2", False),
                                          ("ResourceApplyAdagradV2", True)])
def test_optimizer_steps_on_the_xpu_match_the_cpu(dtype, op, nesterov, stream_delay):
    # (For ResourceApplyAdagradV2, "nesterov" stands for update_slots=False.)
    stream_delay(200)
    on_xpu = _optimizer_run("xpu:0", dtype, op, 12, nesterov)
    on_cpu = _optimizer_run("CPU", dtype, op, 12, nesterov)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == "float32" else dict(rtol=1e-12, atol=1e-12)
    for got, want in zip(on_xpu, on_cpu):
        np.testing.assert_allclose(got, want, **tol)
    assert not np.allclose(on_xpu[0], _optimizer_run("CPU", dtype, op, 0, nesterov)[0])


def test_optimizer_errors_are_reported_before_the_work():
    with pluggable.device("xpu:0"):
        var = pluggable.Variable(np.zeros(3, np.float32))
        with pytest.raises(InvalidArgumentError):
            dispatch.execute("ResourceApplyGradientDescent",
                             [var, np.ones(2, np.float32), np.ones(3, np.float32)])
        with pytest.raises(InvalidArgumentError):
            dispatch.execute("ResourceApplyGradientDescent",
                             [var, np.float32(1), np.ones(4, np.float32)])
        assert var.numpy().tolist() == [0, 0, 0]
