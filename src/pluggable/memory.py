"""Device and host memory handed out by a StreamExecutor.

`DeviceMemory` wraps an ``SP_DeviceMemoryBase``: the plugin's opaque pointer and its size.
`HostMemory` is host memory from the plugin's ``host_memory_allocate`` (pinned, on real
hardware) or ``unified_memory_allocate``; it exposes the buffer protocol through `numpy()`
and `memoryview()`. Both are made by `StreamExecutor` methods, free their memory exactly once
(`close()`, a ``with`` block, or a finalizer that queues the release), and keep their
executor alive.
"""
from __future__ import annotations

import ctypes

from ._handle import finalizer
from .abi.stream_executor import SP_DeviceMemoryBase
from .errors import FailedPreconditionError, InvalidArgumentError

TYPE_CHECKING = False  # typing's constant, without importing typing at start-up
if TYPE_CHECKING:
    from typing import Optional
    from .executor import StreamExecutor

# SP_DeviceMemoryBase structs an executor keeps for reuse (allocate takes one, close() gives
# it back): at most this many, more than the small allocations a program usually holds at
# once.
_POOLED_MEMORY_STRUCTS = 64


class DeviceMemory:
    """A range of device memory: ``address`` (the plugin's opaque pointer) and ``size``.

    An owning `DeviceMemory` comes from `StreamExecutor.allocate` and returns its memory on
    `close()`. `view()` gives a non-owning sub-range that keeps the owner alive.
    """

    # The range is kept as a tuple of Python integers (`_range`: address, size, payload); the
    # SP_DeviceMemoryBase that copies and kernels pass to the plugin (`_base`, `_ref`) is
    # built on first use. StreamExecutor.allocate (which fills these slots itself) and
    # close() pass the plugin a struct of the executor's pool instead, kept with the
    # registration below, so that deallocate gets back what allocate filled.
    # `_key`: for owning memory, the executor's registration (StreamExecutor._track_memory),
    # which queues the release if the object is collected while it still owns the memory;
    # False once closed, None for memory that never owned its range (views, unchecked).
    # `_struct`: None, or (SP_DeviceMemoryBase, its byref) once made.
    __slots__ = ("executor", "_range", "_struct", "_owner", "_key", "__weakref__")

    def __init__(self, executor: "StreamExecutor", base: SP_DeviceMemoryBase,
                 owner: Optional["DeviceMemory"] = None, owning: bool = False, ref=None):
        self.executor = executor
        self._range = (base.opaque or 0, int(base.size), int(base.payload))
        self._struct = (base, ref if ref is not None else ctypes.byref(base))
        self._owner = owner
        self._key = executor._track_memory(self, *self._range) if owning else None

    @property
    def _base(self) -> SP_DeviceMemoryBase:
        """The SP_DeviceMemoryBase the plugin's calls take."""
        return (self._struct or self._make_struct())[0]

    @property
    def _ref(self):
        """``byref(self._base)``, made once."""
        return (self._struct or self._make_struct())[1]

    def _make_struct(self):
        address, size, payload = self._range
        base = SP_DeviceMemoryBase.new(opaque=address or None, size=size, payload=payload)
        self._struct = (base, ctypes.byref(base))
        return self._struct

    @property
    def address(self) -> int:
        """The plugin's opaque pointer, as an integer (0 for an empty allocation)."""
        return self._range[0]

    @property
    def size(self) -> int:
        return self._range[1]

    @property
    def payload(self) -> int:
        return self._range[2]

    @property
    def is_closed(self) -> bool:
        if self._owner is not None:
            return self._owner.is_closed
        key = self._key  # None: never owned memory; False: closed
        return key is False or (key is not None and key not in self.executor._live_memory)

    def view(self, offset: int, size: int) -> "DeviceMemory":
        """The sub-range ``[offset, offset + size)`` of this memory, without copying."""
        self._check_open()
        if offset < 0 or size < 0 or offset + size > self.size:
            raise InvalidArgumentError(
                f"view({offset}, {size}) does not fit in device memory of {self.size} bytes; "
                f"offset and size must be >= 0 and offset + size <= {self.size}",
                call="DeviceMemory.view")
        base = SP_DeviceMemoryBase.new()
        base.opaque = self.address + offset if self.address else None
        base.size = size
        base.payload = self._range[2]
        return DeviceMemory(self.executor, base, owner=self._owner or self)

    @classmethod
    def unchecked(cls, executor: "StreamExecutor", address: int, size: int) -> "DeviceMemory":
        """A non-owning handle for an arbitrary address and size, which the host does not
        check: for plugin authors testing that their plugin rejects bad device pointers."""
        base = SP_DeviceMemoryBase.new()
        base.opaque = address or None
        base.size = size
        return cls(executor, base)

    def close(self) -> None:
        """Returns the memory to the device now (a no-op for views and closed memory)."""
        # Exactly once: dict.pop is atomic, and whoever removes the key frees the memory.
        # Dropping the weak reference first means no callback when this object dies (no
        # local variable holds it: `allocate(n).close()` ends this object's life on return).
        key = self._key
        if key:
            executor = self.executor
            struct = executor._live_memory.pop(key, None)
            if struct is not None:
                self._key = False
                if not executor._closed:  # destroying the executor released everything
                    executor._deallocate(executor._device_ptr, struct[1])
                    pool = executor._memory_structs
                    if len(pool) < _POOLED_MEMORY_STRUCTS:
                        pool.append(struct)

    def _check_open(self) -> None:
        if self.is_closed:
            raise FailedPreconditionError(
                "this device memory was already freed (close() was called); allocate new "
                "memory with StreamExecutor.allocate()", call="DeviceMemory")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        state = " closed" if self.is_closed else ""
        return (f"<DeviceMemory {self.size} bytes at 0x{self.address:x} on "
                f"{self.executor.name}{state}>")


class HostMemory:
    """Host memory allocated through the plugin; a buffer the copies can use directly."""

    __slots__ = ("executor", "address", "size", "kind", "_array", "_release", "_finalizer",
                 "__weakref__")

    def __init__(self, executor: "StreamExecutor", address: int, size: int, kind: str,
                 release: Optional[str]):
        self.executor = executor
        self.address = address
        self.size = size
        self.kind = kind  # "host" or "unified"
        self._release = release  # the SP_StreamExecutor callback that frees it, or None
        buffer = (ctypes.c_char * size).from_address(address) if size else bytearray()
        import numpy as np

        self._array = np.frombuffer(buffer, dtype=np.uint8)
        self._finalizer = (finalizer(self, executor._queue_release, release, address)
                           if release else None)

    @property
    def is_closed(self) -> bool:
        return self._finalizer is not None and not self._finalizer.alive

    def numpy(self):
        """A uint8 NumPy view of the memory; valid until `close()`."""
        self._check_open()
        return self._array

    def memoryview(self) -> memoryview:
        self._check_open()
        return memoryview(self._array)

    def __buffer__(self, flags):  # Python 3.12+ buffer protocol
        return self.memoryview()

    def close(self) -> None:
        if self._finalizer is not None and self._finalizer.alive:
            self._finalizer.detach()
            self._array = self._array[:0]
            self.executor._release_now(self._release, self.address)

    def _check_open(self) -> None:
        if self.is_closed:
            raise FailedPreconditionError(
                f"this {self.kind} memory was already freed (close() was called)",
                call="HostMemory")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"<HostMemory {self.kind} {self.size} bytes at 0x{self.address:x}>"
