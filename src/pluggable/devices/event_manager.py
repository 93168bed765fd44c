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

The poller cannot die: a status outside ``SE_EventStatus``, an error from
``get_event_status`` or any exception in its loop makes the affected marker fail (its error
is raised to whoever waits on it) and becomes a `PluggableWarning` naming the plugin; the
thread goes on. `close` waits a bounded time (at interpreter exit, ``PLUGGABLE_EXIT_TIMEOUT``)
and then leaves what is still pending to the operating system, on purpose.
"""
from __future__ import annotations

import threading
import time
import traceback
from typing import TYPE_CHECKING, Callable, List, Optional

from ..base.errors import warn
from ..base.errors import (
    CallbackWarning, DeadlineExceededError, FailedPreconditionError, PluggableError,
    PluggableWarning)
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

    __slots__ = ("event", "stream", "error", "_fns", "_manager")

    def __init__(self, event: Event, stream: "Stream", manager: "EventManager"):
        self.event: Optional[Event] = event
        self.stream = stream
        # Set when the point was passed with an error the stream itself does not report.
        self.error: Optional[PluggableError] = None
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
        """Blocks the host until the stream has passed this point (at most the deadline)."""
        event = self.event
        if event is not None:
            try:
                event.synchronize()
            except DeadlineExceededError:
                raise
            except PluggableError as exc:
                # Failed work: whoever waits on the stream itself gets the error. An error
                # the stream does not report (a broken event) is raised here.
                if self.stream.is_closed or not self.stream.status().ok:
                    return
                raise exc
        if self.error is not None:
            raise self.error


class EventManager:
    """Runs host functions after stream work, for one StreamExecutor."""

    def __init__(self, executor: "StreamExecutor"):
        self._executor = executor
        self._cond = threading.Condition(threading.RLock())
        self._pending: List[Marker] = []
        self._pool: List[Event] = []
        self._thread: Optional[threading.Thread] = None
        self._running = 0  # passed markers whose functions are running right now
        self._closed = False

    # -- public ----------------------------------------------------------------------------
    def mark(self, stream: "Stream") -> Marker:
        """A marker for the work enqueued on ``stream`` so far."""
        return self._enqueue(stream, None)

    def then_execute(self, stream: "Stream", fn: Callable[[], object]) -> Marker:
        """Runs ``fn()`` on the poller thread once ``stream`` has passed this point."""
        return self._enqueue(stream, fn)

    def take_event(self) -> Event:
        """An event of the pool (or a new one) for the caller's own use; `give_back` returns
        it. The pool is shared with the markers, so no event sits idle in two places."""
        with self._cond:
            if self._closed:
                raise FailedPreconditionError(
                    f"{self._executor.name} is being closed (or was): no more work can be "
                    f"queued on it. Close devices only once every thread is done with them",
                    plugin=self._executor.platform.label, call="EventManager")
            if self._pool:
                return self._pool.pop()
        return self._executor.create_event()

    def give_back(self, event: Event) -> None:
        """Returns an event from `take_event` to the pool."""
        with self._cond:
            if not self._closed:
                self._pool.append(event)
                return
        event.close()  # the pool is gone: nothing would destroy it

    def wait(self, stream: "Stream", limit: Optional[float] = None,
             call: str = "block_host_for_event") -> int:
        """Blocks until the work enqueued on ``stream`` so far is done: one pooled event,
        recorded and polled on the calling thread (bounded by ``limit`` seconds, default the
        deadline; `DeadlineExceededError` names ``call``), with nothing handed to the poller
        thread. Returns the event's final state (COMPLETE, or ERROR when that work
        failed)."""
        stream._check_open()  # a stream closed (replaced) meanwhile: its own words
        event = self.take_event()
        executor = self._executor
        try:
            executor._call("record_event", stream._handle, event._handle)
            return executor.await_event(event._handle, call, limit)
        finally:
            self.give_back(event)

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
            while self._pending or self._running:
                self._cond.wait(0.05)

    def close(self, timeout: Optional[float] = None) -> bool:
        """Runs what is pending once its work is done, then stops the poller and frees the
        pooled events. Idempotent. With ``timeout`` (seconds), gives up on work that is not
        done by then: warns, leaves it (and its events) alone, and returns False."""
        with self._cond:
            if self._closed and not self._pending:
                return True
            self._closed = True
            self._cond.notify_all()
        ends = None if timeout is None else time.monotonic() + timeout
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(None if ends is None else max(0.0, ends - time.monotonic()))
            if self._thread.is_alive():
                return self._give_up(timeout)
        if not self._drain_without_thread(ends):
            return self._give_up(timeout)
        for event in self._pool:
            event.close()
        self._pool.clear()
        return True

    def _give_up(self, timeout: Optional[float]) -> bool:
        
        from ..base import limits

        timeout = limits.deadline() if timeout is None else timeout

        warn(
            f"pluggable: {self._executor.name}: {len(self._pending)} piece(s) of device work "
            f"were not done within {timeout:g} s; they, and the memory they use, are left to "
            f"the operating system ({self._executor.platform.label})",
            PluggableWarning)
        return False

    @property
    def pending(self) -> int:
        return len(self._pending)

    # -- internals -------------------------------------------------------------------------
    def _enqueue(self, stream: "Stream", fn) -> Marker:
        event = self.take_event()
        try:
            event.record(stream)
        except BaseException:
            self.give_back(event)  # destroyed instead when the manager closed meanwhile
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
            error = None
            try:
                state = event.status()
            except PluggableError as exc:  # a broken status, or the device is gone
                state, error = EventStatus.ERROR, exc
                if not self._executor.is_closed:
                    self._executor._defer_warning(
                        f"the event manager treats a point of a stream as failed: {exc}",
                        PluggableWarning)
            if state not in _DONE:
                blocked.add(id(marker.stream))
                continue
            if state == EventStatus.COMPLETE:
                event._passed()  # the stream's writes before the point are done
            with self._cond:
                fns, marker._fns = marker._fns, []
                marker.error = error
                self._complete(marker)
                self._running += 1
            try:
                self._run(fns)
            finally:
                with self._cond:
                    self._running -= 1
                    self._cond.notify_all()
            ran += 1
        return ran

    def _poll(self) -> None:
        while True:
            try:
                self._poll_loop()
                return
            except BaseException as exc:  # the thread must not die: say so, and go on
                self._executor._defer_warning(
                    f"the event manager's thread caught {type(exc).__name__}: {exc} "
                    f"({self._executor.platform.label}); it goes on", PluggableWarning)
                time.sleep(0.001)

    def _poll_loop(self) -> None:
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
            event = oldest.event
            if len(streams) == 1 and event is not None:
                # One stream: wait until its oldest point is passed (or fails).
                try:
                    event.synchronize()
                except PluggableError:
                    pass  # the next harvest completes it as failed, or it is still pending
                continue
            time.sleep(delay)
            delay = min(0.001, delay * 2 or 0.00002)

    def _drain_without_thread(self, ends: Optional[float] = None) -> bool:
        """Completes every pending marker; False when ``ends`` (a monotonic time) passed
        first."""
        while True:
            with self._cond:
                if not self._pending:
                    return True
                oldest = self._pending[0]
            event = oldest.event
            if event is not None:
                left = None if ends is None else max(0.001, ends - time.monotonic())
                try:
                    self._executor.block_host_for_event(event, timeout=left)
                except DeadlineExceededError:
                    return False
                except PluggableError:
                    pass
            self._harvest()
            if ends is not None and time.monotonic() > ends and self._pending:
                return False
