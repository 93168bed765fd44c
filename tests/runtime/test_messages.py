"""Clear errors where raw or misleading ones used to escape: a stream replaced after a fault,
byte-swapped arrays, out-of-range axes, impossible sizes, closed devices."""
from __future__ import annotations

import numpy as np
import pytest

import pluggable
from pluggable import ops
from pluggable.errors import FailedPreconditionError, InternalError, InvalidArgumentError


def test_a_stream_replaced_after_a_fault_says_so_to_other_holders(faults):
    device = pluggable.get_device("XPU:0")
    stream = device.compute_stream  # what another thread would still hold
    with device.executor.allocate(16) as memory:
        faults("stream:1")
        device.executor.memset(stream, memory, 1)
        with pytest.raises(InternalError, match="injected fault"):
            device.synchronize_stream(stream)
    assert device.compute_stream is not stream
    with pytest.raises(FailedPreconditionError) as info:
        stream.synchronize()
    message = str(info.value)
    assert "compute_stream failed (" in message and "injected fault" in message
    assert "was replaced by a new stream" in message
    assert "was closed; create a new one" not in message
    device.compute_stream.synchronize()  # the device goes on


def test_a_fault_found_by_device_synchronize_is_reported_once(faults):
    device = pluggable.get_device("XPU:0")
    x = pluggable.tensor(np.arange(4, dtype=np.float32), device=device)
    done = ops.add(x, x)
    device.synchronize()
    stream = device.compute_stream
    faults("stream:1")
    ops.add(x, x)  # fails on the stream
    with pytest.raises(InternalError, match="injected fault"):
        device.synchronize()
    faults("")
    assert device.compute_stream is not stream  # replaced at once, not at the next use
    assert done.numpy().tolist() == [0.0, 2.0, 4.0, 6.0]  # finished work reads as it was
    device.synchronize()  # the fault is not reported again
    assert ops.add(x, x).numpy().tolist() == [0.0, 2.0, 4.0, 6.0]


def test_byte_swapped_arrays_are_refused_saying_how_to_convert():
    with pytest.raises(InvalidArgumentError) as info:
        pluggable.tensor(np.arange(3, dtype=">f4"), device="/xpu:0")
    message = str(info.value)
    assert "'>f4' is float32 in the non-native byte order" in message
    assert "astype('float32')" in message
    assert "supported:" not in message


@pytest.mark.parametrize("axis", [2**40, -2**40, 1.5])
def test_argmax_axis_out_of_range(axis):
    with pytest.raises(InvalidArgumentError, match="ArgMax: axis must be integer dimension"):
        ops.argmax(np.ones((2, 3), np.float32), axis=axis)


def test_fill_with_impossible_dims():
    with pytest.raises(InvalidArgumentError, match=r"Fill: dims \[2147483647, 2147483647\] "
                                                   r"describe 4611686014132420609 elements"):
        ops.fill(np.array([2**31 - 1, 2**31 - 1], np.int64), 1.0)
    assert ops.fill([2, 2], 3.0).numpy().tolist() == [[3.0, 3.0], [3.0, 3.0]]


def test_plugin_text_is_bounded_and_escaped():
    from pluggable.base import native as _native

    status = _native.Status()
    status.set(13, "\x1b[2J" + "x" * 5000)
    message = status.message
    assert message.startswith("\\x1b[2J")
    assert message.endswith("[cut: 5004 in all, 2000 shown]")
    assert "\x1b" not in message
