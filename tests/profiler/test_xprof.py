"""What xprof (the profile tools of TensorBoard) makes of a session's profile: its
converters, run on a profile of MatMul, Relu and AddV2 on /xpu:0, show the XPU's kernels in
the trace viewer with flow arrows from their host launches, list the ops with host and
device time, list the kernels, and show the XPU allocator's peak.

xprof is optional (`pip install xprof`, the ``profile`` extra); without it the tests skip."""
from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

import pluggable
from pluggable import ops, profiler

raw_to_tool_data = pytest.importorskip(
    "xprof.convert.raw_to_tool_data",
    reason="xprof is not installed (pip install xprof, or pluggable's `profile` extra)")

KERNELS = ("MatMul", "Relu", "AddV2")
RUNS = 3


def _tool(path: str, tool: str):
    data = raw_to_tool_data.xspace_to_tool_data([path], tool, {})
    data = data[0] if isinstance(data, tuple) else data
    if isinstance(data, bytes):
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        data = data.decode("utf-8")
    return json.loads(data)


@pytest.fixture(scope="module")
def profile(tmp_path_factory):
    """The saved profile of RUNS x (MatMul, Relu, AddV2) on /xpu:0, and the allocator's peak
    bytes in use during it."""
    logdir = tmp_path_factory.mktemp("xprof")
    with pluggable.device("/xpu:0"):
        a = pluggable.tensor(np.ones((8, 8), np.float32))
        b = pluggable.tensor(np.ones((8, 8), np.float32))
        with profiler.Profile(logdir) as session:
            for _ in range(RUNS):
                c = ops.matmul(a, b)
                d = ops.relu(c)
                e = ops.add(d, c)
            e.numpy()
    assert np.all(e.numpy() == 16.0)
    return session.result


def _rows(table):
    names = [c["id"] for c in table["cols"]]
    return [dict(zip(names, (cell.get("v") if cell else None for cell in row["c"])))
            for row in table["rows"]]


def test_trace_viewer_has_the_xpu_lane_with_every_kernel_and_flows(profile):
    trace = _tool(profile.path, "trace_viewer")["traceEvents"]
    processes = {e["pid"]: e["args"]["name"] for e in trace if e.get("name") == "process_name"}
    (device_pid,) = [pid for pid, name in processes.items() if name == "/device:GPU:0"]
    (stream,) = [e["tid"] for e in trace if e.get("pid") == device_pid
                 and e.get("name") == "thread_name" and e["args"]["name"] == "compute"]
    kernels = [e for e in trace if e.get("pid") == device_pid and e.get("tid") == stream
               and e.get("ph") == "X" and e["name"] in KERNELS]
    assert sorted(e["name"] for e in kernels) == sorted(KERNELS * RUNS)
    # A flow per launch: out of the host event, into the kernel with the same correlation id
    # (xprof's XFlow stat: 2 bits of direction, out = 2 and in = 1, then 56 bits of id).
    host_pid = next(pid for pid, name in processes.items() if name == "/host:CPU")

    def flows(events):
        return {e["args"]["correlation_id"]: (int(e["args"]["flow"]) & 3,
                                              int(e["args"]["flow"]) >> 2 & ((1 << 56) - 1))
                for e in events if "flow" in e.get("args", {})}

    flows_out = flows(e for e in trace if e.get("pid") == host_pid)
    flows_in = flows(kernels)
    assert len(flows_in) == len(kernels) == len(flows_out)
    for cid, (direction, flow_id) in flows_in.items():
        assert direction == 1 and flows_out[cid] == (2, flow_id)


def test_framework_op_stats_has_host_and_device_time_per_op(profile):
    rows = _rows(_tool(profile.path, "framework_op_stats")[0])
    for op in KERNELS:
        mine = {r["host_or_device"]: r for r in rows if r["type"] == op}
        assert set(mine) == {"Host", "Device"}, rows
        assert all(r["occurrences"] == RUNS and r["total_time"] > 0 for r in mine.values())


def test_kernel_stats_lists_the_xpu_kernels(profile):
    rows = _rows(_tool(profile.path, "kernel_stats"))
    assert {r["kernel_name"]: (r["op_name"], r["occurrences"]) for r in rows} == {
        op: (op, RUNS) for op in KERNELS}
    assert all(r["total_duration_us"] > 0 and r["block_dim"] == "1,1,1" for r in rows)


def test_memory_profile_shows_the_allocator_peak(profile):
    memory = _tool(profile.path, "memory_profile")["memoryProfilePerAllocator"]
    device = pluggable.get_device("XPU:0").executor.allocator
    summary = memory[device.name]["profileSummary"]
    peaks = [e.stats["peak_bytes_in_use"] for e in profile.events("/host:CPU")
             if e.stats.get("allocator_name") == device.name]
    assert int(summary["peakBytesUsageLifetime"]) == max(peaks) > 0


TEMPLATE_SCRIPT = """
import sys, numpy as np, pluggable
from pluggable import ops, profiler
pluggable.load_plugin(sys.argv[1])
with pluggable.device("/my_device:0"):
    x = pluggable.tensor(np.arange(6, dtype=np.float32))
    ops.add(x, x)
    with profiler.Profile(sys.argv[2]) as session:
        for _ in range(3):
            y = ops.add(x, x)
        y.numpy()
print(session.result.path)
"""


@pytest.fixture(scope="module")
def template_profile(tmp_path_factory):
    """The profile of three AddV2 on the plugin template's device, made in a process of its
    own (the template is loaded by hand there)."""
    import os
    import subprocess
    import sys

    tmp = tmp_path_factory.mktemp("template")
    library = tmp / "libmy_device_plugin.so"
    source = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "plugin_template",
                          "my_device_plugin.c")
    subprocess.run([os.environ.get("CC", "cc"), "-std=c11", "-O1", "-fPIC", "-shared", "-I",
                    pluggable.get_include(), "-o", str(library), source], check=True)
    proc = subprocess.run([sys.executable, "-c", TEMPLATE_SCRIPT, str(library), str(tmp)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip().splitlines()[-1]


def test_the_template_plugin_profile_shows_in_xprof(template_profile):
    result = profiler.load(template_profile)
    assert result.devices["/device:GPU:0"] == "/device:MY_DEVICE:0"
    from pluggable.profiler.result import xprof_problems
    assert xprof_problems(result) == []
    trace = _tool(template_profile, "trace_viewer")["traceEvents"]
    processes = {e["pid"]: e["args"]["name"] for e in trace if e.get("name") == "process_name"}
    (device_pid,) = [pid for pid, name in processes.items() if name == "/device:GPU:0"]
    (stream,) = [e["tid"] for e in trace if e.get("pid") == device_pid
                 and e.get("name") == "thread_name" and e["args"]["name"] == "stream"]
    kernels = [e for e in trace if e.get("pid") == device_pid and e.get("tid") == stream
               and e.get("ph") == "X"]
    assert [e["name"] for e in kernels] == ["AddV2"] * 3
    assert all("flow" in e["args"] and int(e["args"]["correlation_id"]) > 0 for e in kernels)
    rows = _rows(_tool(template_profile, "framework_op_stats")[0])
    mine = {r["host_or_device"]: r for r in rows if r["type"] == "AddV2"}
    assert set(mine) == {"Host", "Device"}
    assert all(r["occurrences"] == 3 and r["total_time"] > 0 for r in mine.values())
    rows = _rows(_tool(template_profile, "kernel_stats"))
    assert [(r["kernel_name"], r["occurrences"]) for r in rows] == [("AddV2", 3)]
    memory = _tool(template_profile, "memory_profile")["memoryProfilePerAllocator"]
    peaks = {name: int(m["profileSummary"]["peakBytesUsageLifetime"])
             for name, m in memory.items() if "MY_DEVICE" in name or "my_device" in name.lower()}
    assert peaks and max(peaks.values()) > 0, list(memory)

