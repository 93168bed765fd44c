"""Events: markers recorded on a stream that complete when the stream reaches them."""
from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from .handle import PluginHandle
from ..abi.stream_executor import SE_EventStatus

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
    # The ledger of the stream it was last recorded on and its count of writes before the
    # point (_compiled/ledger.c): a wait that sees the event complete counts those as done.
    _writes = None

    def record(self, stream: "Stream") -> None:
        """Records the event on ``stream``: it completes when the stream reaches this point."""
        self._check_open()
        self.executor._check_stream(stream)
        writes = (stream._ledger, stream._ledger.mark())
        self.executor._call("record_event", stream._handle, self._handle)
        self._writes = writes

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
        """Blocks the host until the event completes; raises if it completed with an error.
        An event never recorded has nothing to wait for: it returns at once (as CUDA's and
        the XPU's own block_host_for_event do; polling its status, which stays UNKNOWN,
        would wait out the whole deadline)."""
        self._check_open()
        writes = self._writes
        if writes is None:
            return
        self.executor.block_host_for_event(self)
        writes[0].verified(writes[1])

    def _passed(self) -> None:
        """The event was seen complete without error: the writes its stream had counted
        when it was recorded are done."""
        writes = self._writes
        if writes is not None:
            writes[0].verified(writes[1])
