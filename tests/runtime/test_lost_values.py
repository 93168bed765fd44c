"""Values that failed stream work never wrote: after a plugin's stream fails, a tensor that
work was to compute reads as lost (DataLossError, naming the failure), not as the bytes its
memory held before; tensors known finished before the failure read as they were. With the
synchronise-after-every-op mode, the op whose work failed raises it itself."""
from __future__ import annotations

import gc
import os
import subprocess
import sys

import numpy as np
import pytest

import pluggable
from pluggable import _compiled, ops
from pluggable.tensors import dlpack
from pluggable.errors import DataLossError, InternalError


@pytest.fixture
def device():
    d = pluggable.get_device("XPU:0")
    d.synchronize()
    return d


@pytest.fixture
def x(device):
    """[0, 1, 2, 3] on XPU:0, known written (a wait saw it done)."""
    t = pluggable.tensor(np.arange(4, dtype=np.float32), device=device)
    device.synchronize()
    return t


def fail_next_op(faults, device, x):
    """Enqueues an add of ``x`` that the XPU fails on its stream, and a second add that
    reads the first's output; returns both outputs, not yet waited for."""
    faults("stream:1")
    y = ops.add(x, x)
    z = ops.add(y, x)
    faults("")
    return y, z


def test_the_failure_is_reported_once_then_the_outputs_read_as_lost(faults, device, x):
    y, z = fail_next_op(faults, device, x)
    with pytest.raises(InternalError, match="injected fault"):
        y.numpy()
    for lost in (y, z):  # z read y, after the failure: also never computed
        with pytest.raises(DataLossError) as info:
            lost.numpy()
        message = str(info.value)
        assert "float32 tensor of shape (4,) on /device:XPU:0 has no value" in message
        assert "compute_stream failed (" in message and "injected fault" in message
        assert "compute the tensor again" in message
    assert x.numpy().tolist() == [0.0, 1.0, 2.0, 3.0]  # written before: intact
    assert ops.add(x, x).numpy().tolist() == [0.0, 2.0, 4.0, 6.0]  # the device goes on


def test_an_op_on_a_lost_tensor_is_refused_on_every_path(faults, device, x):
    y, _ = fail_next_op(faults, device, x)
    with pytest.raises(InternalError, match="injected fault"):
        device.synchronize()
    # The first call after the stream was replaced takes the Python path and makes a new
    # plan; the second runs that plan in C: both refuse the lost input.
    for _ in range(2):
        with pytest.raises(DataLossError, match="has no value"):
            ops.add(y, x)
    with pytest.raises(DataLossError, match="has no value"):
        y + x  # an operator
    with pytest.raises(DataLossError, match="has no value"):
        ops.reduce_sum(y, axis=0)  # a call with attributes
    with pytest.raises(DataLossError, match="has no value"):
        y.to("/xpu:1")
    with pytest.raises(DataLossError, match="has no value"):
        dlpack.to_dlpack(y)
    v = pluggable.Variable(pluggable.tensor(np.zeros(4, np.float32), device=device))
    with pytest.raises(DataLossError, match="has no value"):
        v.assign(y)
    assert v.numpy().tolist() == [0.0] * 4  # left as it was
    assert ops.add(x, x).numpy().tolist() == [0.0, 2.0, 4.0, 6.0]


def test_work_a_wait_saw_finished_survives_a_later_failure(faults, device):
    x = pluggable.tensor(np.arange(4, dtype=np.float32), device=device)
    synchronized = ops.add(x, x)
    device.synchronize()
    read = ops.multiply(x, x)
    assert read.numpy().tolist() == [0.0, 1.0, 4.0, 9.0]  # a read waits for it: known good
    stream_synchronized = ops.subtract(x, x)
    device.compute_stream.synchronize()
    y, _ = fail_next_op(faults, device, x)
    with pytest.raises(InternalError, match="injected fault"):
        device.synchronize()
    assert synchronized.numpy().tolist() == [0.0, 2.0, 4.0, 6.0]
    assert read.numpy().tolist() == [0.0, 1.0, 4.0, 9.0]
    assert stream_synchronized.numpy().tolist() == [0.0] * 4
    with pytest.raises(DataLossError):
        y.numpy()


def test_work_after_the_last_wait_is_counted_lost_with_the_failure(faults, device, x,
                                                                   stream_delay):
    # The host cannot tell which queued work ran before the failing item: a wait that
    # succeeded is its only evidence. Work queued since the last one goes with the failure.
    stream_delay(20_000)  # the stream stays busy: nothing below is found done early
    faults("stream:2")  # counted as the stream runs them: `before` runs, `y` fails
    before = ops.add(x, x)
    y = ops.add(x, x)
    with pytest.raises(InternalError, match="injected fault"):
        device.synchronize()
    faults("")
    stream_delay(0)
    with pytest.raises(DataLossError, match="has no value"):
        before.numpy()
    with pytest.raises(DataLossError, match="has no value"):
        y.numpy()


def test_a_stream_ledger_counts_writes_and_keeps_the_first_failure():
    ledger = _compiled.Ledger()
    assert (ledger.issued, ledger.good, ledger.failure) == (0, 0, None)
    device = pluggable.get_device("XPU:0")
    buffers = [pluggable.tensor(np.ones(2, np.float32), device=device)._buffer
               for _ in range(3)]
    for b in buffers:
        b.stamp(ledger)
    assert ledger.issued == 3 and ledger.mark() == 3
    ledger.verified(2)
    ledger.verified(1)  # counts only move forward
    assert ledger.good == 2
    assert [b.lost for b in buffers] == [None, None, None]
    ledger.fail("the first failure")
    ledger.fail("a second one")
    assert ledger.failure == "the first failure" and ledger.failed_after == 2
    assert [b.lost for b in buffers] == [None, None, "the first failure"]
    buffers[2].stamp(_compiled.Ledger())  # written again by a healthy stream's work
    assert buffers[2].lost is None
    assert ledger.issue() == 4  # a write to memory that is not a Buffer's (a variable's)
    assert [ledger.lost(n) for n in (2, 3, 4)] == [None, "the first failure", "the first failure"]


def test_a_ledger_refuses_counts_it_never_gave_and_messages_that_are_not_text():
    ledger = _compiled.Ledger()
    with pytest.raises(ValueError, match=r"verified\(5\): only 0 writes were issued"):
        ledger.verified(5)
    with pytest.raises(TypeError, match="message is a str"):
        ledger.fail(42)
    buffer = pluggable.tensor(np.ones(2, np.float32), device="/xpu:0")._buffer
    with pytest.raises(TypeError, match="a pluggable._compiled.Ledger"):
        buffer.stamp(object())


def test_a_variable_that_failed_work_was_to_update_is_lost_until_assigned(faults, device):
    x = pluggable.tensor(np.ones(4, np.float32), device=device)
    v = pluggable.Variable(pluggable.tensor(np.zeros(4, np.float32), device=device))
    v.assign_add(x)
    assert v.numpy().tolist() == [1.0] * 4  # read: the update is known done
    faults("stream:1")
    v.assign_add(x)  # fails on the stream
    faults("")
    with pytest.raises(InternalError, match="injected fault"):
        device.synchronize()
    for use in (v.numpy, v.read_value, lambda: v.assign_add(x), lambda: v.assign_sub(x)):
        with pytest.raises(DataLossError) as info:
            use()
        message = str(info.value)
        assert f"variable {v.name!r} on /device:XPU:0 has no value" in message
        assert "injected fault" in message and "Variable.assign" in message
    v.assign(pluggable.tensor(np.full(4, 7, np.float32), device=device))  # a new value
    v.assign_add(x)
    assert v.numpy().tolist() == [8.0] * 4


def test_a_variable_updated_before_the_last_wait_keeps_its_value(faults, device):
    x = pluggable.tensor(np.ones(4, np.float32), device=device)
    v = pluggable.Variable(pluggable.tensor(np.zeros(4, np.float32), device=device))
    v.assign_add(x)
    device.synchronize()
    faults("stream:1")
    y = ops.add(x, x)  # fails; the variable is not touched
    faults("")
    with pytest.raises(InternalError, match="injected fault"):
        device.synchronize()
    assert v.numpy().tolist() == [1.0] * 4
    with pytest.raises(DataLossError):
        y.numpy()


def test_a_point_the_event_manager_saw_passed_counts_the_writes_before_it(device):
    stream = device.compute_stream
    ledger = stream._ledger
    zeros = pluggable.zeros((4,), device=device)  # a write on the compute stream
    written = ledger.issued
    assert ledger.good < written  # nothing has waited for it yet
    marker = device.executor.event_manager.mark(stream)
    device.executor.event_manager.synchronize()
    assert marker.done and ledger.good >= written
    assert zeros.numpy().tolist() == [0.0] * 4


def test_an_event_waited_for_counts_the_writes_before_it(device):
    stream = device.compute_stream
    ledger = stream._ledger
    zeros = pluggable.zeros((4,), device=device)
    written = ledger.issued
    assert ledger.good < written
    with device.executor.create_event() as event:
        event.record(stream)
        event.synchronize()
    assert ledger.good >= written
    assert zeros.numpy().tolist() == [0.0] * 4


def test_synchronising_after_every_op_names_the_op_whose_work_failed(faults, device, x):
    pluggable.config.set_sync_every_op(True)
    try:
        assert ops.add(x, x).numpy().tolist() == [0.0, 2.0, 4.0, 6.0]  # waited for, fine
        faults("stream:1")
        with pytest.raises(InternalError) as info:
            ops.multiply(x, x)  # raised by the op itself, not by a later read
        faults("")
        message = str(info.value)
        assert message.startswith("Mul on /device:XPU:0: the device work it enqueued failed "
                                  "(found by synchronising after every op): ")
        assert "injected fault" in message and info.value.call == "Mul"
        assert isinstance(info.value.__cause__, InternalError)
        assert ops.add(x, x).numpy().tolist() == [0.0, 2.0, 4.0, 6.0]  # the device goes on
    finally:
        pluggable.config.set_sync_every_op(False)
    assert not pluggable.config.get_sync_every_op()
    faults("stream:1")  # without the mode the failure shows at the next wait instead
    y = ops.multiply(x, x)
    faults("")
    with pytest.raises(InternalError, match="injected fault") as later:
        y.numpy()
    assert not str(later.value).startswith("Mul on")
    del y, info, later  # their tracebacks hold tensors: freed now, not in a later test
    gc.collect()


def test_the_mode_is_on_from_the_environment():
    code = ("import pluggable; from pluggable import ops\n"
            "print(pluggable.config.get_sync_every_op())\n"
            "with pluggable.device('/xpu:0'):\n"
            "    print(ops.add(pluggable.tensor([1.0]), 1.0).numpy().tolist())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "PLUGGABLE_SYNC_EVERY_OP": "1"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "[2.0]"]
