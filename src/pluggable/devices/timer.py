"""Timers: measure the device time a stream spends between two points."""
from __future__ import annotations

from typing import TYPE_CHECKING

from .handle import PluginHandle

if TYPE_CHECKING:
    from .stream import Stream


class Timer(PluginHandle):
    """A timer of one device. Made by `StreamExecutor.create_timer()`.

    ``start(stream)`` and ``stop(stream)`` are enqueued on the stream; after the stream has
    passed both, `nanoseconds()` is the time it spent in between.
    """

    _destroy = "destroy_timer"
    _kind = "timer"

    def start(self, stream: "Stream") -> None:
        self._check_open()
        self.executor._check_stream(stream)
        self.executor._call("start_timer", stream._handle, self._handle)

    def stop(self, stream: "Stream") -> None:
        self._check_open()
        self.executor._check_stream(stream)
        self.executor._call("stop_timer", stream._handle, self._handle)

    def nanoseconds(self) -> int:
        """Device time between start and stop, in nanoseconds (0 before both have run)."""
        self._check_open()
        return int(self.executor.platform._timer_fns.nanoseconds(self._handle))

    @property
    def seconds(self) -> float:
        return self.nanoseconds() * 1e-9
