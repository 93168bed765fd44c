"""`ProfileResult`: a profile's planes and events, its summary table and its Chrome trace;
`load` reads a saved ``.xplane.pb`` back."""
from __future__ import annotations

import glob
import gzip
import json
import os
from collections import defaultdict
from typing import Any, Dict, Iterator, List, Optional

from ..base.errors import NotFoundError
from ..base.limits import safe_text
from .xspace import Event, iter_events, parse_xspace

HOST_PLANE = "/host:CPU"
# TensorFlow's names of allocator events (xprof's memory profile reads them).
MEMORY_EVENTS = ("MemoryAllocation", "MemoryDeallocation")


def plane_device(plane) -> str:
    """The device a plane records: ``/device:<device_type_string>:<device_ordinal>`` from the
    plane's stats when it has both (a plugin plane named ``/device:GPU:0`` for xprof, of an
    "XPU"), else the plane's name."""
    names = {k: v.name for k, v in plane.stat_metadata.items()}
    stats = {names.get(s.metadata_id): s for s in plane.stats}
    kind, ordinal = stats.get("device_type_string"), stats.get("device_ordinal")
    if kind is not None and ordinal is not None and kind.str_value:
        return f"/device:{kind.str_value}:{ordinal.int64_value or ordinal.uint64_value}"
    return plane.name


def op_type(event_name: str) -> str:
    """The op type of a host launch event, named TensorFlow's way ``<node>:<type>``."""
    return event_name.rpartition(":")[2] or event_name


class ProfileResult:
    """What one profiling session saw. ``path`` is the saved ``.xplane.pb`` (None when the
    session was not saved); ``space`` the XSpace message (parsed on first use). ``data`` is
    the serialized XSpace, or the pieces whose concatenation it is (joined on first use)."""

    def __init__(self, data, path: Optional[str] = None):
        self._data = data if isinstance(data, bytes) else None
        self._pieces = None if isinstance(data, bytes) else list(data)
        self._space = None
        self.path = path

    @property
    def space(self):
        if self._space is None:
            self._space = parse_xspace(self.serialize(), self.path or "the profile")
        return self._space

    @property
    def planes(self) -> List[str]:
        """Plane names, e.g. ``["/device:XPU:0", "/host:CPU"]``."""
        return [p.name for p in self.space.planes]

    @property
    def devices(self) -> Dict[str, str]:
        """``{plane name: device}``, e.g. ``{"/device:GPU:0": "/device:XPU:0"}``: the device
        each plane records (see `plane_device`)."""
        return {p.name: plane_device(p) for p in self.space.planes}

    @property
    def warnings(self) -> List[str]:
        """What went wrong while collecting (a plugin that failed, malformed data)."""
        return list(self.space.warnings)

    def events(self, plane: Optional[str] = None) -> Iterator[Event]:
        """Every event as an `Event` (plane, line, name, start_ns, duration_ns, stats)."""
        return iter_events(self.space, plane)

    def serialize(self) -> bytes:
        """The XSpace as saved."""
        if self._data is None:
            self._data, self._pieces = b"".join(self._pieces), None
        return self._data

    # -- summary -----------------------------------------------------------------------------
    def summary_rows(self) -> List[Dict[str, Any]]:
        """One row per (device, op): ``count``, ``total_us``/``mean_us``/``min_us``/``max_us``
        of device time, ``share`` of the device's busy time, and ``host_us``, the mean host
        dispatch time per op. Ops the CPU ran count as device "/device:CPU:0"; an op whose
        device has no profiler plane has its host figures only (device times None)."""
        device_events: Dict[tuple, List[float]] = defaultdict(list)
        busy: Dict[str, float] = defaultdict(float)
        host: Dict[tuple, List[float]] = defaultdict(list)
        devices = self.devices
        for e in self.events():
            if e.plane == HOST_PLANE:
                device = e.stats.get("device")  # ops and copies; not allocations
                if device is not None and e.name not in MEMORY_EVENTS:
                    name = op_type(e.name)
                    if e.stats.get("placement", "kernel") != "kernel":
                        device = "/device:CPU:0"
                        device_events[(device, name)].append(e.duration_ns)
                        busy[device] += e.duration_ns
                    host[(device, name)].append(e.duration_ns)
                continue
            plane = devices.get(e.plane, e.plane)
            device_events[(plane, e.name)].append(e.duration_ns)
            busy[plane] += e.duration_ns
        rows = []
        for device, name in set(device_events) | set(host):
            durations = device_events.get((device, name))
            dispatch = host.get((device, name))
            row = {"device": device, "op": name,
                   "count": len(durations) if durations else len(dispatch),
                   "total_us": None, "mean_us": None, "min_us": None, "max_us": None,
                   "share": None,
                   "host_us": sum(dispatch) / len(dispatch) / 1e3 if dispatch else None}
            if durations:
                total = sum(durations)
                row.update(total_us=total / 1e3, mean_us=total / len(durations) / 1e3,
                           min_us=min(durations) / 1e3, max_us=max(durations) / 1e3,
                           share=total / busy[device] if busy[device] else 0.0)
            rows.append(row)
        rows.sort(key=lambda r: (r["device"], -(r["total_us"] or 0), r["op"]))
        return rows

    def summary(self) -> str:
        """The summary table as text (see `summary_rows`); CPU rows are ops the host ran."""
        rows = self.summary_rows()
        if not rows:
            return "no events in this profile"
        headers = ("device", "op", "count", "total µs", "mean µs", "min µs", "max µs",
                   "device %", "host µs/op")
        def cell(value, scale=1.0, digits=2):
            return "" if value is None else f"{value * scale:.{digits}f}"

        cells = [headers] + [
            (safe_text(r["device"], 200), safe_text(r["op"], 200), str(r["count"]), cell(r["total_us"], digits=1),
             cell(r["mean_us"]), cell(r["min_us"]), cell(r["max_us"]),
             cell(r["share"], 100, 1), cell(r["host_us"]))
            for r in rows]
        widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
        lines = []
        for n, row in enumerate(cells):
            lines.append("  ".join(c.rjust(w) if i >= 2 else c.ljust(w)
                                   for i, (c, w) in enumerate(zip(row, widths))).rstrip())
            if n == 0:
                lines.append("  ".join("-" * w for w in widths))
        return "\n".join(lines)

    # -- Chrome trace --------------------------------------------------------------------------
    def chrome_trace(self) -> Dict[str, Any]:
        """The profile in the Trace Event Format: one process per plane, one thread per line,
        complete ("X") events in µs from the profile's first event, stats as ``args``."""
        events = list(self.events())
        origin = min((e.start_ns for e in events), default=0)
        trace: List[Dict[str, Any]] = []
        pids: Dict[str, int] = {}
        tids: Dict[tuple, int] = {}
        for plane in self.space.planes:
            pid = pids[plane.name] = len(pids) + 1
            trace.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                          "args": {"name": plane.name}})
            trace.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                          "args": {"sort_index": pid}})
            for line in plane.lines:
                name = line.display_name or line.name
                tid = tids[(plane.name, name)] = len([k for k in tids if k[0] == plane.name]) + 1
                trace.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                              "args": {"name": name}})
        for e in events:
            trace.append({"ph": "X", "name": e.name, "pid": pids[e.plane],
                          "tid": tids[(e.plane, e.line)], "ts": (e.start_ns - origin) / 1e3,
                          "dur": e.duration_ns / 1e3,
                          "args": {k: v if isinstance(v, (int, float, str)) else repr(v)
                                   for k, v in e.stats.items()}})
        return {"traceEvents": trace, "displayTimeUnit": "ns",
                "otherData": {"origin_unix_ns": origin}}

    def export_chrome_trace(self, path) -> str:
        """Writes `chrome_trace` as JSON to ``path`` (gzipped when it ends in ``.gz``); open
        it in Perfetto (ui.perfetto.dev) or chrome://tracing. Returns the path."""
        path = os.fspath(path)
        data = json.dumps(self.chrome_trace(), separators=(",", ":")).encode()
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "wb") as f:
            f.write(data)
        return path

    def __repr__(self) -> str:
        return f"<ProfileResult planes={self.planes} path={self.path!r}>"


# Plane names xprof (TensorBoard's profile tools) draws, and those its op and kernel
# statistics read.
XPROF_DRAWN_PREFIXES = ("/device:GPU:", "/device:TPU:", "/device:CUSTOM:")
XPROF_STATS_PREFIXES = ("/device:GPU:", "/device:TPU:")
# Stats of a kernel event that xprof's tools need (see include/ABI.md).
XPROF_KERNEL_STATS = {
    "tf_op": "framework_op_stats cannot tie them to an op",
    "kernel_details": "kernel_stats does not count them as kernels",
    "correlation_id": "the trace viewer draws no flow from their host launch",
}


def xprof_problems(result: "ProfileResult", planes: Optional[List[str]] = None) -> List[str]:
    """Why xprof would not show (all of) the device planes of ``result`` (every plane but the
    host's, or those named in ``planes``), one sentence each; empty when nothing is missing."""
    problems = []
    for plane in result.space.planes:
        if plane.name == HOST_PLANE or (planes is not None and plane.name not in planes):
            continue
        if not plane.name.startswith(XPROF_DRAWN_PREFIXES):
            problems.append(
                f"plane {plane.name!r} is not drawn: xprof shows only planes named "
                f"/device:GPU:<n>, /device:TPU:<n> or /device:CUSTOM:<n>")
            continue
        if not plane.name.startswith(XPROF_STATS_PREFIXES):
            problems.append(
                f"plane {plane.name!r} is drawn in the trace viewer only: xprof's op and "
                f"kernel statistics read /device:GPU:<n> and /device:TPU:<n> planes")
        kernels = [e for e in iter_events(result.space, plane.name) if "op_type" in e.stats
                   or "tf_op" in e.stats or "kernel_details" in e.stats]
        if not kernels:
            continue
        for stat, consequence in XPROF_KERNEL_STATS.items():
            missing = sum(1 for e in kernels if stat not in e.stats)
            if missing:
                problems.append(f"plane {plane.name!r}: {missing} of {len(kernels)} kernel "
                                f"events lack the stat {stat!r}, so {consequence}")
    return problems


def latest_profile(logdir: str) -> Optional[str]:
    """The newest ``*.xplane.pb`` under ``logdir/plugins/profile``, or None."""
    found = glob.glob(os.path.join(logdir, "plugins", "profile", "*", "*.xplane.pb"))
    return max(found, key=os.path.getmtime) if found else None


def load(path) -> ProfileResult:
    """Reads a saved ``.xplane.pb`` (or the newest one of a log directory) back."""
    path = os.fspath(path)
    if os.path.isdir(path):
        found = latest_profile(path)
        if found is None:
            raise NotFoundError(f"{path} holds no profile (no plugins/profile/*/*.xplane.pb); "
                                f"pass the .xplane.pb file or the logdir given to "
                                f"pluggable.profiler.start", call="profiler.load")
        path = found
    with open(path, "rb") as f:
        data = f.read()
    result = ProfileResult(data, path)
    result.space  # parsed now: a file that is not a profile is refused here
    return result
