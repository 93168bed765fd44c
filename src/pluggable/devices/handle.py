"""The lifetime shared by streams, events and timers: an opaque plugin handle owned by one
executor, freed exactly once by `close()`, a ``with`` block, or a finalizer that queues the
release for the executor's next safe point."""
from __future__ import annotations

import weakref

from ..base.errors import FailedPreconditionError

TYPE_CHECKING = False  # typing's constant, without importing typing at start-up
if TYPE_CHECKING:
    from .executor import StreamExecutor


def finalizer(obj, fn, *args) -> weakref.finalize:
    """``weakref.finalize(obj, fn, *args)`` that does not run at interpreter exit.

    At exit the plugin manager's shutdown closes every executor in order (event managers,
    pools, streams, then the device), which frees everything in the plugin; finalizers that
    ran before it, as weakref's exit hook would, leave live objects looking closed to it.
    """
    f = weakref.finalize(obj, fn, *args)
    f.atexit = False
    return f


class PluginHandle:
    _destroy = ""  # the SP_StreamExecutor callback that frees the handle
    _kind = ""

    def __init__(self, executor: "StreamExecutor", handle):
        self.executor = executor
        # A plugin may use NULL as a valid handle value: the host never tests it for truth.
        self._handle = handle
        self._finalizer = finalizer(self, executor._queue_release, self._destroy, handle)

    @property
    def handle(self):
        """The plugin's opaque handle, as an integer or None."""
        return self._handle

    @property
    def is_closed(self) -> bool:
        return not self._finalizer.alive

    #: Why the host closed this handle itself, for threads that still use it.
    closed_because = ""

    def _check_open(self) -> None:
        if not self._finalizer.alive:
            raise FailedPreconditionError(
                self.closed_because or
                f"this {self._kind} was closed; create a new one with "
                f"{type(self.executor).__name__}.create_{self._kind}()",
                plugin=self.executor.platform.label, call=self._kind)
        self.executor._check_open()

    def close(self) -> None:
        """Frees the plugin's handle now; idempotent."""
        if self._finalizer.alive:
            self._finalizer.detach()
            self.executor._release_now(self._destroy, self._handle)
            self._after_close()

    def _after_close(self) -> None:
        """What a subclass drops once the plugin has freed the handle."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        state = " closed" if self.is_closed else ""
        return f"<{type(self).__name__} on {self.executor.name}{state}>"
