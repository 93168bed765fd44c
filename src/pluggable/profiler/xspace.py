"""XSpace, TensorFlow's profile format, read and written with the ``protobuf`` package.

The messages come from ``xplane_pb2`` (generated from ``xplane.proto`` beside this module,
TensorFlow's field numbers under the package ``pluggable.profiler``). protobuf is imported on
first use, never by ``import pluggable``. Serialized XSpaces concatenate into one (their
repeated fields append), which is how plugin planes and the host plane are merged without
re-encoding the plugins' bytes.
"""
from __future__ import annotations

import struct
from typing import Any, Dict, Iterator, List, NamedTuple, Optional

from ..base.errors import DataLossError
from ..base.proto import field_bytes as _field_bytes, varint as _varint

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


# Wire tags of the fields written here (field number << 3 | wire type), from xplane.proto.
_XSTAT_DOUBLE, _XSTAT_UINT64, _XSTAT_INT64, _XSTAT_BYTES, _XSTAT_REF = 0x11, 0x18, 0x20, 0x32, 0x38


class PlaneBuilder:
    """Builds one serialized XPlane: its lines and the metadata tables they refer to.

    It writes protobuf's wire format itself rather than building messages: a host plane has
    an event per op, copy and allocation, and message objects would cost more than the
    session they record. The events of a line arrive encoded (the host tracer's records are
    encoded in C, `pluggable._compiled.encode_host_events`); this class hands out the metadata
    ids they use and encodes their stats, once per key (every run of one op plan has the
    same device, kernel, shapes and dtypes). The result parses with the generated xplane_pb2
    and with TensorFlow's own."""

    def __init__(self, name: str):
        self.name = name
        self._event_ids: Dict[str, int] = {}
        self._stat_ids: Dict[str, int] = {}
        self._lines = []

    def event_metadata_id(self, name: str) -> int:
        found = self._event_ids.get(name)
        if found is None:
            found = self._event_ids[name] = len(self._event_ids) + 1
        return found

    def stat_metadata_id(self, name: str) -> int:
        found = self._stat_ids.get(name)
        if found is None:
            found = self._stat_ids[name] = len(self._stat_ids) + 1
        return found

    def stat(self, name: str, value: Any) -> bytes:
        """An XStat of the right kind for ``value``, as an XEvent.stats field. A string is a
        ``ref_value`` (the id of the XStatMetadata whose name is the string), as TensorFlow
        writes the strings repeated over many events; readers take either form (xprof's
        ``StrOrRefValue``, `stat_value` here)."""
        body = b"\x08" + _varint(self.stat_metadata_id(name))
        if isinstance(value, bool):
            body += bytes((_XSTAT_INT64,)) + _varint(int(value))
        elif isinstance(value, int):
            tag = _XSTAT_UINT64 if value >= 1 << 63 else _XSTAT_INT64
            body += bytes((tag,)) + _varint(value)
        elif isinstance(value, float):
            body += bytes((_XSTAT_DOUBLE,)) + struct.pack("<d", value)
        elif isinstance(value, (bytes, bytearray)):
            body += _field_bytes(_XSTAT_BYTES, bytes(value))
        else:  # a string: a reference to the stat metadata named by it, written once
            body += bytes((_XSTAT_REF,)) + _varint(self.stat_metadata_id(str(value)))
        return _field_bytes(0x22, body)  # XEvent.stats = 4

    def int_stat_prefix(self, name: str) -> bytes:
        """The fields of an int64 XStat ``name`` before its value (metadata id, value tag):
        for a stat on every event, whose value the event encoder appends."""
        return b"\x08" + _varint(self.stat_metadata_id(name)) + bytes((_XSTAT_INT64,))

    def uint_stat_prefix(self, name: str) -> bytes:
        """As `int_stat_prefix`, for a uint64 XStat (``correlation_id``, which xprof reads as
        uint64)."""
        return b"\x08" + _varint(self.stat_metadata_id(name)) + bytes((_XSTAT_UINT64,))

    def stats(self, stats: Dict[str, Any]) -> bytes:
        return b"".join(self.stat(k, v) for k, v in stats.items())

    def add_line(self, line_id: int, name: str, first_ns: int, last_ns: int,
                 events: bytes) -> None:
        """An XLine whose events span ``first_ns`` to ``last_ns``; ``events`` are its
        XLine.events fields, encoded, their offsets relative to ``first_ns``."""
        head = b"".join((b"\x08", _varint(line_id), b"\x50", _varint(line_id),  # display_id
                         _field_bytes(0x12, name.encode("utf-8")), b"\x18", _varint(first_ns),
                         b"\x48", _varint((last_ns - first_ns) * 1000)))
        self._lines.append((head, events))

    def space_field(self, plane_id: int) -> List[bytes]:
        """The plane, numbered ``plane_id``, as an ``XSpace.planes`` field (to append to a
        serialized XSpace), in pieces whose concatenation is the field: the lines' events,
        most of a host plane's bytes, are not copied until the profile is put together."""
        parts = [b"\x08" + _varint(plane_id), _field_bytes(0x12, self.name.encode("utf-8"))]
        for head, events in self._lines:  # XPlane.lines = 3
            parts += (_varint(0x1A) + _varint(len(head) + len(events)), head, events)
        for name, metadata_id in self._event_ids.items():  # map<int64, XEventMetadata> = 4
            value = b"\x08" + _varint(metadata_id) + _field_bytes(0x12, name.encode("utf-8"))
            parts.append(_field_bytes(0x22, b"\x08" + _varint(metadata_id)
                                      + _field_bytes(0x12, value)))
        for name, metadata_id in self._stat_ids.items():  # map<int64, XStatMetadata> = 5
            value = b"\x08" + _varint(metadata_id) + _field_bytes(0x12, name.encode("utf-8"))
            parts.append(_field_bytes(0x2A, b"\x08" + _varint(metadata_id)
                                      + _field_bytes(0x12, value)))
        return [b"\x0A" + _varint(sum(map(len, parts)))] + parts  # XSpace.planes = 1


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
