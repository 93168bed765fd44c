"""Small XPU operations on an idle stream run on the calling thread (XPU_INLINE_BYTES,
plugins/xpu/README.md): the results, the order of work on a stream, stream errors and the
profile are those of the same work run by the stream's worker."""
from __future__ import annotations

import ctypes
import json

import numpy as np
import pytest

import pluggable
from pluggable import ops, profiler
from pluggable.errors import InternalError
from pluggable.profiler import ProfilerOptions


@pytest.fixture
def inline_bytes(xpu_control):
    """``inline_bytes(n)`` sets XPU_SetInlineBytes for the test; the default afterwards."""
    xpu_control.XPU_SetInlineBytes.argtypes = [ctypes.c_uint64]
    xpu_control.XPU_SetInlineBytes.restype = None
    yield xpu_control.XPU_SetInlineBytes
    xpu_control.XPU_SetInlineBytes(64 * 1024)


def _chain(device):
    """A queued large MatMul, then small ops that read its result, then a download."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((256, 256)).astype(np.float32)
    b = rng.standard_normal((256, 256)).astype(np.float32)
    x, y = pluggable.tensor(a, device=device), pluggable.tensor(b, device=device)
    big = ops.matmul(x, y)  # 768 KiB of work: always the worker's
    small = big[:2, :3] + 1.0
    for _ in range(20):
        small = small * 1.0 + 0.0
    return small.numpy(), (a @ b)[:2, :3] + 1.0


@pytest.mark.parametrize("limit", [0, 64 * 1024, 1 << 30])
def test_results_and_order_do_not_depend_on_where_work_runs(inline_bytes, limit):
    inline_bytes(limit)
    got, want = _chain("xpu:0")
    np.testing.assert_allclose(got, want, rtol=1e-4)


def test_small_ops_behind_queued_work_wait_for_it():
    # A MatMul of 1024^2 takes milliseconds on the worker: the small ops issued right after it
    # find the stream busy and queue behind it, in order.
    a = np.full((1024, 1024), 0.5, np.float32)
    x = pluggable.tensor(a, device="xpu:0")
    total = ops.matmul(x, x)[:1, :4]
    for _ in range(50):
        total = total + 1.0
    assert total.numpy().tolist() == [[306.0] * 4]


def test_threads_issuing_small_ops_to_one_stream(in_threads):
    x = pluggable.tensor(np.arange(8, dtype=np.float32), device="xpu:0")

    def work(k):
        for _ in range(200):
            out = x + float(k)
        assert out.numpy().tolist() == (np.arange(8) + k).tolist()

    in_threads(work, 4)


def test_an_inline_operation_fails_the_stream_as_the_worker_would(faults):
    device = pluggable.get_device("xpu:0")
    x = pluggable.tensor(np.array([4, 5], np.int32), device=device)
    device.synchronize()
    faults("stream:1")
    ops.add(x, x)  # the launch itself succeeds: the failure belongs to the stream
    faults("")
    with pytest.raises(InternalError, match="AddV2: injected fault"):
        device.synchronize_stream(device.compute_stream)
    assert ops.add(x, x).numpy().tolist() == [8, 10]  # on the replacement stream


def test_inline_kernels_are_on_the_compute_streams_timeline(tmp_path):
    x = pluggable.tensor(np.ones(16, np.float32), device="xpu:0")
    ops.add(x, x)
    with profiler.Profile(tmp_path, ProfilerOptions(host_tracer_level=0)) as session:
        for _ in range(5):
            ops.add(x, x)
    kernels = [e for e in session.result.events(plane="/device:GPU:0") if e.name == "AddV2"]
    assert len(kernels) == 5
    assert {e.line for e in kernels} == {"compute"}
    assert all(e.duration_ns > 0 for e in kernels)


@pytest.mark.parametrize("text", ["", "1k", "-1", "1073741825"])
def test_an_invalid_inline_size_stops_the_plugin_with_a_reason(run_python, text):
    result = run_python("import pluggable; pluggable.get_device('XPU:0')",
                        env={"XPU_INLINE_BYTES": text}, check=False)
    assert result.returncode != 0
    assert (f"XPU_INLINE_BYTES='{text}' is not valid: expected a whole number of bytes from "
            "0 to 1073741824") in result.stderr


def test_the_environment_sets_the_size(run_python):
    script = ("import json, numpy as np, pluggable\n"
              "x = pluggable.tensor(np.ones(3, np.float32), device='xpu:0')\n"
              "print(json.dumps((x + x).numpy().tolist()))\n")
    for text in ("0", "1048576"):
        result = run_python(script, env={"XPU_INLINE_BYTES": text})
        assert json.loads(result.stdout.splitlines()[-1]) == [2.0, 2.0, 2.0]


def test_host_and_device_timelines_agree(tmp_path):
    """An inline kernel runs inside its host dispatch: on the two planes' common clock (each
    profiler scales its own cheap counter to CLOCK_REALTIME) the device event lies within the
    host event, early and late in a session."""
    import time

    x = pluggable.tensor(np.ones(16, np.float32), device="xpu:0")
    ops.add(x, x)
    with profiler.Profile(tmp_path) as session:
        for _ in range(3):
            ops.add(x, x)
        time.sleep(0.3)
        for _ in range(3):
            ops.add(x, x)
    host = [e for e in session.result.events(plane="/host:CPU") if e.name == "AddV2:AddV2"]
    device = [e for e in session.result.events(plane="/device:GPU:0") if e.name == "AddV2"]
    assert len(host) == len(device) == 6
    slack = 2_000  # ns: the two profilers' clock pairs are read at different moments
    for launch, kernel in zip(sorted(host, key=lambda e: e.start_ns),
                              sorted(device, key=lambda e: e.start_ns)):
        assert launch.start_ns - slack <= kernel.start_ns
        assert kernel.start_ns + kernel.duration_ns <= launch.start_ns + launch.duration_ns + slack


@pytest.mark.parametrize("direction", ["memcpy_htod", "memcpy_dtoh"])
def test_a_host_copy_of_any_size_on_an_idle_stream_is_done_when_the_call_returns(direction):
    # The host waits for such a copy whoever runs it; run in place it needs no hand-off.
    device = pluggable.get_device("xpu:0")
    executor = device.executor
    stream = device.compute_stream
    host = np.arange(1 << 20, dtype=np.float32)  # 4 MiB: 64 times XPU_INLINE_BYTES
    memory = executor.allocate(host.nbytes)
    event = executor.create_event()
    try:
        executor.sync_memcpy_htod(memory, host)
        device.synchronize()
        target = np.zeros_like(host)
        address = (target if direction == "memcpy_dtoh" else host).ctypes.data
        args = ((address, memory._ref) if direction == "memcpy_dtoh" else (memory._ref, address))
        executor._copy(direction, stream, host.nbytes, stream._handle, *args, host.nbytes)
        event.record(stream)
        assert event.status() == pluggable.devices.event.EventStatus.COMPLETE  # no wait at all
        if direction == "memcpy_dtoh":
            np.testing.assert_array_equal(target, host)
    finally:
        event.close()
        memory.close()
