"""The host tracer on the XPU: ops, copies, allocations and threads on the /host:CPU plane,
on the plugins' clock, and nothing recorded (no hook left) outside a session."""
from __future__ import annotations

import gc
import threading
import time

import numpy as np
import pytest

import pluggable
from pluggable import _compiled, ops, profiler
from pluggable.devices import allocator
from pluggable.eager import dispatch
from pluggable.devices import executor
from pluggable.kernels import registry as kernels
from pluggable.profiler import ProfilerOptions

HOST_ONLY = ProfilerOptions(device_tracer_level=0)


def _host(result, name=None):
    """Host events; with ``name``, those of that op (named TensorFlow's way, "Relu:Relu") or
    of that name."""
    return [e for e in result.events("/host:CPU")
            if name is None or e.name == name or e.name == f"{name}:{name}"]


def test_ops_are_recorded_with_device_kernel_shapes_and_dtypes(tmp_path):
    x, w = np.ones((4, 8), np.float32), np.ones((8, 3), np.float32)
    before = time.time_ns()
    with profiler.Profile(tmp_path, HOST_ONLY) as session:
        with pluggable.device("/xpu:0"):
            for _ in range(3):  # the first run takes the slow path, the others the plan
                y = ops.matmul(x, w)
        cpu = ops.add(np.ones(2, np.float64), np.ones(2, np.float64))
    after = time.time_ns()
    matmuls = _host(session.result, "MatMul")
    assert len(matmuls) == 3
    for e in matmuls:
        assert e.stats["device"] == "/device:XPU:0"
        assert e.stats["placement"] == "kernel" and e.stats["kernel"].startswith("XPU:MatMul")
        assert (e.stats["input_shapes"], e.stats["input_dtypes"]) == ("[4, 8];[8, 3]",
                                                                      "float32,float32")
        assert before <= e.start_ns and e.start_ns + e.duration_ns <= after
        assert e.line == threading.current_thread().name
    (add,) = _host(session.result, "AddV2")
    assert (add.stats["device"], add.stats["placement"], add.stats["input_dtypes"]) == \
        ("/device:CPU:0", "cpu", "float64,float64")
    assert y.numpy().tolist() == [[8.0] * 3] * 4 and cpu.numpy().tolist() == [2.0, 2.0]


def test_a_call_with_attributes_is_recorded_alike_from_its_plan_and_the_general_path(tmp_path):
    x = pluggable.tensor(np.ones((4, 8), np.float32), device="/xpu:0")
    ops.reduce_sum(x, axis=0)  # leaves the plan of axis 0
    with profiler.Profile(tmp_path, HOST_ONLY) as session:
        planned = ops.reduce_sum(x, axis=0)  # the remembered plan, run in C
        general = ops.reduce_sum(x, axis=1, keepdims=True)  # the general path
    assert planned.numpy().tolist() == [4.0] * 8 and general.numpy().tolist() == [[8.0]] * 4
    sums = _host(session.result, "Sum")
    assert len(sums) == 2
    for e in sums:
        assert (e.stats["device"], e.stats["placement"]) == ("/device:XPU:0", "kernel")
        assert (e.stats["input_shapes"], e.stats["input_dtypes"]) == ("[4, 8];[]", "float32,int32")
    assert sums[0].stats["kernel"] == sums[1].stats["kernel"] and \
        sums[0].stats["kernel"].startswith("XPU:Sum")


def test_indexing_is_recorded_from_its_plan_and_the_general_path(tmp_path):
    x = pluggable.tensor(np.arange(16, dtype=np.float32).reshape(4, 4), device="/xpu:0")
    x[1:3]  # leaves the plan of this index
    with profiler.Profile(tmp_path, HOST_ONLY) as session:
        planned = x[1:3]  # the remembered plan
        general = x[::2]  # first seen: the general path
    assert planned.numpy().tolist() == [[4, 5, 6, 7], [8, 9, 10, 11]]
    assert general.numpy().tolist() == [[0, 1, 2, 3], [8, 9, 10, 11]]
    slices = _host(session.result, "StridedSlice")
    assert [(e.stats["device"], e.stats["placement"], e.stats["input_shapes"]) for e in slices] \
        == [("/device:XPU:0", "kernel", "[4, 4];[1];[1];[1]")] * 2
    assert slices[0].stats["kernel"] == slices[1].stats["kernel"]


def test_copies_are_recorded_with_bytes_direction_and_stream(tmp_path):
    data = np.arange(256, dtype=np.float32)
    with profiler.Profile(tmp_path, HOST_ONLY) as session:
        t = pluggable.tensor(data, device="/xpu:0")
        u = t.to("/xpu:1")
        back = u.numpy()
    assert (back == data).all()
    copies = [(e.name, e.stats["device"], e.stats["stream"], e.stats["bytes"])
              for e in _host(session.result) if e.name.startswith("Memcpy")]
    # Small copies run on the compute stream (no stream dependency); a peer copy on the
    # destination's device-to-device stream.
    assert copies == [("MemcpyH2D", "/device:XPU:0", "compute", 1024),
                      ("MemcpyD2D", "/device:XPU:1", "device_to_device", 1024),
                      ("MemcpyD2H", "/device:XPU:1", "compute", 1024)]


def test_allocations_track_the_allocators_bytes_in_use(tmp_path):
    device = pluggable.get_device("XPU:0")
    bfc = device.executor.allocator
    pluggable.tensor([0.0], device=device)  # the staging ring's block of the host pool
    # Earlier tests' garbage is freed now, not inside the session: dropped objects, kernel
    # instances whose delete_func gives back device tensors, frees waiting on device work.
    gc.collect()
    kernels.flush_releases()
    for name in ("XPU:0", "XPU:1"):
        other = pluggable.get_device(name)
        other.synchronize()
        other.executor.flush_releases()
        other.executor.event_manager.synchronize()
    with profiler.Profile(tmp_path, HOST_ONLY) as session:
        kept = pluggable.tensor(np.ones(1000, np.float32), device="/xpu:0")  # 4000 bytes
        dropped = ops.relu(kept)
        del dropped
        gc.collect()
        device.synchronize()
        in_use = bfc.stats()["bytes_in_use"]
    events = [e for e in _host(session.result)
              if e.name in ("MemoryAllocation", "MemoryDeallocation")
              and e.stats["device"] == "/device:XPU:0"
              and e.line == threading.current_thread().name]
    assert [e.name for e in events] == ["MemoryAllocation", "MemoryAllocation",
                                        "MemoryDeallocation"]
    # chunks: 256-rounded
    assert [e.stats["allocation_bytes"] for e in events] == [4096, 4096, 4096]
    assert events[0].stats["allocator_name"] == bfc.name
    assert events[-1].stats["bytes_allocated"] == in_use
    assert events[1].stats["bytes_allocated"] == in_use + 4096
    assert events[-1].stats["peak_bytes_in_use"] == in_use + 4096
    del kept


def test_each_python_thread_has_its_own_line(tmp_path):
    def work():
        with pluggable.device("/xpu:1"):
            ops.relu(np.ones(8, np.float32))

    with profiler.Profile(tmp_path, HOST_ONLY) as session:
        worker = threading.Thread(target=work, name="profiled-worker")
        worker.start()
        worker.join()
        work()
    lines = {e.line for e in _host(session.result, "Relu")}
    assert lines == {"profiled-worker", threading.current_thread().name}


def test_no_hook_is_left_outside_a_session(tmp_path):
    modules = (dispatch, executor, allocator)
    assert all(m._tracer is None for m in modules) and _compiled.get_tracer() is None
    profiler.start(tmp_path, HOST_ONLY)
    try:
        assert all(m._tracer is not None for m in modules)
        assert _compiled.get_tracer() is dispatch._tracer  # the C per-op path records too
    finally:
        profiler.stop(save=False)
    assert all(m._tracer is None for m in modules) and _compiled.get_tracer() is None
    with pluggable.device("/xpu:0"):
        ops.relu(np.ones(4, np.float32))  # after the session: not recorded anywhere


def test_host_tracer_level_zero_records_nothing(tmp_path):
    with profiler.Profile(tmp_path, ProfilerOptions(host_tracer_level=0,
                                                    device_tracer_level=0)) as session:
        with pluggable.device("/xpu:0"):
            ops.relu(np.ones(4, np.float32))
        with profiler.Trace("ignored"):
            pass
    assert session.result.planes == []


def test_an_op_that_fails_is_still_recorded(tmp_path):
    with profiler.Profile(tmp_path, HOST_ONLY) as session:
        with pytest.raises(pluggable.errors.InvalidArgumentError):
            ops.matmul(np.ones((2, 3), np.float32), np.ones((2, 3), np.float32))
    (event,) = _host(session.result, "MatMul")
    # it failed before dispatch chose a device: only its launch id
    assert list(event.stats) == ["correlation_id"] and event.stats["correlation_id"] > 0


def _traced_helper(n):
    return sum(_traced_leaf(i) for i in range(n))


def _traced_leaf(i):
    return i * 2


def test_python_tracer_records_python_calls_on_the_host_plane(tmp_path):
    import sys

    def worker_body():
        _traced_leaf(7)

    with profiler.Profile(tmp_path, ProfilerOptions(python_tracer_level=1,
                                                    device_tracer_level=0)) as session:
        assert _traced_helper(3) == 6
        worker = threading.Thread(target=worker_body, name="python-traced")
        worker.start()
        worker.join()
    assert sys.getprofile() is None  # the session took its hook away
    line = f"test_host_tracer.py:{_traced_helper.__code__.co_firstlineno}"
    (helper,) = [e for e in _host(session.result) if e.name == f"${line} _traced_helper"]
    leaves = [e for e in _host(session.result) if e.name.endswith(" _traced_leaf")]
    mine = [e for e in leaves if e.line == helper.line]
    assert len(mine) == 3 and helper.line == threading.current_thread().name
    # Calls nest: each leaf lies inside the helper that called it.
    assert all(helper.start_ns <= e.start_ns and e.start_ns + e.duration_ns
               <= helper.start_ns + helper.duration_ns for e in mine)
    assert [e.line for e in leaves if e not in mine] == ["python-traced"]
    with profiler.Profile(tmp_path, HOST_ONLY) as quiet:  # level 0: no Python calls
        _traced_helper(1)
    assert not [e for e in _host(quiet.result) if e.name.startswith("$")]


def test_python_tracer_needs_the_host_tracer():
    with pytest.raises(pluggable.errors.InvalidArgumentError, match="host_tracer_level >= 1"):
        ProfilerOptions(python_tracer_level=1, host_tracer_level=0)


def test_ops_of_the_hosts_own_kernels_are_recorded(tmp_path):
    """Variable ops the host runs itself (VarHandleOp has no plugin kernel) are recorded
    with the device they ran for."""
    with profiler.Profile(tmp_path, HOST_ONLY) as session:
        with pluggable.device("/xpu:0"):
            variable = pluggable.Variable(np.ones(3, np.float32))
        on_cpu = pluggable.Variable(np.zeros(2, np.float32))
    (xpu, cpu) = _host(session.result, "VarHandleOp")
    assert (xpu.stats["device"], xpu.stats["placement"]) == ("/device:XPU:0", "cpu")
    assert cpu.stats["device"] == "/device:CPU:0"
    assert variable.numpy().tolist() == [1.0] * 3 and on_cpu.numpy().tolist() == [0.0] * 2


def test_ops_run_by_the_hosts_own_kernels_are_recorded(tmp_path):
    """A variable read on the XPU, which registers no ReadVariableOp (the host's kernel runs
    it), is an op on the host plane; and a gradient tape's step records under a session."""
    with pluggable.device("/xpu:0"):
        v = pluggable.Variable(np.ones((2, 2), np.float32))
        x = pluggable.constant(np.ones((2, 2), np.float32))
        with profiler.Profile(tmp_path, HOST_ONLY) as session:
            with pluggable.GradientTape() as tape:
                loss = ops.reduce_sum(ops.matmul(x, v))
            grad = tape.gradient(loss, v)
    (read,) = _host(session.result, "ReadVariableOp")
    assert read.stats["device"] == "/device:XPU:0" and "kernel" not in read.stats
    assert {e.name.split(":")[0] for e in _host(session.result)} >= {"MatMul", "Sum", "OnesLike"}
    assert grad.numpy().tolist() == [[2.0, 2.0], [2.0, 2.0]]
