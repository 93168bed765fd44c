"""The XPU profiler's XSpace encoder (plugins/xpu/xpu_profiler.c) on sessions made up by a C
driver (xpu_encoder_driver.c) with values a device rarely produces: several devices and
streams, streams destroyed during the session, long names, events out of order, zero and
negative durations, the largest correlation ids and byte counts, dropped events. Every event
the driver recorded must come back decoded exactly as the format says, in a minimal
encoding; and failing each allocation of the encoder in turn must fail the collect cleanly
and leave nothing behind. Each test runs twice: with the encoder's first guess of a line's
size, and with a guess of one byte per event, so that every line's buffer grows."""
from __future__ import annotations

import os
import shutil
import subprocess
from collections import defaultdict

import pytest

from test_xpu_profiler_c import events_of, parse

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DRIVER = os.path.join(HERE, "xpu_encoder_driver.c")
KINDS = ["Kernel", "MemcpyH2D", "MemcpyD2H", "MemcpyD2D", "Memset", "HostCallback",
         "RecordEvent", "WaitForEvent"]
MAX_NAME = 255  # XPU_PROF_MAX_NAME
KERNEL_DETAILS = "regs:0 static_shared:0 dynamic_shared:0 grid:1,1,1 block:1,1,1 occ_pct:0"


@pytest.fixture(scope="module", params=[None, 1], ids=["first-guess", "growing"])
def driver(request, tmp_path_factory):
    """The driver built against the plugin's sources (with XPU_PROF_EVENT_BYTES = param)."""
    compiler = os.environ.get("CC", "cc")
    if shutil.which(compiler) is None:
        pytest.skip(f"no C compiler ({compiler}) to build the encoder's driver")
    out = str(tmp_path_factory.mktemp("encoder") / "driver")
    defines = [] if request.param is None else [f"-DXPU_PROF_EVENT_BYTES={request.param}"]
    # PLUGGABLE_TEST_CFLAGS: what the sanitizer step adds to every C build of the tests.
    extra = os.environ.get("PLUGGABLE_TEST_CFLAGS", "").split()
    cmd = [compiler, "-std=c11", "-Wall", "-Wextra", "-Werror", "-O1", "-pthread", *extra,
           *defines,
           "-I", os.path.join(REPO, "include"), "-I", os.path.join(REPO, "plugins", "xpu"),
           "-o", out, DRIVER]
    result = subprocess.run(cmd, capture_output=True, text=True)
    assert result.returncode == 0, f"{' '.join(cmd)} failed:\n{result.stderr}"
    return out


def run_session(driver, scenario, tmp_path):
    """(listing lines, XSpace bytes) of one scenario."""
    out = tmp_path / f"scenario{scenario}.pb"
    result = subprocess.run([driver, "session", str(scenario), str(out)], capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr
    return [line.split("\t") for line in result.stdout.splitlines()], out.read_bytes()


def text(field):
    return None if field == "!" else field[1:]


def expected_planes(listing):
    """{plane name: {line id: (line name, [(event name, display, offset_ps, duration_ps,
    stats)])}} and {(ordinal, stream id): events dropped} as the format describes them."""
    cap = next(int(row[1]) for row in listing if row[0] == "cap")
    names, events = {}, defaultdict(list)
    for row in listing:
        if row[0] == "stream":
            names[(int(row[1]), int(row[2]))] = text(row[3])
        elif row[0] == "event":
            events[(int(row[1]), int(row[2]))].append(row[3:])
    planes, dropped = defaultdict(dict), {}
    for (ordinal, stream), rows in events.items():
        plane = f"/device:GPU:{ordinal}"
        if len(rows) > cap:
            dropped[(ordinal, stream)] = len(rows) - cap
        rows = rows[:cap]
        # An event ends no earlier than it starts; the line's time is its first start.
        spans = [(int(r[1]), max(int(r[1]), int(r[2]))) for r in rows]
        first = min(s for s, _ in spans)
        decoded = []
        for row, (start, end) in zip(rows, spans):
            kind, op_type, node, correlation = int(row[0]), text(row[4]), text(row[5]), int(row[6])
            name, display, stats = KINDS[kind], None, {}
            if kind == 0 and op_type is not None:
                name = op_type
                node = node[:MAX_NAME] if node else None
                display = node if node and node != op_type else None
                stats = {"op_type": op_type, "tf_op": f"{display or op_type}:{op_type}",
                         "kernel_details": KERNEL_DETAILS}
                if correlation:
                    stats["correlation_id"] = correlation
            elif 1 <= kind <= 4:
                stats = {"bytes": int(row[3])}
            decoded.append((name, display, (start - first) * 1000, (end - start) * 1000, stats))
        stream_name = names[(ordinal, stream)]
        line_name = stream_name[:MAX_NAME] if stream_name else f"stream {stream}"
        planes[plane][stream] = (line_name, first, decoded)
    return planes, dropped


@pytest.mark.parametrize("scenario", [0, 1, 3])
def test_every_recorded_event_decodes_as_recorded(driver, scenario, tmp_path):
    listing, data = run_session(driver, scenario, tmp_path)
    space = parse(data)  # also checks the encoding is minimal
    planes, dropped = expected_planes(listing)
    assert [p.name for p in space.planes] == sorted(planes, key=lambda n: int(n.split(":")[-1]))
    for plane in space.planes:
        lines = planes[plane.name]
        assert [line.id for line in plane.lines] == sorted(lines)
        got = defaultdict(list)
        for line, meta, event, stats in events_of(plane):
            name = meta.display_name or None  # proto3: an empty string is no field
            got[line.id].append((meta.name, name, event.offset_ps, event.duration_ps, stats))
        for line in plane.lines:
            line_name, first, decoded = lines[line.id]
            assert (line.name, line.timestamp_ns, line.display_id) == (line_name, first, line.id)
            assert got[line.id] == decoded
            ends = [offset + duration for _, _, offset, duration, _ in decoded]
            assert line.duration_ps == max(ends)
        plane_stats = {plane.stat_metadata[s.metadata_id].name: s for s in plane.stats}
        plane_dropped = sum(n for (ordinal, _), n in dropped.items()
                            if f"/device:GPU:{ordinal}" == plane.name)
        if plane_dropped:
            assert plane_stats["dropped_events"].uint64_value == plane_dropped
        else:
            assert "dropped_events" not in plane_stats
    assert bool(dropped) == (scenario == 1)
    assert list(space.warnings) == [
        f"XPU device {ordinal}, stream {stream}: {n} events dropped; the XPU profiler keeps at "
        f"most {len(planes[f'/device:GPU:{ordinal}'][stream][2])} events per stream per session"
        for (ordinal, stream), n in sorted(dropped.items())]


def test_nothing_recorded_is_no_bytes(driver, tmp_path):
    listing, data = run_session(driver, 2, tmp_path)
    assert data == b"" and [row[0] for row in listing] == ["cap"]


def test_every_failed_allocation_fails_cleanly(driver):
    result = subprocess.run([driver, "oom"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    # Planes, metadata tables, kernel stats, each line's events and the output: many
    # allocations, each failed once.
    assert int(result.stdout) > 50
