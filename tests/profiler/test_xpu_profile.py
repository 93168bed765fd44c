"""Profiling real work on the XPU: its own profiler's planes beside the host plane, every
kernel once on its device's compute line after its host dispatch, copies on the copy
streams' lines, the saved file equal to the result, the XPU's profiler faults, and 1000
sessions without leaks."""
from __future__ import annotations

import gc
import json
import resource

import numpy as np
import pytest

import pluggable
from pluggable import ops, profiler
from pluggable.profiler import ProfilerOptions, ProfilerWarning

KERNEL_OPS = ("MatMul", "BiasAdd", "Relu", "Softmax")


@pytest.fixture(scope="module", autouse=True)
def xpu_profiler():
    manager = pluggable.manager()
    manager.ensure_discovered()
    found = [p for p in manager.profilers if p.device_type == "XPU"]
    if not found:
        pytest.skip("the XPU plugin was built without its profiler")
    return found[0]


def _mlp(device: str, rng) -> np.ndarray:
    x = rng.standard_normal((8, 16)).astype(np.float32)
    w1, b1 = rng.standard_normal((16, 32)).astype(np.float32), np.zeros(32, np.float32)
    w2, b2 = rng.standard_normal((32, 4)).astype(np.float32), np.ones(4, np.float32)
    with pluggable.device(device):
        hidden = ops.relu(ops.bias_add(ops.matmul(x, w1), b1))
        out = ops.softmax(ops.bias_add(ops.matmul(hidden, w2), b2))
    return out.numpy()


def test_mlp_on_two_xpus(tmp_path):
    rng = np.random.default_rng(0)
    with profiler.Profile(tmp_path) as session:
        for step, device in enumerate(("/xpu:0", "/xpu:1")):
            with profiler.Trace("mlp", step_num=step):
                probabilities = _mlp(device, rng)
            assert np.allclose(probabilities.sum(axis=1), 1.0, atol=1e-5)
    result = session.result
    assert set(result.planes) == {"/device:GPU:0", "/device:GPU:1", "/host:CPU"}
    host = list(result.events("/host:CPU"))
    for ordinal in (0, 1):
        plane = f"/device:GPU:{ordinal}"
        device_events = list(result.events(plane))
        assert result.devices[plane] == f"/device:XPU:{ordinal}"
        dispatched = [e._replace(name=e.name.partition(":")[0]) for e in host
                      if e.stats.get("device") == f"/device:XPU:{ordinal}"
                      and e.stats.get("placement") == "kernel"]
        assert sorted(e.name for e in dispatched) == sorted(
            ["MatMul", "MatMul", "BiasAdd", "BiasAdd", "Relu", "Softmax"])
        # Each kernel carries the correlation id of the host event that launched it.
        launches = {e.stats["correlation_id"]: e.name for e in dispatched}
        assert len(launches) == len(dispatched)
        assert {launches[e.stats["correlation_id"]] for e in device_events
                if e.name in KERNEL_OPS} == set(launches.values())
        kernels = [e for e in device_events if e.name in KERNEL_OPS]
        # Each kernel launched appears exactly once, on the compute stream's line ...
        assert sorted(e.name for e in kernels) == sorted(e.name for e in dispatched)
        assert {e.line for e in kernels} == {"compute"}
        for name in KERNEL_OPS:
            mine = [e for e in kernels if e.name == name]
            theirs = [e for e in dispatched if e.name == name]
            for kernel, launch in zip(mine, theirs):  # ... with a duration, after its dispatch
                assert kernel.duration_ns > 0
                assert kernel.start_ns >= launch.start_ns
                assert kernel.stats.get("op_type", name) == name
        # Copies with their byte counts; small ones on the compute stream's line.
        for host_name, line in (("MemcpyH2D", "compute"), ("MemcpyD2H", "compute")):
            sent = [e.stats["bytes"] for e in host if e.name == host_name
                    and e.stats["device"] == f"/device:XPU:{ordinal}"]
            seen = [e.stats["bytes"] for e in device_events if e.name == host_name]
            assert sent and seen == sent
            assert {e.line for e in device_events if e.name == host_name} == {line}
    assert sum(1 for e in host if e.name == "MemcpyH2D") == 10  # 5 host arrays per device
    # The saved file parses back equal to the result; the Chrome trace has a process each.
    assert list(profiler.load(result.path).events()) == list(result.events())
    trace = json.loads(open(result.export_chrome_trace(tmp_path / "t.json")).read())
    names = [e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"]
    assert sorted(names) == sorted(result.planes)
    summary = {(r["device"], r["op"]): r for r in result.summary_rows()}
    assert summary[("/device:XPU:1", "MatMul")]["count"] == 2
    assert summary[("/device:XPU:1", "MatMul")]["host_us"] > 0


def test_work_in_flight_at_stop_is_in_the_profile(tmp_path):
    x, w = np.ones((64, 64), np.float32), np.ones((64, 64), np.float32)
    with profiler.Profile(tmp_path) as session:  # no synchronisation before the end
        with pluggable.device("/xpu:1"):
            for _ in range(20):
                y = ops.relu(ops.matmul(x, w))
    names = [e.name for e in session.result.events("/device:GPU:1") if e.line == "compute"]
    assert (names.count("MatMul"), names.count("Relu")) == (20, 20)
    assert float(y.numpy()[0, 0]) == 64.0


def test_device_options_leave_the_xpu_profiler_out(tmp_path):
    for options in (ProfilerOptions(device_tracer_level=0), ProfilerOptions(device_type="CPU")):
        with profiler.Profile(tmp_path, options) as session:
            _mlp("/xpu:0", np.random.default_rng(1))
        assert session.result.planes == ["/host:CPU"]


@pytest.mark.parametrize("fault, match", [
    ("profiler_start:1", r"TP_ProfilerFns.start failed: .*injected fault.*left out"),
    ("profiler_collect:1", r"collect_data_xspace \(size query\) failed: .*injected fault"),
])
def test_xpu_profiler_faults_leave_its_planes_out(tmp_path, faults, fault, match):
    faults(fault)
    with pytest.warns(ProfilerWarning, match=match):
        with profiler.Profile(tmp_path) as session:
            _mlp("/xpu:0", np.random.default_rng(2))
    assert session.result.planes == ["/host:CPU"]
    assert any(e.name == "MatMul:MatMul" for e in session.result.events("/host:CPU"))
    faults("")
    with profiler.Profile(tmp_path) as again:  # the next session works
        _mlp("/xpu:0", np.random.default_rng(2))
    assert "/device:GPU:0" in again.result.planes


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def test_thousand_sessions_do_not_leak(xpu):
    x = pluggable.tensor(np.ones((4, 4), np.float32), device="/xpu:0")

    def cycle():
        profiler.start(None)
        y = ops.relu(ops.matmul(x, x))
        y.numpy()
        result = profiler.stop()
        assert "/device:GPU:0" in result.planes

    for _ in range(50):  # warm-up: plans, pools, allocator regions
        cycle()
    gc.collect()
    before = _rss_bytes()
    for _ in range(1000):
        cycle()
    gc.collect()
    grown = _rss_bytes() - before
    assert grown < 5 * 1024 * 1024, f"RSS grew by {grown} bytes over 1000 sessions"
    del x
