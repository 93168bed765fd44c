"""Streams: ordered queues of device work (``SP_Stream``)."""
from __future__ import annotations

import ctypes
from collections import namedtuple

from ..base import native as _native
from ..base.native import compiled as _compiled
from .handle import PluginHandle, finalizer
from ..abi.tf_status import TF_Code
from ..base.errors import DeadlineExceededError, PluggableError, error_for_code

TYPE_CHECKING = False  # typing's constant, without importing typing at start-up
if TYPE_CHECKING:
    from typing import Optional, Set

    from .event import Event


class StreamStatus(namedtuple("StreamStatus", "code message")):
    """A stream's state: its `TF_Code` and the plugin's message."""

    __slots__ = ()

    @property
    def ok(self) -> bool:
        return self.code == TF_Code.TF_OK


class Stream(PluginHandle):
    """A stream of one device. Work enqueued on it runs in order; `synchronize()` waits for
    it. Made by `StreamExecutor.create_stream()`.

    Host buffers handed to asynchronous copies on the stream stay referenced by the device's
    event manager until the copies are done.
    """

    _destroy = "destroy_stream"
    _kind = "stream"
    name: Optional[str] = None  # "compute", ... for a device's own streams (name_stream)

    def __init__(self, executor, handle):
        self._callback_tokens: Set[int] = set()
        # The count of writes its work makes to device buffers, and which are known done
        # (see _compiled/ledger.c): after a failure, what the failed work was to write is lost.
        self._ledger = _compiled.Ledger()
        super().__init__(executor, handle)

    def wait_for(self, other: "Stream") -> None:
        """Makes work enqueued on this stream from now on wait for everything enqueued on
        ``other`` so far."""
        self._check_open()
        other._check_open()
        if other.executor is not self.executor:
            raise error_for_code(TF_Code.TF_INVALID_ARGUMENT)(
                f"streams of different devices ({self.executor.name} and "
                f"{other.executor.name}) cannot wait for each other; use an event and the host",
                call="Stream.wait_for")
        ex = self.executor
        if ex._fns.get("create_stream_dependency") is not None:
            ex._call("create_stream_dependency", self._handle, other._handle)
            return
        with ex.create_event() as event:  # fallback: an event recorded on `other`
            event.record(other)
            event.wait(self)

    def wait_event(self, event: "Event") -> None:
        """Makes later work on this stream wait until ``event`` completes."""
        event.wait(self)

    def status(self) -> StreamStatus:
        """The stream's status: an error once any of its work failed. A plugin without
        ``get_stream_status`` always reports OK."""
        self._check_open()
        ex = self.executor
        fn = ex._fns.get("get_stream_status")
        if fn is None:
            return StreamStatus(TF_Code.TF_OK, "")
        status = _native.acquire_status()
        try:
            fn(ex._device_ptr, self._handle, status.address)
            return StreamStatus(TF_Code(status.code), status.message)
        finally:
            _native.release_status(status)

    def raise_if_error(self) -> None:
        """Raises the exception of the stream's status if it is not OK."""
        state = self.status()
        if not state.ok:
            raise self.executor._error(state.code, state.message,
                                       "SP_StreamExecutor.get_stream_status")

    def synchronize(self) -> None:
        """Waits until all work enqueued so far is done; raises if any of it failed. A
        stream of the user's whose work failed reports that once and goes on with a new
        plugin stream (plugin stream errors are sticky); a device's own streams are replaced
        by their device (`PluggableDevice.recover_streams`)."""
        self._check_open()
        mark = self._ledger.mark()
        from .executor import CALLBACKS

        before = CALLBACKS.next_token
        try:
            self.executor.block_host_until_done(self)
            if self._callback_tokens:  # work done; its host callbacks too
                CALLBACKS.wait_until_run(self.executor, before, self._callback_tokens)
        except PluggableError as exc:
            if (self.name is None and not isinstance(exc, DeadlineExceededError)
                    and not self.is_closed and not self.status().ok):
                self._renew(str(exc))
            raise
        self._ledger.verified(mark)

    def _renew(self, why: str) -> None:
        """Swaps the failed plugin stream for a new one; what the failed work was to write
        reads as lost (its ledger fails)."""
        ex = self.executor
        handle = ctypes.c_void_p()
        ex._call("create_stream", ctypes.byref(handle))
        old = self._handle
        self._finalizer.detach()
        self._handle = handle.value
        self._finalizer = finalizer(self, ex._queue_release, self._destroy, self._handle)
        self._ledger.fail(f"a stream of {ex.name} failed ({why})")
        self._ledger = _compiled.Ledger()
        ex._release_now(self._destroy, old)
        self._after_close()  # callbacks queued on the old stream can no longer run

    def host_callback(self, fn) -> None:
        """Enqueues ``fn()`` to run on the host once the work before it is done."""
        self.executor.host_callback(self, fn)

    def _after_close(self) -> None:
        from .executor import CALLBACKS

        # destroy_stream finished the queued work: callbacks the plugin skipped (after an
        # error) can no longer run.
        for token in self._callback_tokens:
            CALLBACKS.discard(token)
        self._callback_tokens.clear()
