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
