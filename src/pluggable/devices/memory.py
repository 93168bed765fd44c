"""Device and host memory handed out by a StreamExecutor.

`DeviceMemory` wraps an ``SP_DeviceMemoryBase``: the plugin's opaque pointer and its size.
`HostMemory` is host memory from the plugin's ``host_memory_allocate`` (pinned, on real
hardware) or ``unified_memory_allocate``; it exposes the buffer protocol through `numpy()`
and `memoryview()`. Both are made by `StreamExecutor` methods, free their memory exactly once
(`close()`, a ``with`` block, or, when dropped open, a release queued for the executor's next
safe point), and keep their executor alive.
"""
from __future__ import annotations

import ctypes

from .handle import finalizer
from ..base import native as _native
from ..base.native import compiled as _compiled
from ..abi.stream_executor import SP_DeviceMemoryBase
from ..base.errors import FailedPreconditionError, InvalidArgumentError

TYPE_CHECKING = False  # typing's constant, without importing typing at start-up
if TYPE_CHECKING:
    from typing import Optional
    from .executor import StreamExecutor


_fns = _native.bind(_native.lib, {
    "pluggable_ClaimHostMemory": (ctypes.c_int, (ctypes.c_void_p, ctypes.c_char_p,
                                                 ctypes.c_void_p, ctypes.c_uint64,
                                                 ctypes.c_char_p, ctypes.c_size_t)),
    #   int (const void* key, const char* call, const void* address, uint64_t bytes,
    #        char* why, size_t n)   -> 1 usable, 0 refused, -1 refused and not to be freed
    "pluggable_ReleaseHostMemory": (None, (ctypes.c_void_p, ctypes.c_void_p)),
    #   void (const void* key, const void* address)
})
_ClaimHost, _ReleaseHost = _fns["pluggable_ClaimHostMemory"], _fns["pluggable_ReleaseHostMemory"]


def claim_host_memory(key: int, call: str, address: int, size: int):
    """``(result, why)``: the runtime library's check of a host or unified block a plugin's
    ``call`` returned (1 usable and now claimed, 0 refused, -1 refused and overlapping live
    memory), and why it was refused."""
    why = ctypes.create_string_buffer(480)
    result = _ClaimHost(key, call.encode(), address, size, why, len(why))
    return result, why.value.decode("utf-8", "replace")


def release_host_memory(key: int, address: int) -> None:
    """Forgets the claim on a host or unified block before it goes back to the plugin."""
    _ReleaseHost(key, address)


class DeviceMemory(_compiled.Memory):
    """A range of device memory: ``address`` (the plugin's opaque pointer) and ``size``.

    An owning `DeviceMemory` comes from `StreamExecutor.allocate` and returns its memory on
    `close()` (or, dropped without it, at its executor's next safe point). `view()` gives a
    non-owning sub-range that keeps the owner alive. ``DeviceMemory(executor, address, size,
    payload=0, owner=None)`` wraps a range it does not own.
    """

    # The range is the SP_DeviceMemoryBase that allocate filled and close() gives back, kept
    # in the C base (pluggable._compiled.Memory, which also holds `executor`, `_owner`, `address`,
    # `size`, `payload`, `is_closed` and `close()`). The struct that copies and kernels pass
    # to the plugin (`_base`, `_ref`) is a ctypes copy of it, made on first use.
    __slots__ = ()

    @property
    def _base(self) -> SP_DeviceMemoryBase:
        """The SP_DeviceMemoryBase the plugin's calls take."""
        return (self._struct or self._make_struct())[0]

    @property
    def _ref(self):
        """``byref(self._base)``, made once."""
        return (self._struct or self._make_struct())[1]

    def _make_struct(self):
        base = SP_DeviceMemoryBase.new(opaque=self.address or None, size=self.size,
                                       payload=self.payload)
        self._struct = (base, ctypes.byref(base))
        return self._struct

    def view(self, offset: int, size: int) -> "DeviceMemory":
        """The sub-range ``[offset, offset + size)`` of this memory, without copying."""
        self._check_open()
        if offset < 0 or size < 0 or offset + size > self.size:
            raise InvalidArgumentError(
                f"view({offset}, {size}) does not fit in device memory of {self.size} bytes; "
                f"offset and size must be >= 0 and offset + size <= {self.size}",
                call="DeviceMemory.view")
        return DeviceMemory(self.executor, self.address + offset if self.address else 0, size,
                            self.payload, self._owner or self)

    @classmethod
    def unchecked(cls, executor: "StreamExecutor", address: int, size: int) -> "DeviceMemory":
        """A non-owning handle for an arbitrary address and size, which the host does not
        check: for plugin authors testing that their plugin rejects bad device pointers."""
        return cls(executor, address, size)

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
