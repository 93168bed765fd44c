"""The host used from several Python threads at once."""
from __future__ import annotations

import threading

import numpy as np


def test_threads_allocate_copy_and_free_concurrently(xpu, xpu1):
    errors = []
    barrier = threading.Barrier(8)

    def work(seed):
        try:
            executor = xpu if seed % 2 else xpu1
            rng = np.random.default_rng(seed)
            barrier.wait()
            with executor.create_stream() as stream:
                for _ in range(40):
                    size = int(rng.integers(1, 1 << 16))
                    data = rng.integers(0, 256, size, dtype=np.uint8)
                    out = np.zeros(size, np.uint8)
                    with executor.allocate(size) as memory, executor.create_event() as event:
                        executor.memcpy_htod(stream, memory, data)
                        event.record(stream)
                        event.synchronize()
                        executor.memcpy_dtoh(stream, out, memory)
                        stream.synchronize()
                    assert (out == data).all()
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a worker thread hung"
    assert errors == []


def test_callbacks_from_plugin_threads_touch_python_state(xpu):
    counter = {"n": 0}
    lock = threading.Lock()

    def bump():
        with lock:
            counter["n"] += 1

    streams = [xpu.create_stream() for _ in range(4)]
    for _ in range(50):
        for stream in streams:
            stream.host_callback(bump)
    xpu.synchronize_all_activity()
    for stream in streams:
        stream.close()
    assert counter["n"] == 200


def test_interpreter_exits_cleanly_with_work_in_flight(run_python):
    code = """
import time, pluggable
ex = pluggable.get_platform("REF_XPU").executor(0)
stream = ex.create_stream()
ran = []
stream.host_callback(lambda: (time.sleep(0.2), ran.append(1), print("callback ran", flush=True)))
memory = ex.allocate(1 << 20)
print("exiting", flush=True)
"""
    result = run_python(code)
    assert result.stdout.split("\n")[:2] == ["exiting", "callback ran"]
    assert result.stderr == ""


def test_threads_round_trip_tensors_concurrently():
    import pluggable
    from pluggable import config

    pluggable.tensor([0], device="xpu:0"), pluggable.tensor([0], device="xpu:1")
    import gc

    gc.collect()
    for manager in (pluggable.get_device(f"xpu:{i}").executor.event_manager for i in (0, 1)):
        manager.synchronize()
    before = [config.get_memory_info(f"XPU:{i}")["current"] for i in (0, 1)]
    errors = []

    def work(seed):
        try:
            rng = np.random.default_rng(seed)
            for _ in range(25):
                values = rng.standard_normal(int(rng.integers(1, 50_000))).astype(np.float32)
                first = pluggable.tensor(values, device=f"xpu:{seed % 2}")
                second = first.to(f"xpu:{(seed + 1) % 2}")
                assert (second.numpy() == values).all()
                assert (first.to("cpu").numpy() == values).all()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a worker thread hung"
    assert errors == []
    gc.collect()
    for i in (0, 1):
        pluggable.get_device(f"xpu:{i}").executor.event_manager.synchronize()
    after = [config.get_memory_info(f"XPU:{i}")["current"] for i in (0, 1)]
    # Nothing the threads allocated is left (an earlier test's leftovers may have gone).
    assert all(a <= b for a, b in zip(after, before)), (before, after)


def test_interpreter_exits_cleanly_with_tensors_in_flight(run_python):
    code = """
import numpy as np, pluggable, ctypes
ctypes.CDLL(pluggable.get_platform("REF_XPU").path).XPU_SetStreamDelayUs(20000)
tensors = [pluggable.tensor(np.full(1000, i), device="xpu:0").to("xpu:1") for i in range(5)]
print("exiting", flush=True)
"""
    result = run_python(code)
    assert result.stdout.strip() == "exiting"
    assert result.stderr == ""


def test_threads_share_the_per_op_fast_path():
    import pluggable
    from pluggable import ops

    x = pluggable.tensor(np.arange(8, dtype=np.float32), device="xpu:0")
    ops.add(x, x)  # the plan exists before the threads start
    errors = []

    def work():
        try:
            for i in range(300):
                y = ops.add(x, pluggable.tensor(np.full(8, i, np.float32), device="xpu:0"))
                assert (y.numpy() == np.arange(8) + i).all()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads) and errors == []
