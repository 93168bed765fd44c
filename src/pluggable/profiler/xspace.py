"""XSpace, TensorFlow's profile format, read and written with the ``protobuf`` package.

The messages come from ``xplane_pb2`` (generated from ``xplane.proto`` beside this module,
TensorFlow's field numbers under the package ``pluggable.profiler``). protobuf is imported on
first use, never by ``import pluggable``. Serialized XSpaces concatenate into one (their
repeated fields append), which is how plugin planes and the host plane are merged without
re-encoding the plugins' bytes.
"""
from __future__ import annotations

from typing import Any, Dict, Iterator, NamedTuple, Optional

from ..errors import DataLossError

_pb2 = None


def pb2():
    """The generated module (imports protobuf on first call)."""
    global _pb2
    if _pb2 is None:
        try:
            from . import xplane_pb2
        except ImportError as exc:
            raise ImportError(
                f"pluggable.profiler needs the protobuf package ({exc}); install it with "
                f"`pip install protobuf`") from None
        _pb2 = xplane_pb2
    return _pb2


def parse_xspace(data: bytes, what: str):
    """An XSpace message from ``data``; `DataLossError` naming ``what`` when malformed."""
    from google.protobuf.message import DecodeError

    space = pb2().XSpace()
    try:
        space.ParseFromString(data)
    except DecodeError as exc:
        raise DataLossError(f"{what} is not a serialized XSpace ({len(data)} bytes): {exc}",
                            call="XSpace.ParseFromString") from None
    return space


class PlaneBuilder:
    """Builds one XPlane: lines, events, and the metadata tables they refer to."""

    def __init__(self, plane_id: int, name: str):
        self.plane = pb2().XPlane(id=plane_id, name=name)
        self._event_ids: Dict[str, int] = {}
        self._stat_ids: Dict[str, int] = {}
        self._lines = []

    def event_metadata_id(self, name: str) -> int:
        found = self._event_ids.get(name)
        if found is None:
            found = self._event_ids[name] = len(self._event_ids) + 1
            self.plane.event_metadata[found].id = found
            self.plane.event_metadata[found].name = name
        return found

    def stat_metadata_id(self, name: str) -> int:
        found = self._stat_ids.get(name)
        if found is None:
            found = self._stat_ids[name] = len(self._stat_ids) + 1
            self.plane.stat_metadata[found].id = found
            self.plane.stat_metadata[found].name = name
        return found

    def stat(self, name: str, value: Any):
        """An XStat of the right kind for ``value``."""
        XStat = _pb2.XStat
        metadata_id = self.stat_metadata_id(name)
        if isinstance(value, bool):
            return XStat(metadata_id=metadata_id, int64_value=int(value))
        if isinstance(value, int):
            if value >= 1 << 63:
                return XStat(metadata_id=metadata_id, uint64_value=value)
            return XStat(metadata_id=metadata_id, int64_value=value)
        if isinstance(value, float):
            return XStat(metadata_id=metadata_id, double_value=value)
        if isinstance(value, (bytes, bytearray)):
            return XStat(metadata_id=metadata_id, bytes_value=bytes(value))
        return XStat(metadata_id=metadata_id, str_value=str(value))

    def line(self, line_id: int, name: str) -> "LineBuilder":
        line = LineBuilder(self, line_id, name)
        self._lines.append(line)
        return line

    def finish(self):
        """The XPlane, lines in creation order."""
        for line in self._lines:
            self.plane.lines.append(line.finish())
        return self.plane


class LineBuilder:
    """One XLine; events are collected as tuples and encoded at `finish`."""

    def __init__(self, plane: PlaneBuilder, line_id: int, name: str):
        self._plane = plane
        self.id = line_id
        self.name = name
        self._events = []

    def event(self, name: str, start_ns: int, duration_ns: int, stats: Dict[str, Any]) -> None:
        self._events.append((name, start_ns, duration_ns, stats))

    def finish(self):
        pb = _pb2
        plane = self._plane
        first = min(e[1] for e in self._events) if self._events else 0
        last = max(e[1] + e[2] for e in self._events) if self._events else 0
        line = pb.XLine(id=self.id, display_id=self.id, name=self.name, timestamp_ns=first,
                        duration_ps=(last - first) * 1000)
        XEvent = pb.XEvent
        line.events.extend(
            XEvent(metadata_id=plane.event_metadata_id(name),
                   offset_ps=(start - first) * 1000, duration_ps=duration * 1000,
                   stats=[plane.stat(k, v) for k, v in stats.items()])
            for name, start, duration, stats in sorted(self._events, key=lambda e: e[1]))
        return line


class Event(NamedTuple):
    """One event of a profile, as plain values."""

    plane: str
    line: str
    name: str
    start_ns: int
    duration_ns: float
    stats: Dict[str, Any]


def stat_value(stat, stat_names: Dict[int, str]):
    kind = stat.WhichOneof("value")
    if kind is None:
        return None
    value = getattr(stat, kind)
    if kind == "ref_value":
        return stat_names.get(value, value)
    return value


def iter_events(space, plane: Optional[str] = None) -> Iterator[Event]:
    """Every event of ``space`` (of the plane named ``plane`` only, if given), in plane,
    line and time order. ``name`` is the event metadata's name; its ``display_name``, when
    set, is the stat ``display_name``."""
    for xplane in space.planes:
        if plane is not None and xplane.name != plane:
            continue
        stat_names = {k: v.name for k, v in xplane.stat_metadata.items()}
        metadata = xplane.event_metadata
        for line in xplane.lines:
            line_name = line.display_name or line.name
            base = line.timestamp_ns
            for event in line.events:
                meta = metadata.get(event.metadata_id) if event.metadata_id in metadata else None
                name = meta.name if meta is not None else f"event {event.metadata_id}"
                stats = {stat_names.get(s.metadata_id, str(s.metadata_id)):
                         stat_value(s, stat_names) for s in event.stats}
                if meta is not None and meta.display_name and meta.display_name != name:
                    stats.setdefault("display_name", meta.display_name)
                yield Event(xplane.name, line_name, name, base + event.offset_ps // 1000,
                            event.duration_ps / 1000, stats)
