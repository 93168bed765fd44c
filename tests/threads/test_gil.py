"""The GIL during a remembered op's kernel run: kept for small runs, released for large ones
and while a Python host callback is pending (pluggable/_compiled/oprun.c, hostcall.c)."""
from __future__ import annotations

import ctypes
import threading
import time

import numpy as np
import pytest

import pluggable
from pluggable import _compiled, ops
from pluggable.eager import dispatch
from pluggable.errors import InternalError

# Bytes of an AddV2 of n float32 elements: two inputs and one output.
FLOATS_HELD = _compiled.HOLD_GIL_BYTES // (3 * 4)


def plan_of(op_name, *inputs):
    return dispatch._plans[_compiled.plan_key(op_name, inputs)]


@pytest.fixture
def launch_blocking(xpu_control):
    """``launch_blocking()`` makes every XPU kernel wait for its stream for the test."""
    xpu_control.XPU_SetLaunchBlocking.argtypes = [ctypes.c_int]
    xpu_control.XPU_SetLaunchBlocking.restype = None
    yield lambda: xpu_control.XPU_SetLaunchBlocking(1)
    xpu_control.XPU_SetLaunchBlocking(0)


@pytest.fixture
def hold_gil_bytes():
    """``hold_gil_bytes(n)`` sets the threshold for the test; the default afterwards."""
    yield _compiled.hold_gil_bytes
    _compiled.hold_gil_bytes(_compiled.HOLD_GIL_BYTES)


def test_a_plan_knows_the_bytes_of_its_run():
    assert _compiled.hold_gil_bytes() == _compiled.HOLD_GIL_BYTES
    small = pluggable.tensor(np.ones(FLOATS_HELD, np.float32), device="xpu:0")
    large = pluggable.tensor(np.ones(FLOATS_HELD + 1, np.float32), device="xpu:0")
    for x in (small, large):
        ops.add(x, x)
    assert plan_of("AddV2", small, small).run_bytes == 3 * 4 * FLOATS_HELD
    assert plan_of("AddV2", large, large).run_bytes == 3 * 4 * (FLOATS_HELD + 1)
    assert 3 * 4 * FLOATS_HELD <= _compiled.HOLD_GIL_BYTES < 3 * 4 * (FLOATS_HELD + 1)
    assert (ops.add(small, small).numpy() == 2).all()
    assert (ops.add(large, large).numpy() == 2).all()


def test_the_threshold_takes_bytes_or_minus_one(hold_gil_bytes):
    assert hold_gil_bytes(-1) == _compiled.HOLD_GIL_BYTES
    assert hold_gil_bytes(0) == -1
    assert hold_gil_bytes() == 0
    with pytest.raises(ValueError, match=r"hold_gil_bytes\(-2\): give a number of bytes"):
        hold_gil_bytes(-2)
    with pytest.raises(TypeError):
        hold_gil_bytes("16 KiB")
    assert hold_gil_bytes() == 0


def test_host_callbacks_are_counted_until_they_ran(xpu, stream_delay):
    before = _compiled.host_callbacks_pending()
    ran = []
    with xpu.create_stream() as stream:
        stream_delay(50_000)  # the worker reaches the callback 50 ms later
        stream.host_callback(lambda: ran.append(_compiled.host_callbacks_pending()))
        assert _compiled.host_callbacks_pending() == before + 1
        stream.synchronize()
    # Still counted while it ran (counted out only once it gave the GIL back), not after.
    assert ran == [before + 1]
    assert _compiled.host_callbacks_pending() == before


def test_a_callback_the_plugin_refused_is_not_counted(xpu, faults):
    before = _compiled.host_callbacks_pending()
    with xpu.create_stream() as stream:
        faults("host_callback:1")
        with pytest.raises(InternalError, match="could not enqueue the callback"):
            stream.host_callback(lambda: None)
        assert _compiled.host_callbacks_pending() == before


def test_a_small_run_waiting_behind_a_host_callback_does_not_deadlock(run_python):
    # The kernel waits for its stream (launch blocking), where a host callback that needs the
    # GIL (twice: to start, and after its sleep) runs first. A run that kept the GIL would
    # wait forever: the child process would hang and run_python time out.
    code = """
import ctypes, time
import numpy as np
import pluggable
from pluggable import _compiled, ops
device = pluggable.get_device("xpu:0")
x = pluggable.tensor(np.ones(1, np.float32), device=device)
ops.add(x, x)  # the plan
ctypes.CDLL(device.executor.platform.path).XPU_SetLaunchBlocking(1)
ran = []
device.compute_stream.host_callback(lambda: (time.sleep(0.2), ran.append("callback")))
y = ops.add(x, x)
ran.append("op")
print(ran, _compiled.host_callbacks_pending(), y.numpy().tolist(), flush=True)
"""
    result = run_python(code)
    assert result.stdout.strip() == "['callback', 'op'] 0 [2.0]"
    assert result.stderr == ""


def other_thread_ran_during(x, blocked_for):
    """Runs ops.add(x, x) while another Python thread stamps the time every millisecond;
    returns the stamps made while the op was surely inside its kernel run (it waits
    `blocked_for` seconds for its stream), and the op's result."""
    stop, stamps = threading.Event(), []

    def stamp():
        while not stop.is_set():
            stamps.append(time.perf_counter())
            time.sleep(0.001)

    thread = threading.Thread(target=stamp)
    thread.start()
    while not stamps:
        time.sleep(0.001)
    started = time.perf_counter()
    y = ops.add(x, x)
    ended = time.perf_counter()
    stop.set()
    thread.join()
    assert ended - started >= blocked_for  # the run did wait for the delayed stream
    margin = blocked_for / 3
    return [s for s in stamps if started + margin < s < ended - margin], y


def test_a_large_run_lets_other_threads_run_and_a_small_one_keeps_the_gil(
        launch_blocking, stream_delay, hold_gil_bytes):
    small = pluggable.tensor(np.ones(FLOATS_HELD, np.float32), device="xpu:0")
    large = pluggable.tensor(np.ones(FLOATS_HELD + 1, np.float32), device="xpu:0")
    for x in (small, large):
        ops.add(x, x)  # the plans
    # A pending callback (of an earlier test) would make every run release the GIL.
    assert _compiled.host_callbacks_pending() == 0
    launch_blocking()
    stream_delay(300_000)  # each kernel's work waits 0.3 s on the stream, and its run with it
    during_large, y_large = other_thread_ran_during(large, 0.3)
    during_small, y_small = other_thread_ran_during(small, 0.3)
    hold_gil_bytes(-1)  # no run keeps it
    during_released, y_released = other_thread_ran_during(small, 0.3)
    stream_delay(0)
    assert during_large, "no other Python thread ran during a large kernel run"
    assert during_small == []  # a small run keeps the GIL, even while it waits
    assert during_released, "no other Python thread ran with hold_gil_bytes(-1)"
    for y in (y_large, y_small, y_released):
        assert (y.numpy() == 2).all()
