"""The BFC allocator: device memory (and a pinned host pool) carved out of a few large regions.

TensorFlow's PluggableDevice does not call a plugin's ``allocate`` per tensor: it asks for a
few large regions and sub-allocates them with a BFC ("best-fit with coalescing") allocator.
`BFCAllocator` is that allocator. It lives in C, in the host runtime library
(``src/pluggable/_runtime/bfc.c``, whose header comment describes the algorithm), so that
plugin kernels can allocate from it without Python; this module owns the Python side: the
foreign-function table, defaults, errors and statistics.

Regions come from the executor's ``SP_StreamExecutor.allocate`` (``kind="device"``) or from
``host_memory_allocate`` (``kind="host"``, a pinned staging pool). Addresses are plain
integers; wrap one with ``pluggable.devices.memory.DeviceMemory.unchecked(executor, address, size)``
to copy to or from it.
"""
from __future__ import annotations

import ctypes
import operator
import os
from typing import TYPE_CHECKING, Dict, List, NamedTuple, Optional

from ..base import native as _native
from .handle import finalizer
from ..abi.stream_executor import SP_AllocatorStats
from ..base.errors import (
    FailedPreconditionError, InternalError, InvalidArgumentError, ResourceExhaustedError,
    error_for_code)

if TYPE_CHECKING:
    from .executor import StreamExecutor

__all__ = ["BFCAllocator", "Chunk", "DEFAULT_DEVICE_FRACTION", "DEFAULT_UNKNOWN_DEVICE_LIMIT",
           "DEFAULT_HOST_LIMIT"]

#: A device allocator may reserve this fraction of the total memory the plugin reports
#: (``device_memory_usage``), as TensorFlow's PluggableDevice does by default.
DEFAULT_DEVICE_FRACTION = 0.9
#: The limit when the plugin does not report its total memory: a modest amount that works on
#: any real device; pass ``memory_limit`` to use more.
DEFAULT_UNKNOWN_DEVICE_LIMIT = 1 << 30
#: The most a pinned host pool reserves by default (and never more than half of the host's
#: physical memory).
DEFAULT_HOST_LIMIT = 4 << 30

_KINDS = {"device": 0, "host": 1}  # PG_BFC_DEVICE, PG_BFC_HOST
_EXACT = 0x100  # PG_BFC_EXACT: no pooling, every allocation the plugin's own
_MAX_SIZE = 1 << 63
_MAX_ADDRESS = 1 << 64


class PG_BFCChunkInfo(ctypes.Structure):
    """Mirror of ``PG_BFCChunkInfo`` (runtime_internal.h)."""

    _fields_ = [("address", ctypes.c_uint64), ("size", ctypes.c_uint64),
                ("requested", ctypes.c_uint64), ("in_use", ctypes.c_int32),
                ("region", ctypes.c_int32)]


_p = ctypes.c_void_p
_u64 = ctypes.c_uint64
_size = ctypes.c_size_t
# name: (restype, argtypes)                                      C prototype (runtime_internal.h)
_PROTOTYPES = {
    "pluggable_BFCNew": (_p, (ctypes.c_int, _p, _p, _u64, ctypes.c_int, ctypes.c_char_p, _p)),
    #   PG_BFC* (int kind, const SP_Device*, const SP_StreamExecutor*, uint64_t memory_limit,
    #            int allow_growth, const char* name, TF_Status*)
    "pluggable_BFCDelete": (ctypes.c_int64, (_p, ctypes.c_int)),
    #   int64_t (PG_BFC*, int return_regions)   -> allocations still live
    "pluggable_BFCAllocate": (_size, (_p, _u64)),
    #   void* (PG_BFC*, uint64_t size)   -> NULL when out of memory or size 0
    "pluggable_BFCDeallocate": (ctypes.c_int, (_p, _size)),
    #   int (PG_BFC*, void* ptr)   -> 0, or nonzero for a pointer it did not give out
    "pluggable_BFCAllocatedSize": (_u64, (_p, _size)),
    #   uint64_t (PG_BFC*, const void* ptr)
    "pluggable_BFCRefusal": (_size, (_p, ctypes.c_char_p, _size)),
    #   size_t (PG_BFC*, char* buf, size_t n)   -> length of why a plugin's block was refused
    "pluggable_BFCGetStats": (None, (_p, _p)),
    #   void (PG_BFC*, SP_AllocatorStats*)
    "pluggable_BFCResetPeak": (None, (_p,)),
    #   void (PG_BFC*)
    "pluggable_BFCReleaseFreeRegions": (_u64, (_p,)),
    #   uint64_t (PG_BFC*)   -> bytes released
    "pluggable_BFCDescribe": (_size, (_p, ctypes.c_char_p, _size)),
    #   size_t (PG_BFC*, char* buf, size_t n)   -> length needed
    "pluggable_BFCCheck": (ctypes.c_int, (_p, ctypes.c_char_p, _size)),
    #   int (PG_BFC*, char* err, size_t n)   -> 0 when every invariant holds
    "pluggable_BFCSnapshot": (_size, (_p, ctypes.POINTER(PG_BFCChunkInfo), _size)),
    #   size_t (PG_BFC*, PG_BFCChunkInfo* out, size_t capacity)   -> chunk count
}


_fns = _native.bind(_native.lib, _PROTOTYPES)
_BFCNew = _fns["pluggable_BFCNew"]
_BFCDelete = _fns["pluggable_BFCDelete"]
_BFCAllocate = _fns["pluggable_BFCAllocate"]
_BFCDeallocate = _fns["pluggable_BFCDeallocate"]
_BFCAllocatedSize = _fns["pluggable_BFCAllocatedSize"]
_BFCRefusal = _fns["pluggable_BFCRefusal"]
_BFCGetStats = _fns["pluggable_BFCGetStats"]
_BFCResetPeak = _fns["pluggable_BFCResetPeak"]
_BFCReleaseFreeRegions = _fns["pluggable_BFCReleaseFreeRegions"]
_BFCDescribe = _fns["pluggable_BFCDescribe"]
_BFCCheck = _fns["pluggable_BFCCheck"]
_BFCSnapshot = _fns["pluggable_BFCSnapshot"]

_STATS_FIELDS = (
    "num_allocs", "bytes_in_use", "peak_bytes_in_use", "largest_alloc_size", "bytes_limit",
    "bytes_reserved", "peak_bytes_reserved", "bytes_reservable_limit",
    "largest_free_block_bytes",
)


class Chunk(NamedTuple):
    """One chunk of a region, as `BFCAllocator.chunks()` lists them."""

    address: int
    size: int        # bytes, a multiple of 256
    requested: int   # bytes asked for; 0 when free
    in_use: bool
    region: int      # index of its region, regions ordered by address


def _delete(handle: int, executor: "StreamExecutor") -> int:
    """Frees the C allocator; its regions go back to the plugin unless the device is gone
    (destroying it took the plugin's memory back). Safe from a finalizer: it never waits for
    plugin workers."""
    return int(_BFCDelete(handle, 0 if executor.is_closed else 1))


def _human(size: int) -> str:
    value, unit = float(size), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            break
        value /= 1024
    return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"


def _default_host_limit() -> int:
    try:
        physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        physical = 0
    return min(DEFAULT_HOST_LIMIT, physical // 2) if physical > 0 else DEFAULT_HOST_LIMIT


# The host tracer of a running profiling session, or None (set by pluggable.profiler).
_tracer = None


class BFCAllocator:
    """A best-fit-with-coalescing allocator over one executor's memory.

    ``kind="device"`` carves device memory out of regions from ``SP_StreamExecutor.allocate``;
    ``kind="host"`` is a pinned host pool over ``host_memory_allocate`` (the plugin must
    implement it). Addresses are 256-byte aligned integers.

    Defaults:

    - device: ``memory_limit`` = 90% of the total memory the plugin reports, rounded down to
      256 bytes, or 1 GiB when the plugin reports none; ``allow_growth`` = the platform's
      ``force_memory_growth`` (False for most plugins).
    - host: ``memory_limit`` = 4 GiB or half of physical memory, whichever is smaller;
      ``allow_growth`` = True.

    Without growth the first allocation reserves the whole limit as one region; with growth
    regions start at 2 MiB (or the request) and double. ``bytes_reserved`` never exceeds the
    limit. The allocator keeps its executor alive; close it (``close()``, a ``with`` block)
    before the executor, or its regions are reclaimed with the device. ``close()`` must not
    run while another thread is still allocating from it.
    """

    __slots__ = ("executor", "kind", "name", "memory_limit", "allow_growth", "_handle",
                 "_finalizer", "leaked_allocations", "__weakref__")

    def __init__(self, executor: "StreamExecutor", kind: str = "device",
                 memory_limit: Optional[int] = None, allow_growth: Optional[bool] = None,
                 name: Optional[str] = None):
        if kind not in _KINDS:
            raise InvalidArgumentError(
                f"BFCAllocator kind must be 'device' or 'host', not {kind!r}",
                call="BFCAllocator")
        executor._check_open()
        if kind == "host" and executor._fns.get("host_memory_allocate") is None:
            raise InvalidArgumentError(
                f"{executor.name}: a pinned host pool needs SP_StreamExecutor."
                f"host_memory_allocate, which {executor.platform.label} does not implement; "
                f"use executor.host_memory_allocate() for plain host memory instead",
                plugin=executor.platform.label, call="BFCAllocator")
        if memory_limit is None:
            memory_limit = self._default_limit(executor, kind)
        else:
            try:
                memory_limit = operator.index(memory_limit)
            except TypeError:
                raise TypeError(f"memory_limit must be an integer number of bytes, not "
                                f"{type(memory_limit).__name__}") from None
            if not 256 <= memory_limit < 1 << 63:
                raise InvalidArgumentError(
                    f"memory_limit must be at least 256 bytes and below 2**63, got "
                    f"{memory_limit}", call="BFCAllocator")
        if allow_growth is None:
            allow_growth = True if kind == "host" else bool(executor.platform.force_memory_growth)
        self.executor = executor
        self.kind = kind
        self.name = name or f"{executor.name} {kind} memory"
        self.allow_growth = bool(allow_growth)
        self.leaked_allocations = 0
        status = _native.acquire_status()
        try:
            # A platform that asks for no BFC (SP_Platform.use_bfc_allocator = 0) gets an
            # allocator that pools nothing: its allocate sees every allocation.
            exact = kind == "device" and not executor.platform.use_bfc_allocator
            handle = _BFCNew(_KINDS[kind] | (_EXACT if exact else 0),
                             ctypes.addressof(executor._device),
                             ctypes.addressof(executor._se), memory_limit,
                             int(self.allow_growth), self.name.encode("utf-8", "replace"),
                             status.address)
            if not handle:
                raise error_for_code(status.code)(status.message, call="pluggable_BFCNew")
        finally:
            _native.release_status(status)
        self._handle = handle
        self.memory_limit = memory_limit & ~255
        self._finalizer = finalizer(self, _delete, handle, executor)

    @staticmethod
    def _default_limit(executor: "StreamExecutor", kind: str) -> int:
        if kind == "host":
            return _default_host_limit() & ~255
        usage = executor.memory_usage()
        if usage is None or usage[1] <= 0:
            return DEFAULT_UNKNOWN_DEVICE_LIMIT
        return max(256, int(usage[1] * DEFAULT_DEVICE_FRACTION)) & ~255

    # -- the hot path ----------------------------------------------------------------------
    def allocate(self, size: int) -> int:
        """The address of ``size`` fresh bytes (0 for size 0). Raises
        `ResourceExhaustedError` when the memory limit or the device is exhausted."""
        try:
            if 0 < size < _MAX_SIZE:  # ctypes would silently wrap sizes of 2**64 and more
                address = _BFCAllocate(self._handle, size) or self._out_of_memory(size)
                if _tracer is not None:
                    _tracer.alloc(self, size)
                return address
        except (TypeError, ctypes.ArgumentError):
            pass
        return self._allocate_unusual(size)

    def deallocate(self, address: int) -> None:
        """Returns memory from `allocate`; 0 is a no-op. Raises `InvalidArgumentError` for an
        address this allocator did not give out (or already took back)."""
        try:
            if 0 <= address < _MAX_ADDRESS:
                if _tracer is not None and address:
                    _tracer.free(self, address)
                if _BFCDeallocate(self._handle, address):
                    self._deallocate_failed(address)
                return
        except (TypeError, ctypes.ArgumentError):
            pass
        self._deallocate_failed(address)

    def _check_open(self) -> None:
        if self._handle is None:
            if self.executor.stuck:
                raise self.executor._unusable(f"{self.name}: allocating")
            raise FailedPreconditionError(
                f"the BFC allocator {self.name!r} is closed; create a new BFCAllocator",
                plugin=self.executor.platform.label, call="BFCAllocator")

    def _allocate_unusual(self, size) -> int:
        """allocate() for size 0, bad sizes, and integer-like objects ctypes refuses."""
        self._check_open()
        try:
            size = operator.index(size)
        except TypeError:
            raise TypeError(f"allocate: size must be an integer, not {type(size).__name__}") \
                from None
        if size < 0 or size >= _MAX_SIZE:
            raise InvalidArgumentError(
                f"allocate: size must be a non-negative integer below 2**63, got {size}",
                call="BFCAllocator.allocate")
        if size == 0:
            return 0
        return _BFCAllocate(self._handle, size) or self._out_of_memory(size)

    def _out_of_memory(self, size: int) -> int:
        self._check_open()
        buffer = ctypes.create_string_buffer(480)
        if _BFCRefusal(self._handle, buffer, len(buffer)):
            # The plugin handed out memory the host cannot use: a plugin bug, not a full device.
            label = self.executor.platform.label
            raise InternalError(
                f"{label}, device {self.executor.ordinal}: {buffer.value.decode(errors='replace')}"
                f". {self.name} could not allocate {size} bytes; the plugin's allocator is "
                f"not to be trusted: report this to the plugin's authors",
                plugin=label, call="SP_StreamExecutor.allocate")
        raise ResourceExhaustedError(self._oom_message(size),
                                     plugin=self.executor.platform.label,
                                     call="BFCAllocator.allocate")

    def _oom_message(self, size: int) -> str:
        stats = self.stats()
        limit, in_use = stats["bytes_limit"], stats["bytes_in_use"]
        largest = stats["largest_free_block_bytes"]
        rounded = -(-size // 256) * 256
        if rounded > limit:
            why = "the request is larger than the whole memory limit"
        elif limit - stats["bytes_reserved"] >= rounded:
            why = "no free chunk is large enough and the plugin refused a new region"
        else:
            why = ("no free chunk is large enough (the memory is in use or fragmented) and "
                   "the memory limit leaves no room for another region")
        return (
            f"out of memory: {self.name} could not allocate {_human(size)} ({size} bytes): "
            f"{why}. Memory limit {_human(limit)}, in use {_human(in_use)}, largest free "
            f"chunk {_human(largest)}.\n{self.describe()}"
            f"To fix this: free tensors and buffers you no longer need (close() them, drop "
            f"their references), raise the limit (pluggable.config.set_memory_limit, or "
            f"memory_limit=), turn on memory growth (pluggable.config.set_memory_growth, or "
            f"allow_growth=True) so unused regions are not reserved up front, or allocate "
            f"less (a smaller batch).")

    def _deallocate_failed(self, address) -> None:
        if self._handle is None and self.executor.stuck:
            return  # the memory stays with the abandoned pool, as everything of the plugin
        self._check_open()
        try:
            value = operator.index(address)
        except TypeError:
            raise TypeError(f"deallocate: address must be an integer, not "
                            f"{type(address).__name__}") from None
        if 0 <= value < _MAX_ADDRESS and type(address) is not int:
            # An integer-like object ctypes refused (numpy.uint64, ...): try it as an int.
            if not _BFCDeallocate(self._handle, value):
                return
        shown = f"0x{value:x}" if value >= 0 else str(value)
        raise InvalidArgumentError(
            f"deallocate: address {shown} was not allocated by {self.name} or was already "
            f"freed; pass exactly an address allocate() returned, once",
            plugin=self.executor.platform.label, call="BFCAllocator.deallocate")

    # -- inspection ------------------------------------------------------------------------
    def allocated_size(self, address: int) -> int:
        """The size of the chunk behind a live allocation (its request rounded up to 256);
        0 for an address that is not a live allocation."""
        self._check_open()
        return int(_BFCAllocatedSize(self._handle, address))

    def stats(self) -> Dict[str, int]:
        """Statistics under the ``SP_AllocatorStats`` names: ``num_allocs`` (successful
        allocations since creation), ``bytes_in_use`` (sum of live chunk sizes),
        ``peak_bytes_in_use``, ``largest_alloc_size``, ``bytes_limit`` and
        ``bytes_reservable_limit`` (the memory limit), ``bytes_reserved`` (regions held),
        ``peak_bytes_reserved``, ``largest_free_block_bytes`` (largest free chunk)."""
        self._check_open()
        stats = SP_AllocatorStats.new()
        _BFCGetStats(self._handle, ctypes.byref(stats))
        return {field: int(getattr(stats, field)) for field in _STATS_FIELDS}

    def memory_info(self) -> Dict[str, int]:
        """``{'current': bytes_in_use, 'peak': peak_bytes_in_use}``, like
        ``tf.config.experimental.get_memory_info``."""
        stats = self.stats()
        return {"current": stats["bytes_in_use"], "peak": stats["peak_bytes_in_use"]}

    def reset_peak(self) -> None:
        """Sets ``peak_bytes_in_use`` to ``bytes_in_use`` and ``peak_bytes_reserved`` to
        ``bytes_reserved``."""
        self._check_open()
        _BFCResetPeak(self._handle)

    def release_free_regions(self) -> int:
        """Gives every completely free region back to the plugin; returns the bytes
        released. (An allocation that runs out of memory does this itself before failing.)"""
        self._check_open()
        return int(_BFCReleaseFreeRegions(self._handle))

    def describe(self) -> str:
        """A human summary: limit, use, regions, largest free chunk, and the free and
        in-use chunks of every non-empty size class."""
        self._check_open()
        size = 2048
        while True:
            buf = ctypes.create_string_buffer(size)
            needed = _BFCDescribe(self._handle, buf, size)
            if needed < size:
                return buf.value.decode("utf-8", "replace")
            size = needed + 256

    def check(self) -> None:
        """Verifies the allocator's invariants (chunks tile each region exactly, no two
        adjacent free chunks, every free chunk in the bin of its size, statistics equal to the
        sum of the chunks, ...); raises AssertionError naming the first violation."""
        self._check_open()
        buf = ctypes.create_string_buffer(512)
        if _BFCCheck(self._handle, buf, len(buf)):
            raise AssertionError(buf.value.decode("utf-8", "replace"))

    def chunks(self) -> List[Chunk]:
        """Every chunk of every region, regions and chunks in address order."""
        self._check_open()
        capacity = 64
        while True:
            out = (PG_BFCChunkInfo * capacity)()
            count = _BFCSnapshot(self._handle, out, capacity)
            if count <= capacity:
                return [Chunk(c.address, c.size, c.requested, bool(c.in_use), c.region)
                        for c in out[:count]]
            capacity = count + 64

    def regions(self) -> List[tuple]:
        """``(address, size)`` of every region in address order (the chunks' span)."""
        spans: Dict[int, List[int]] = {}
        for c in self.chunks():
            span = spans.setdefault(c.region, [c.address, 0])
            span[1] += c.size
        return [tuple(spans[i]) for i in sorted(spans)]

    # -- lifetime --------------------------------------------------------------------------
    @property
    def handle(self) -> Optional[int]:
        """The ``PG_BFC*`` for C code (kernels), or None once closed."""
        return self._handle

    @property
    def is_closed(self) -> bool:
        return self._handle is None

    def _abandon(self) -> None:
        """Stops handing out memory without calling the plugin or touching the C allocator,
        which a thread stuck in the plugin may hold: its executor's plugin was found stuck.
        The allocator's memory is left to the operating system."""
        if self._handle is None:
            return
        self._finalizer.detach()
        self._handle = None
        _native.compiled.invalidate()  # buffers from this allocator no longer free into it

    def close(self) -> int:
        """Returns every region to the plugin and frees the allocator; idempotent. Returns the
        number of allocations that were still live (their memory is gone; also kept in
        ``leaked_allocations``)."""
        if self._handle is None:
            return 0
        self._handle = None
        _native.compiled.invalidate()  # buffers from this allocator no longer free into it
        self.leaked_allocations = self._finalizer()
        return self.leaked_allocations

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        if self._handle is None:
            return f"<BFCAllocator {self.name!r} closed>"
        stats = self.stats()
        return (f"<BFCAllocator {self.name!r} in use {stats['bytes_in_use']} of "
                f"{stats['bytes_limit']} bytes, reserved {stats['bytes_reserved']}>")
