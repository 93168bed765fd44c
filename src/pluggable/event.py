"""Events: markers recorded on a stream that complete when the stream reaches them."""
from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from ._handle import PluginHandle
from .abi.stream_executor import SE_EventStatus

if TYPE_CHECKING:
    from .stream import Stream


class EventStatus(enum.IntEnum):
    UNKNOWN = SE_EventStatus.SE_EVENT_UNKNOWN
    ERROR = SE_EventStatus.SE_EVENT_ERROR
    PENDING = SE_EventStatus.SE_EVENT_PENDING
    COMPLETE = SE_EventStatus.SE_EVENT_COMPLETE


class Event(PluginHandle):
    """An event of one device. Made by `StreamExecutor.create_event()`."""

    _destroy = "destroy_event"
    _kind = "event"

    def record(self, stream: "Stream") -> None:
        """Records the event on ``stream``: it completes when the stream reaches this point."""
        self._check_open()
        self.executor._check_stream(stream)
        self.executor._call("record_event", stream._handle, self._handle)

    def wait(self, stream: "Stream") -> None:
        """Makes work enqueued on ``stream`` from now on wait until the event completes."""
        self._check_open()
        self.executor._check_stream(stream)
        self.executor._call("wait_for_event", stream._handle, self._handle)

    def status(self) -> EventStatus:
        self._check_open()
        return EventStatus(self.executor.event_state(self._handle))

    def query(self) -> bool:
        """True once the event has completed (with or without an error)."""
        return self.status() in (EventStatus.COMPLETE, EventStatus.ERROR)

    def synchronize(self) -> None:
        """Blocks the host until the event completes; raises if it completed with an error."""
        self._check_open()
        self.executor.block_host_for_event(self)
