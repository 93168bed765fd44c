"""Copies between host arrays and tensors in C (`pluggable._compiled.Copier`, tensors._copier):
an upload copies straight from the caller's array when the compute stream is idle, a
download copies into the new array; both wait for nothing when the plugin ran the copy at
once, and fall back to the Python paths otherwise. The results, the caller's array being
free, errors, replaced streams and threads."""
from __future__ import annotations

import numpy as np
import pytest

import pluggable
from pluggable import ops
from pluggable.base import limits
from pluggable.errors import DeadlineExceededError, InternalError


@pytest.fixture(autouse=True)
def fresh_copiers():
    """Each test starts with new copiers (earlier tests' busy streams may have left one not
    asking for a while)."""
    for i in (0, 1):
        pluggable.get_device(f"XPU:{i}")._copier = None


def in_use(device) -> int:
    device.synchronize()
    device.executor.event_manager.synchronize()
    return device.executor.allocator.stats()["bytes_in_use"]


def test_a_small_round_trip_on_an_idle_stream_needs_no_python_plugin_call(plugin_calls):
    device = pluggable.get_device("XPU:0")
    executor = device.executor
    x = pluggable.tensor(np.float32([1, 2]), device=device)
    device.synchronize()
    executor.event_manager.synchronize()
    ring = executor._staging
    head = ring._head if ring is not None else None
    names = plugin_calls(executor)
    y = ops.add(pluggable.tensor(np.float32([3, 4]), device=device), x)
    assert y.numpy().tolist() == [4, 6]
    assert names == []  # the copies, their events and the kernel: all in C
    assert executor.event_manager.pending == 0  # nothing handed to the poller thread
    assert (ring._head if ring is not None else None) == head  # the ring was not needed
    assert y._ready is None and device._copier.stream is device.compute_stream


@pytest.mark.parametrize("count", [1, 1000, 16 << 10, (1 << 20) + 3, 4 << 20])
def test_the_callers_array_is_free_once_tensor_returns(count):
    host = np.arange(count, dtype=np.float32)
    t = pluggable.tensor(host, device="xpu:0")
    host[:] = -1
    back = t.numpy()
    np.testing.assert_array_equal(back, np.arange(count, dtype=np.float32))
    assert back.shape == (count,) and back.dtype == np.float32
    assert back.flags.writeable and back.flags.c_contiguous


@pytest.mark.parametrize("dtype", ["int8", "uint16", "int32", "int64", "float16", "float64",
                                   "complex64", "bool"])
def test_shapes_and_dtypes_come_back_as_they_went(dtype):
    host = (np.arange(24).reshape(2, 3, 4) % 3).astype(dtype)
    t = pluggable.tensor(host, device="xpu:1")
    assert t.shape == (2, 3, 4) and t.dtype.name == dtype
    back = t.numpy()
    assert back.dtype == host.dtype
    np.testing.assert_array_equal(back, host)
    scalar = pluggable.tensor(np.float64(2.5), device="xpu:1")  # 0-d
    assert scalar.shape == () and scalar.numpy() == 2.5


def test_an_upload_behind_queued_work_goes_through_the_staging_ring(stream_delay):
    device = pluggable.get_device("XPU:0")
    x = pluggable.tensor(np.float32([1]), device=device)
    ring = device.executor.staging
    device.synchronize()
    head = ring._head
    stream_delay(20_000)  # the add below keeps the compute stream busy for 20 ms
    try:
        y = ops.add(x, x)
        host = np.float32([5, 6])
        z = pluggable.tensor(host, device=device)  # not waited for: staged
        host[:] = 0
        assert ring._head > head
    finally:
        stream_delay(0)
    assert (y + z).numpy().tolist() == [7, 8]


def test_a_download_waits_for_the_work_that_made_the_tensor(stream_delay):
    device = pluggable.get_device("XPU:0")
    x = pluggable.tensor(np.float64([0.5]), device=device)
    device.synchronize()
    stream_delay(200)
    try:
        for _ in range(30):
            x = x + 1.0
        assert x.numpy().tolist() == [30.5]  # the copy queued behind the adds, waited for
    finally:
        stream_delay(0)


def test_a_download_is_bounded_by_the_deadline(stream_delay):
    device = pluggable.get_device("XPU:1")
    x = pluggable.tensor(np.float32([1]), device=device)
    device.synchronize()
    limits.set_deadline(0.2)
    try:
        stream_delay(2_000_000)
        y = ops.add(x, x)
        with pytest.raises(DeadlineExceededError, match="deadline"):
            y.numpy()
    finally:
        limits.set_deadline(None)
        stream_delay(0)
    assert y.numpy().tolist() == [2]


@pytest.mark.parametrize("fault,call", [("memcpy_htod", "upload"), ("memcpy_dtoh", "download")])
def test_a_refused_copy_raises_the_plugins_words_and_leaks_nothing(faults, fault, call):
    device = pluggable.get_device("XPU:0")
    x = pluggable.tensor(np.int32([7, 8]), device=device)
    before = in_use(device)
    faults(f"{fault}:1")
    with pytest.raises(InternalError, match=f"memcpy_{fault[-4:]}.*injected fault"):
        if call == "upload":
            pluggable.tensor(np.int32([1, 2, 3]), device=device)
        else:
            x.numpy()
    faults("")
    assert in_use(device) == before  # the refused upload's memory went back
    assert x.numpy().tolist() == [7, 8]  # the device goes on
    assert pluggable.tensor(np.int32([4]), device=device).numpy().tolist() == [4]


def test_an_event_the_plugin_cannot_record_is_an_error_not_a_guess(faults):
    device = pluggable.get_device("XPU:0")
    x = pluggable.tensor(np.int32([3]), device=device)
    device.synchronize()
    faults("record_event")  # every record fails: nobody can tell when the copy is done
    with pytest.raises(InternalError, match="record_event.*injected fault"):
        x.numpy()
    faults("")
    assert x.numpy().tolist() == [3]


def test_the_copier_follows_streams_replaced_after_a_failure(faults):
    device = pluggable.get_device("XPU:1")
    x = pluggable.tensor(np.float32([1, 2]), device=device)
    old = device._copier
    faults("stream:1")
    y = ops.add(x, x)
    faults("")
    with pytest.raises(InternalError, match="injected fault"):
        y.numpy()  # the stream's own error, raised by the wait the copier fell back to
    z = pluggable.tensor(np.float32([3, 4]), device=device)
    assert (z + x).numpy().tolist() == [4, 6]
    assert old.stale and device._copier is not old
    assert device._copier.stream is device.compute_stream


def test_threads_uploading_and_downloading_on_one_device(in_threads):
    device = pluggable.get_device("XPU:0")

    def work(seed):
        for i in range(300):
            value = seed * 10_000 + i
            host = np.array([value, -value, i], np.int64)
            t = pluggable.tensor(host, device=device)
            host[:] = 0
            assert t.numpy().tolist() == [value, -value, i], (seed, i)

    in_threads(work, 4)


def test_a_closed_device_refuses_copies_with_its_own_words(run_python):
    code = """
import numpy as np
import pluggable
from pluggable.errors import FailedPreconditionError
d = pluggable.get_device("xpu:0")
t = pluggable.tensor(np.float32([1]), device=d)
assert d._copier
d.close()
for what, fn in (("upload", lambda: pluggable.tensor(np.float32([2]), device=d)),
                 ("download", t.numpy)):
    try:
        fn()
    except FailedPreconditionError as e:
        print(what, "refused:", e)
copier = d._copier  # used directly: it refuses to touch the closed device's handles
print("copier", copier.upload(np.float32([2]), t.dtype), copier.download(1, 4, np.empty(1)),
      copier.stale)
again = pluggable.get_device("xpu:0")
print("new device", again is not d, pluggable.tensor(np.float32([3]), device=again).numpy())
"""
    out = run_python(code).stdout.splitlines()
    assert out[0].startswith("upload refused: /device:XPU:0 is closed")
    assert out[1].startswith("download refused: the tensor's device /device:XPU:0 was closed")
    assert out[2] == "copier None False 1"
    assert out[3] == "new device True [3.]"


def test_a_plugin_without_pageable_async_copies_takes_the_python_path(monkeypatch):
    device = pluggable.get_device("XPU:1")
    monkeypatch.setattr(device, "_copier", None)
    monkeypatch.setattr(type(device.platform), "has_capability", lambda self, flag: False)
    t = pluggable.tensor(np.float32([1, 2]), device=device)
    assert device._copier is False
    assert t.numpy().tolist() == [1, 2]



@pytest.mark.parametrize("placed", ["argument", "scope"])
def test_uploads_that_keep_finding_the_stream_busy_soon_stop_asking(stream_delay, placed):
    """A plugin that never runs work at once (here: every operation starts 200 µs late) never
    shows an idle stream: after 8 misses in a row the copier stops asking (each question
    records an event) for the next 256 uploads, which go through the staging ring. Each
    upload counts once, whether the device is an argument or the scope's."""
    device = pluggable.get_device("XPU:1")
    device._copier = None
    pluggable.tensor(np.float32([0]), device=device)
    device.synchronize()
    copier, ring = device._copier, device.executor.staging
    head = ring._head
    stream_delay(200)
    try:
        if placed == "argument":
            values = [pluggable.tensor(np.float32([i]), device=device) for i in range(20)]
        else:
            with pluggable.device("XPU:1"):
                values = [pluggable.tensor(np.float32([i])) for i in range(20)]
        assert copier.skip_uploads == 256 - 12  # 8 asked, 12 did not
        assert ring._head - head >= 20 * 64  # every one staged
    finally:
        stream_delay(0)
    assert [v.numpy().tolist() for v in values] == [[i] for i in range(20)]


def test_a_copier_is_refused_without_the_plugin_s_functions():
    from pluggable import _compiled
    from pluggable.tensors import tensor as tensors

    device = pluggable.get_device("XPU:0")
    event = device.executor.create_event()
    try:
        with pytest.raises(ValueError, match="Copier: no address for memcpy_htod"):
            _compiled.Copier(device, event, {}, 1, tensors._wait_for_stream)
        with pytest.raises(ValueError, match="Copier: no address for get_event_status"):
            _compiled.Copier(device, event, {"memcpy_htod": 1, "memcpy_dtoh": 1, "record_event": 1,
                                         "get_event_status": None}, 1, tensors._wait_for_stream)
    finally:
        event.close()


def test_a_copier_the_plugin_cannot_give_an_event_is_asked_for_again(faults):
    device = pluggable.get_device("XPU:1")
    pluggable.tensor(np.float32([0]), device=device).numpy()  # the event pool is filled
    device._copier = None
    faults("create_event:1")  # the copier's event is refused, once
    t = pluggable.tensor(np.float32([1, 2]), device=device)  # the Python path instead
    faults("")
    assert device._copier is None  # not given up on for good
    assert t.numpy().tolist() == [1, 2]
    assert device._copier and not device._copier.stale  # made on this use
