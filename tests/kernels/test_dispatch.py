"""Placement: device scopes, inputs from other devices, soft and strict placement, the
placement log, kernel failures, and bad input."""
from __future__ import annotations

import asyncio
import logging
import threading

import numpy as np
import pytest

import pluggable
from pluggable import config, ops, raw_ops
from pluggable.eager.dispatch import PlacementWarning
from pluggable.errors import InternalError, InvalidArgumentError, NotFoundError


@pytest.fixture
def strict():
    config.set_soft_device_placement(False)
    yield
    config.set_soft_device_placement(True)


def test_device_names_in_scopes():
    x = np.arange(4, dtype=np.float32)
    for name, expected in [("/xpu:1", "/device:XPU:1"), ("/device:XPU:1", "/device:XPU:1"),
                           ("xpu:1", "/device:XPU:1"), ("XPU", "/device:XPU:0"),
                           ("CPU", "/device:CPU:0"), ("/job:localhost/replica:0/task:0/device:XPU:1",
                                                      "/device:XPU:1")]:
        with pluggable.device(name):
            assert ops.add(x, 1).device == expected, name


def test_scopes_nest_and_restore():
    with pluggable.device("xpu:0"):
        assert ops.square(2.0).device == "/device:XPU:0"
        with pluggable.device("xpu:1"):
            assert ops.square(2.0).device == "/device:XPU:1"
            with pluggable.device("cpu"):
                assert ops.square(2.0).device == "/device:CPU:0"
        assert ops.square(2.0).device == "/device:XPU:0"
    assert ops.square(2.0).device == "/device:CPU:0"


def test_scopes_are_per_thread_and_per_task():
    seen = {}

    def in_thread():
        seen["thread"] = ops.square(3.0).device

    async def task(name, device):
        with pluggable.device(device):
            await asyncio.sleep(0.01)
            seen[name] = ops.square(3.0).device

    async def both():
        await asyncio.gather(task("a", "xpu:0"), task("b", "xpu:1"))

    with pluggable.device("xpu:1"):
        t = threading.Thread(target=in_thread)
        t.start()
        t.join()
    asyncio.run(both())
    assert seen == {"thread": "/device:CPU:0", "a": "/device:XPU:0", "b": "/device:XPU:1"}


def test_without_a_scope_ops_follow_their_inputs():
    on_xpu = pluggable.tensor([1.0, 2.0], device="xpu:1")
    assert (on_xpu + 1).device == "/device:XPU:1"
    assert ops.add(np.ones(2), np.ones(2)).device == "/device:CPU:0"


def test_inputs_on_other_devices_are_copied():
    a = pluggable.tensor(np.arange(3.0), device="xpu:0")
    b = pluggable.tensor(np.ones(3), device="xpu:1")
    c = pluggable.tensor(np.full(3, 2.0))
    with pluggable.device("xpu:1"):
        result = ops.add(ops.multiply(a, c), b)
    assert result.device == "/device:XPU:1"
    assert result.numpy().tolist() == [1.0, 3.0, 5.0]


def test_soft_placement_runs_on_cpu_and_warns_once():
    x = pluggable.tensor(np.array([1 + 2j, 3 - 1j], np.complex64), device="xpu:0")
    pluggable.eager.dispatch._warned.discard(("AddV2", "XPU"))
    with pytest.warns(PlacementWarning, match="AddV2 has no XPU kernel for T=complex64"):
        y = x + x
    assert y.device == "/device:CPU:0"
    assert y.numpy().tolist() == [2 + 4j, 6 - 2j]
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert (x + x).device == "/device:CPU:0"  # said once per op


def test_strict_placement_lists_the_kernels(strict):
    x = pluggable.tensor(np.array([1 + 2j], np.complex64), device="xpu:0")
    with pytest.raises(NotFoundError) as info:
        x + x
    message = str(info.value)
    assert "no kernel for AddV2 on /device:XPU:0 with T=complex64" in message
    assert "XPU (T in {int32, int64, float32, float64})" in message
    assert "set_soft_device_placement" in message


def test_log_device_placement(caplog):
    config.set_log_device_placement(True)
    try:
        with caplog.at_level(logging.INFO, logger="pluggable.placement"):
            with pluggable.device("xpu:0"):
                ops.relu(np.ones(3, np.float32))
            ops.relu(np.ones(3, np.float32))
    finally:
        config.set_log_device_placement(False)
    messages = [r.getMessage() for r in caplog.records if r.name == "pluggable.placement"]
    assert messages == ["Executing op Relu in device /device:XPU:0",
                        "Executing op Relu in device /device:CPU:0"]


def test_list_kernels_is_the_coverage_matrix():
    xpu = config.list_kernels("MatMul", "XPU")
    assert xpu and all(k.device_type == "XPU" and k.op == "MatMul" for k in xpu)
    assert {t for k in xpu for t in k.type_constraints["T"]} == {"float32", "float64",
                                                                 "int32", "int64"}
    assert xpu[0].source.endswith("libxpu_plugin.so")
    cpu = config.list_kernels("MatMul", "CPU")
    assert len(cpu) == 1 and "float32" in cpu[0].type_constraints["T"]
    everything = config.list_kernels()
    assert {k.op for k in everything if k.device_type == "XPU"} >= {
        "AddV2", "Conv2D", "Softmax", "Transpose", "Fill", "ArgMax", "Cast"}
    reduce_host = [k for k in config.list_kernels("Sum", "XPU")]
    assert "reduction_indices" in reduce_host[0].host_memory


def test_kernel_failure_raises_the_kernels_message(faults):
    x = pluggable.tensor(np.ones(4, np.float32), device="xpu:0")
    faults("kernel:1")
    with pytest.raises(InternalError, match="injected fault"):
        ops.exp(x)
    assert ops.exp(x).numpy().tolist() == pytest.approx([np.e] * 4)


def test_asynchronous_kernel_error_is_reported_and_the_device_recovers(faults):
    x = pluggable.tensor(np.array([4, 5], np.int32), device="xpu:0")
    y = pluggable.tensor(np.array([2, 1], np.int32), device="xpu:0")
    pluggable.get_device("xpu:0").synchronize()  # the uploads are not the operation that fails
    faults("stream:1")  # the kernel's work fails when the stream runs it
    result = raw_ops.RealDiv(x=x, y=y)  # `x / y` divides integers in floating point
    # The fault hits the first operation any stream worker runs: wait on the compute stream
    # itself, so that no copy stream's operation can come first.
    device = pluggable.get_device("xpu:0")
    with pytest.raises(InternalError, match="RealDiv: injected fault"):
        device.synchronize_stream(device.compute_stream)
    assert result.shape == (2,)
    faults("")
    ok = raw_ops.RealDiv(x=x, y=pluggable.tensor(np.array([2, 5], np.int32), device="xpu:0"))
    assert ok.numpy().tolist() == [2, 1]


def test_integer_division_by_zero_on_the_xpu_gives_a_value_not_an_error():
    """Like a GPU: no value fails the stream; x / 0 has all bits set (TensorFlow's GPU
    kernels), while the CPU reference raises, as TensorFlow's CPU kernels do."""
    x = pluggable.tensor(np.array([4, -5, 0], np.int32), device="xpu:0")
    y = pluggable.tensor(np.array([0, 0, 0], np.int32), device="xpu:0")
    assert raw_ops.RealDiv(x=x, y=y).numpy().tolist() == [-1, -1, -1]
    with pytest.raises(InvalidArgumentError, match="Integer division by zero"):
        raw_ops.RealDiv(x=pluggable.tensor(np.array([4], np.int32), device="CPU"),
                        y=pluggable.tensor(np.array([0], np.int32), device="CPU"))


@pytest.mark.parametrize("call, error, match", [
    (lambda: ops.sqrt(np.array([4], np.int32)), InvalidArgumentError,
     "Sqrt: T=int32 is not supported"),
    (lambda: ops.add(np.ones((2, 3)), np.ones((4,))), InvalidArgumentError,
     r"AddV2: shapes \(2, 3\) and \(4,\) are not broadcastable"),
    (lambda: ops.matmul(np.ones((2, 3)), np.ones((4, 2))), InvalidArgumentError,
     "MatMul: inner dimensions differ"),
    (lambda: ops.conv2d(np.ones((1, 4, 4, 1)), np.ones((2, 2, 1, 1)), 1, "FULL"),
     InvalidArgumentError, "Conv2D: padding='FULL' is not supported; allowed: 'SAME', 'VALID'"),
    (lambda: ops.reduce_sum(np.ones((2, 3)), axis=2), InvalidArgumentError,
     r"Sum: reduction axis 2 is out of range for a tensor of rank 2"),
    (lambda: ops.add(pluggable.tensor([1.0]), pluggable.tensor([1], dtype="int32")),
     InvalidArgumentError, "AddV2: input y is int32 but T is float32"),
    (lambda: raw_ops.MatMul(a=np.ones((2, 2))), InvalidArgumentError,
     "MatMul: missing input"),
    (lambda: raw_ops.Relu(features=np.ones(2), alpha=1), InvalidArgumentError,
     "unknown argument"),
    (lambda: ops.reshape(np.ones(6), [4, -1]), InvalidArgumentError,
     "cannot reshape a tensor of 6 elements"),
    (lambda: ops.transpose(np.ones((2, 3)), [0, 0]), InvalidArgumentError,
     "not a permutation"),
    (lambda: ops.add(pluggable.tensor([1], dtype="int32"), 2.5), InvalidArgumentError,
     "cannot be converted to int32"),
])
@pytest.mark.parametrize("where", ["CPU", "xpu:0"])
def test_bad_input_names_the_op_and_argument(call, error, match, where):
    with pluggable.device(where):
        with pytest.raises(error, match=match):
            call()


def test_unknown_device_names():
    with pytest.raises(NotFoundError, match="has 2 XPU device"):
        with pluggable.device("xpu:9"):
            pass
    with pytest.raises(InvalidArgumentError, match="cannot parse device name"):
        with pluggable.device("xpu:one"):
            pass
    # A type no plugin provides: the CPU under soft placement (with a PlacementWarning), an
    # error without it (tests/frontend/test_soft_placement_and_warnings.py has the rest).
    pluggable.config.set_soft_device_placement(False)
    try:
        with pytest.raises(NotFoundError, match="no plugin provides device type TPU"):
            with pluggable.device("/device:TPU:0"):
                pass
    finally:
        pluggable.config.set_soft_device_placement(True)


def test_repeated_ops_take_the_fast_path_and_stay_correct(faults):
    from pluggable.eager import dispatch
    from pluggable.kernels import registry as kernels

    x = pluggable.tensor(np.arange(5, dtype=np.float32), device="xpu:0")
    first = ops.add(x, x)
    key = dispatch._plan_key("AddV2", (x, x))
    assert key in dispatch._plans  # remembered after the first run
    second = ops.add(x, x)
    assert second.numpy().tolist() == first.numpy().tolist() == [0, 2, 4, 6, 8]
    assert second._buffer.address != first._buffer.address
    # A closed kernel or replaced streams make the plan stale: the slow path runs again.
    kernels.close_all()
    assert ops.add(x, x).numpy().tolist() == [0, 2, 4, 6, 8]
    device = pluggable.get_device("xpu:0")
    old = device.compute_stream
    bad = pluggable.tensor(np.array([1], np.int32), device="xpu:0")
    divisor = pluggable.tensor(np.array([1], np.int32), device="xpu:0")
    device.synchronize()  # the uploads are not the operation that fails
    faults("stream:1")  # the division's work fails the stream
    raw_ops.RealDiv(x=bad, y=divisor)
    with pytest.raises(InternalError, match="RealDiv: injected fault"):
        device.synchronize_stream(device.compute_stream)  # see the test above
    faults("")
    assert device.compute_stream is not old  # replaced after the failure
    assert ops.add(x, x).numpy().tolist() == [0, 2, 4, 6, 8]
    # Other shapes or dtypes are other plans.
    other = pluggable.tensor(np.ones(3, np.float32), device="xpu:0")
    assert ops.add(other, 1.0).numpy().tolist() == [2, 2, 2]
