"""The event manager: host work that must wait until a stream has passed a point.

`then_execute(stream, fn)` records an event on ``stream`` and runs ``fn`` on the device's
poller thread once the event has completed (or failed). It is how host buffers and device
memory used by asynchronous work are released only when that work is done. `mark(stream)`
does the same without a function, giving a `Marker`: "the work enqueued on this stream so
far", which other streams can wait for and the host can block on.

One poller thread per device, started on first use. Functions for one stream run in that
stream's order. An exception in a function becomes a `CallbackWarning` at the device's next
synchronisation. Events come from a pool: an event goes back to the pool as soon as the
poller sees it complete, and a completed marker no longer holds one.
"""
from __future__ import annotations

import threading
import time
import traceback
from typing import TYPE_CHECKING, Callable, List, Optional

from .errors import CallbackWarning, PluggableError
from .event import Event, EventStatus

if TYPE_CHECKING:
    from .executor import StreamExecutor
    from .stream import Stream

_DONE = (EventStatus.COMPLETE, EventStatus.ERROR)


class Keep:
    """A function for `EventManager.then_execute` that holds ``obj`` (host memory the device
    still uses) until it runs, and then lets go."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __call__(self):
        self.obj = None


class Marker:
    """A point in a stream. ``event`` is None once the stream has passed it."""

    __slots__ = ("event", "stream", "_fns", "_manager")

    def __init__(self, event: Event, stream: "Stream", manager: "EventManager"):
        self.event: Optional[Event] = event
        self.stream = stream
        self._fns: List[Callable[[], object]] = []
        self._manager = manager

    def add_callback(self, fn: Callable[[], object]) -> bool:
        """Has ``fn()`` run once the point is passed; False (and ``fn`` not kept) if it has
        been passed already."""
        with self._manager._cond:
            if self.event is None:
                return False
            self._fns.append(fn)
            return True

    @property
    def done(self) -> bool:
        return self.event is None

    def make_wait(self, stream: "Stream") -> None:
        """Makes work enqueued on ``stream`` from now on wait for this point."""
        event = self.event
        if event is None or stream is self.stream:
            return  # passed already, or the same stream orders it anyway
        event.wait(stream)

    def synchronize(self) -> None:
        """Blocks the host until the stream has passed this point."""
        event = self.event
        if event is not None:
            try:
                event.synchronize()
            except PluggableError:
                # The work failed; whoever waits on the stream itself gets the error.
                pass


class EventManager:
    """Runs host functions after stream work, for one StreamExecutor."""

    def __init__(self, executor: "StreamExecutor"):
        self._executor = executor
        self._cond = threading.Condition(threading.RLock())
        self._pending: List[Marker] = []
        self._pool: List[Event] = []
        self._thread: Optional[threading.Thread] = None
        self._closed = False

    # -- public ----------------------------------------------------------------------------
    def mark(self, stream: "Stream") -> Marker:
        """A marker for the work enqueued on ``stream`` so far."""
        return self._enqueue(stream, None)

    def then_execute(self, stream: "Stream", fn: Callable[[], object]) -> Marker:
        """Runs ``fn()`` on the poller thread once ``stream`` has passed this point."""
        return self._enqueue(stream, fn)

    @staticmethod
    def when_done(markers: List[Optional[Marker]], fn: Callable[[], object]) -> None:
        """Runs ``fn()`` once every marker has been passed (at once if all have). The markers
        may belong to the event managers of several devices."""
        waiting = [m for m in markers if m is not None and m.event is not None]
        if not waiting:
            fn()
            return
        remaining = [len(waiting)]
        lock = threading.Lock()

        def one_done():
            with lock:
                remaining[0] -= 1
                last = remaining[0] == 0
            if last:
                fn()

        for marker in waiting:
            if not marker.add_callback(one_done):
                one_done()

    def synchronize(self) -> None:
        """Waits until every function handed over so far has run."""
        with self._cond:
            while self._pending:
                self._cond.wait(0.05)

    def close(self) -> None:
        """Runs what is pending once its work is done, then stops the poller and frees the
        pooled events. Idempotent."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        self._drain_without_thread()
        for event in self._pool:
            event.close()
        self._pool.clear()

    @property
    def pending(self) -> int:
        return len(self._pending)

    # -- internals -------------------------------------------------------------------------
    def _enqueue(self, stream: "Stream", fn) -> Marker:
        with self._cond:
            if self._closed:
                raise RuntimeError(f"the event manager of {self._executor.name} is closed")
            event = self._pool.pop() if self._pool else None
        if event is None:
            event = self._executor.create_event()
        try:
            event.record(stream)
        except BaseException:
            with self._cond:
                self._pool.append(event)
            raise
        marker = Marker(event, stream, self)
        if fn is not None:
            marker._fns.append(fn)
        with self._cond:
            self._pending.append(marker)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._poll, name=f"pluggable-events-{self._executor.name}",
                    daemon=True)
                self._thread.start()
            self._cond.notify()
        return marker

    def _complete(self, marker: Marker) -> None:
        """Called with the lock held: the stream has passed ``marker``."""
        event, marker.event = marker.event, None
        self._pool.append(event)
        self._pending.remove(marker)

    def _run(self, fns) -> None:
        for fn in fns:
            try:
                fn()
            except BaseException as exc:
                detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
                self._executor._defer_warning(
                    f"a function run by the event manager raised {detail}", CallbackWarning)

    def _harvest(self) -> int:
        """Completes every marker whose event is done, running functions in stream order."""
        ran = 0
        with self._cond:
            snapshot = list(self._pending)
        blocked = set()  # streams with a marker not yet passed: later ones must wait
        for marker in snapshot:
            event = marker.event
            if event is None or id(marker.stream) in blocked:
                continue
            try:
                state = event.status()
            except PluggableError:  # the device is gone: nothing will complete any more
                state = EventStatus.ERROR
            if state not in _DONE:
                blocked.add(id(marker.stream))
                continue
            with self._cond:
                fns, marker._fns = marker._fns, []
                self._complete(marker)
                self._cond.notify_all()
            self._run(fns)
            ran += 1
        return ran

    def _poll(self) -> None:
        delay = 0.0
        while True:
            with self._cond:
                while not self._pending and not self._closed:
                    self._cond.wait()
                if not self._pending and self._closed:
                    return
                streams = {id(m.stream) for m in self._pending}
                oldest = self._pending[0]
            if self._harvest():
                delay = 0.0
                continue
            if len(streams) == 1 and oldest.event is not None:
                # One stream: sleep in the plugin until its oldest point is passed.
                oldest.synchronize()
                continue
            time.sleep(delay)
            delay = min(0.001, delay * 2 or 0.00002)

    def _drain_without_thread(self) -> None:
        while True:
            with self._cond:
                if not self._pending:
                    return
                oldest = self._pending[0]
            oldest.synchronize()
            self._harvest()
