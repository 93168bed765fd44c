"""The staging ring: pinned host memory that small copies go through without a hand-off.

A small upload copies the caller's bytes into the ring on the calling thread and enqueues the
device copy from there; nothing waits and nothing is handed to the event manager's thread.
The ring is one block of the executor's pinned host pool (`StreamExecutor.host_allocator`),
given out in order, round and round. A region may be given out again only once the device
copy that reads (or writes) it is done; the ring learns that from *fences*: every eighth of
the ring, one pooled event is recorded on each stream that copied through the ring since
the previous fence. Only when the ring comes round to a region whose fence is not passed
yet does a caller wait for it (bounded by the deadline, as every host wait), so a steady
stream of small copies costs one event per eighth of the ring, not one per copy.

Regions are handed out under one lock, which is also held while the copy is enqueued: a
fence recorded after a region was handed out is then always recorded after its copy.
"""
from __future__ import annotations

import collections
import ctypes
import threading
from typing import TYPE_CHECKING, Callable, Deque, Dict, List, Tuple

from ..base.errors import DeadlineExceededError, FailedPreconditionError, PluggableError

if TYPE_CHECKING:
    from .event import Event
    from .executor import StreamExecutor
    from .stream import Stream

#: Bytes of the ring (pinned host memory, taken from the host pool on first use).
RING_BYTES = 4 << 20
#: The smallest ring worth having, when the plugin's pinned memory is short.
MIN_RING_BYTES = 64 << 10
#: A fence every ring size / this many bytes handed out.
FENCES_PER_LAP = 8
_ALIGN = 64


class StagingRing:
    """Pinned host memory for small copies of one executor, reused in stream order."""

    def __init__(self, executor: "StreamExecutor", capacity: int = RING_BYTES):
        self._executor = executor
        self._capacity = capacity
        self._fence_every = max(_ALIGN, capacity // FENCES_PER_LAP)
        self._lock = threading.Lock()
        self._base = 0  # the ring's address, once allocated
        # Absolute positions (they only grow; the address is base + position % capacity).
        self._head = 0  # where the next region starts
        self._tail = 0  # every copy through a region before this is done
        self._fenced = 0  # fences cover every region before this
        self._fences: Deque[Tuple[int, List[Tuple["Event", "Stream"]]]] = collections.deque()
        self._unfenced: Dict[int, "Stream"] = {}  # streams that copied since the last fence
        self._closed = False

    @property
    def held_events(self) -> int:
        """Events of the event manager's pool that fences hold right now."""
        return sum(len(events) for _, events in self._fences)

    @property
    def capacity(self) -> int:
        return self._capacity

    def copy(self, stream: "Stream", nbytes: int, enqueue: Callable[[int], None]) -> int:
        """Hands out ``nbytes`` of the ring, calls ``enqueue(address)`` to fill or enqueue
        the copy through it on ``stream``, and returns the address; 0 (and no call) when
        ``nbytes`` is more than a quarter of the ring, which then goes another way. If
        ``enqueue`` raises, the region goes back at once (nothing uses it)."""
        size = -(-nbytes // _ALIGN) * _ALIGN
        with self._lock:
            if self._closed:
                raise FailedPreconditionError(
                    f"{self._executor.name} is closed; its staging memory is gone",
                    plugin=self._executor.platform.label, call="staging")
            if not self._base and self._capacity:
                self._get_memory()
            if size > self._capacity // 4:  # a quarter: a lap holds several copies
                return 0
            start = self._head
            offset = start % self._capacity
            if offset + size > self._capacity:  # no region wraps: start the next lap
                start += self._capacity - offset
                offset = 0
            if self._tail < start + size - self._capacity:
                self._reclaim(start + size - self._capacity)
            address = self._base + offset
            enqueue(address)
            self._head = start + size
            self._unfenced[id(stream)] = stream
            if self._head - self._fenced >= self._fence_every:
                self._fence_later()
            return address

    def _get_memory(self) -> None:
        """Takes the ring's block from the host pool: the full size, else the largest power
        of two down to `MIN_RING_BYTES` that the plugin gives; without one the ring stays
        empty and every copy goes another way. With the lock held."""
        from ..base.errors import ResourceExhaustedError

        while True:
            try:
                self._base = self._executor.host_allocator.allocate(self._capacity)
                return
            except ResourceExhaustedError:
                self._capacity //= 2
                if self._capacity < MIN_RING_BYTES:
                    self._capacity = 0
                    return
                self._fence_every = max(_ALIGN, self._capacity // FENCES_PER_LAP)

    def _fence(self) -> None:
        """Records a fence on every stream that copied through the ring since the last one.
        With the lock held. Raises (the ring unchanged) when an event cannot be recorded."""
        manager = self._executor.event_manager
        events: List[Tuple["Event", "Stream"]] = []
        try:
            for stream in self._unfenced.values():
                if stream.is_closed:  # destroying a stream finishes its work
                    continue
                event = manager.take_event()
                events.append((event, stream))
                event.record(stream)
        except BaseException:
            for event, _ in events:
                manager.give_back(event)
            raise
        self._unfenced.clear()
        self._fenced = self._head
        self._fences.append((self._head, events))

    def _fence_later(self) -> None:
        """`_fence`, or nothing if it fails: the copy was enqueued, and the fence is tried
        again by the next copy or, when the memory is needed, by `_reclaim`."""
        try:
            self._fence()
        except PluggableError:
            pass

    def _reclaim(self, needed: int) -> None:
        """Waits until the regions before ``needed`` are free. With the lock held; nothing
        is enqueued yet, so it may raise (past the deadline, say) and leave the ring as it
        was."""
        if self._fenced < needed:
            try:
                self._fence()
            except PluggableError:
                self._wait_for_every_stream()
                return
        manager = self._executor.event_manager
        while self._tail < needed:
            position, events = self._fences[0]
            for event, stream in events:
                if not (event.is_closed or stream.is_closed):
                    # A failed copy reads nothing more: its region is free either way, and
                    # the stream reports the error to whoever uses its results.
                    self._executor.await_event(event._handle, "staging")
            self._fences.popleft()
            for event, _ in events:
                manager.give_back(event)
            self._tail = position

    def _wait_for_every_stream(self) -> None:
        """Frees the whole ring without fences (no event could be recorded): waits for every
        stream that copied through it. With the lock held."""
        streams = dict(self._unfenced)
        for _, events in self._fences:
            streams.update((id(stream), stream) for _, stream in events)
        for stream in streams.values():
            if not stream.is_closed:
                try:
                    self._executor.block_host_until_done(stream)
                except DeadlineExceededError:
                    raise
                except PluggableError:
                    if stream.is_closed or not stream.status().ok:
                        continue  # a failed stream runs no more copies
                    raise  # the wait itself failed: the ring stays as it is
        manager = self._executor._event_manager
        for _, events in self._fences:
            for event, _ in events:
                if manager is not None:
                    manager.give_back(event)
        self._fences.clear()
        self._unfenced.clear()
        self._fenced = self._tail = self._head

    def close(self, wait: bool = False) -> None:
        """Stops handing out memory and gives the fences' events back to the event manager
        (which destroys its pool when it closes). With ``wait``, first waits for every copy
        through the ring and returns the ring's memory to the host pool; without, the memory
        goes with the pool (the executor closes it once the device's work is done)."""
        with self._lock:
            if wait and self._base and not self._closed:
                if self._head > self._tail:
                    self._reclaim(self._head)
                self._executor.host_allocator.deallocate(self._base)
                self._base = 0
            self._closed = True
            manager = self._executor._event_manager
            while self._fences:
                _, events = self._fences.popleft()
                for event, _ in events:
                    if manager is not None:
                        manager.give_back(event)


def staged_view(address: int, nbytes: int):
    """``nbytes`` of host memory at ``address`` as a ctypes array (for NumPy views)."""
    return (ctypes.c_char * nbytes).from_address(address)
