"""What a profile becomes: the summary table, Chrome trace JSON, `load`, the
`profile-summary` command, and an XSpace that TensorFlow's own xplane_pb2 reads."""
from __future__ import annotations

import gzip
import importlib.util
import json
import textwrap

import numpy as np
import pytest

import pluggable
from pluggable import cli, ops, profiler
from pluggable.errors import DataLossError, NotFoundError
from pluggable.profiler import ProfilerOptions


@pytest.fixture
def result(profiler_plugin, own_manager, tmp_path):
    """A profile with a plugin plane (3 "TestKernel" events) and host ops on the CPU."""
    own_manager.load_plugin(profiler_plugin(PLANE_NAME="/device:TEST:0"))
    with profiler.Profile(tmp_path / "logs") as session:
        with profiler.Trace("step", step_num=1):
            for _ in range(4):
                ops.add(np.ones(3, np.float32), np.ones(3, np.float32))
    return session.result


def test_summary_rows_per_op_and_device(result):
    rows = {(r["device"], r["op"]): r for r in result.summary_rows()}
    kernel = rows[("/device:TEST:0", "TestKernel")]
    assert (kernel["count"], kernel["total_us"], kernel["mean_us"], kernel["min_us"],
            kernel["max_us"], kernel["share"]) == (3, 3.0, 1.0, 1.0, 1.0, 1.0)
    assert kernel["host_us"] is None  # no host op of that name
    add = rows[("/device:CPU:0", "AddV2")]
    host_adds = [e.duration_ns for e in result.events("/host:CPU") if e.name == "AddV2:AddV2"]
    assert add["count"] == 4 and add["host_us"] == pytest.approx(sum(host_adds) / 4 / 1e3)
    text = result.summary()
    assert text.splitlines()[0].split()[:3] == ["device", "op", "count"]
    assert any(line.split()[:3] == ["/device:TEST:0", "TestKernel", "3"]
               for line in text.splitlines())


@pytest.mark.parametrize("name", ["trace.json", "trace.json.gz"])
def test_chrome_trace_has_a_process_per_plane_and_a_thread_per_line(result, tmp_path, name):
    path = result.export_chrome_trace(tmp_path / name)
    raw = open(path, "rb").read()
    if name.endswith(".gz"):
        raw = gzip.decompress(raw)
    trace = json.loads(raw)
    meta = [e for e in trace["traceEvents"] if e["ph"] == "M"]
    processes = {e["pid"]: e["args"]["name"] for e in meta if e["name"] == "process_name"}
    assert sorted(processes.values()) == sorted(result.planes)
    threads = {(e["pid"], e["args"]["name"]) for e in meta if e["name"] == "thread_name"}
    pid = {v: k for k, v in processes.items()}
    assert (pid["/device:TEST:0"], "compute") in threads
    complete = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(complete) == len(list(result.events()))
    kernels = [e for e in complete if e["name"] == "TestKernel"]
    assert [e["dur"] for e in kernels] == [1.0, 1.0, 1.0]  # µs
    assert [round(e["ts"] - kernels[0]["ts"], 3) for e in kernels] == [0, 2, 4]
    (step,) = [e for e in complete if e["name"] == "step"]
    assert step["args"] == {"step_num": 1} and min(e["ts"] for e in complete) == 0


def test_cli_profile_summary(result, capsys, tmp_path):
    assert cli.main(["profile-summary", result.path]) == 0
    assert capsys.readouterr().out.strip() == result.summary()
    assert cli.main(["profile-summary", str(tmp_path / "logs")]) == 0  # the logdir
    assert "TestKernel" in capsys.readouterr().out
    assert cli.main(["profile-summary", str(tmp_path / "missing.xplane.pb")]) == 1
    assert "missing.xplane.pb" in capsys.readouterr().err


def test_load_refuses_what_is_not_a_profile(tmp_path):
    bad = tmp_path / "bad.xplane.pb"
    bad.write_bytes(b"\xff" * 32)
    with pytest.raises(DataLossError, match="bad.xplane.pb is not a serialized XSpace"):
        profiler.load(bad)
    with pytest.raises(NotFoundError, match="holds no profile"):
        profiler.load(tmp_path)


def test_import_pluggable_does_not_import_protobuf(run_python):
    run_python(textwrap.dedent("""
        import sys, pluggable, pluggable.profiler
        assert "google.protobuf" not in sys.modules, "protobuf imported too early"
        pluggable.profiler.start(None, pluggable.profiler.ProfilerOptions(
            device_tracer_level=0))
        assert "google.protobuf" not in sys.modules
        pluggable.profiler.stop()
        assert "google.protobuf" in sys.modules
    """))


def test_tensorflow_reads_our_xspace(tmp_path, run_python):
    if importlib.util.find_spec("tensorflow") is None:
        pytest.skip("tensorflow is not installed")
    with profiler.Profile(tmp_path, ProfilerOptions(device_tracer_level=0)) as session:
        with pluggable.device("/xpu:0"):
            ops.relu(np.ones(4, np.float32))
        with profiler.Trace("marker", step_num=3):
            pass
    ours = session.result
    expected = [[e.plane, e.line, e.name, e.start_ns, e.duration_ns] for e in ours.events()]
    # In a child process: TensorFlow and pluggable cannot share one.
    code = textwrap.dedent(f"""
        import json
        try:
            from tsl.profiler.protobuf import xplane_pb2
        except ImportError:
            from tensorflow.tsl.profiler.protobuf import xplane_pb2
        space = xplane_pb2.XSpace.FromString(open({ours.path!r}, "rb").read())
        out = []
        for plane in space.planes:
            for line in plane.lines:
                for e in line.events:
                    out.append([plane.name, line.name, plane.event_metadata[e.metadata_id].name,
                                line.timestamp_ns + e.offset_ps // 1000, e.duration_ps / 1000])
        print(json.dumps(out))
    """)
    child = run_python(code, env={"TF_CPP_MIN_LOG_LEVEL": "3"})
    assert json.loads(child.stdout.strip().splitlines()[-1]) == expected


def test_xprof_problems_say_why_planes_would_not_show():
    from pluggable.profiler.result import ProfileResult, xprof_problems
    from pluggable.profiler.xspace import pb2

    space = pb2().XSpace()
    for name in ("/device:XPU:0", "/device:CUSTOM:0", "/device:GPU:1"):
        plane = space.planes.add(name=name)
        plane.event_metadata[1].name = "MatMul"
        plane.stat_metadata[1].name = "op_type"
        event = plane.lines.add(id=1, name="compute").events.add(metadata_id=1,
                                                                  duration_ps=1000)
        event.stats.add(metadata_id=1, str_value="MatMul")
    problems = xprof_problems(ProfileResult(space.SerializeToString()))
    assert problems[0].startswith("plane '/device:XPU:0' is not drawn: xprof shows only")
    assert "'/device:CUSTOM:0' is drawn in the trace viewer only" in problems[1]
    assert sum("'/device:GPU:1': 1 of 1 kernel events lack the stat" in p
               for p in problems) == 3
    assert any("'kernel_details', so kernel_stats does not count" in p for p in problems)
