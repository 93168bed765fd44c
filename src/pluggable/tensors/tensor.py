"""Tensors: typed, shaped data on a device.

`tensor(data, dtype=None, device=None)` puts host data on a device; `Tensor.numpy()` brings
it back, `Tensor.to(device)` moves it. Device memory comes from the device's BFC allocator and
is returned to it only once the device is done with it (the event manager tracks the work
that used it). Each tensor on a plugin device carries a `Marker` for the work that produced
it, so `numpy()` and copies wait for that work only.

Copies hand nothing to another host thread. An upload of up to `STAGE_LIMIT` bytes copies
the data into the staging ring (`pluggable.devices.staging`, pinned host memory) and enqueues the
device copy on the compute stream, where the ops that read it run: it returns without
waiting, and the caller's array is free at once. A download enqueues its copy behind the
tensor's producer and waits on one event. Larger copies take the shortest path the plugin
allows: straight from and to NumPy's buffer when the plugin accepts pageable host memory
(``PLUGGABLE_PLATFORM_PAGEABLE_ASYNC_COPY``), else staged through the pinned host pool;
between devices of one plugin with a peer copy on the destination's device-to-device stream
(``PLUGGABLE_PLATFORM_PEER_DTOD``), else through the host.
"""
from __future__ import annotations

import collections
import ctypes
import operator
import threading
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Tuple

import numpy as np

from ..devices.handle import finalizer
from ..abi.plugin_ext import PLUGGABLE_PLATFORM_PAGEABLE_ASYNC_COPY
from ..base.native import compiled as _compiled
from ..abi.stream_executor import SE_EventStatus
from ..abi.tf_status import TF_Code
from ..devices.device import PluggableDevice
from ..base.dtypes import _BY_NUMPY, DType, as_dtype
from ..base.shape import TensorShape
from ..base.errors import (DataLossError, DeadlineExceededError, FailedPreconditionError,
                     InvalidArgumentError, PluggableError, ResourceExhaustedError)
from ..base.limits import host_memory_fits
from ..devices.allocator import _human as human_bytes
from ..devices.memory import DeviceMemory
from ..devices.staging import staged_view as _staged_view
from .placement import (CPU_DEVICE, AnyDevice, device_scope,  # noqa: F401  (names dispatch reads)
                        placement as _placement, resolve_device)


if TYPE_CHECKING:
    from ..devices.event_manager import Marker
    from ..devices.executor import StreamExecutor

__all__ = ["Tensor", "tensor", "zeros", "empty", "CPU_DEVICE"]

_REPR_MAX_ELEMENTS = 1000
_new_shape = tuple.__new__  # a TensorShape of the tuple, without TensorShape's checks
_MAX_BYTES = 1 << 62


class DeviceBuffer(_compiled.Buffer):
    """Device memory holding a tensor's bytes, from the device's allocator.

    ``uses`` are markers of asynchronous work on streams other than the compute stream that
    reads or writes the memory; when the buffer is dropped, the memory goes back to the
    allocator once all of them are passed. (Work on the compute stream needs no marker:
    memory is reused only in compute-stream order.)

    The fields and the release live in `pluggable._compiled.Buffer`, in C: a buffer is made for
    every op's output, and dropping one gives its memory straight back to the BFC allocator
    without a Python call (a ``__del__`` cost 0.1 µs per output, a ``weakref.finalize``
    0.8 µs). A buffer with ``uses`` goes to `_release_buffer`; after the executor closed,
    nothing is given back.
    """

    __slots__ = ()

    def __init__(self, executor: "StreamExecutor", nbytes: int, address: Optional[int] = None):
        self.executor = executor
        self.nbytes = nbytes
        if address is None:
            address = executor.allocator.allocate(nbytes) if nbytes else 0
        self.address = address

    @classmethod
    def adopt(cls, executor: "StreamExecutor", address: int, nbytes: int) -> "DeviceBuffer":
        """Takes ownership of an allocation a kernel made from the device's allocator."""
        return cls(executor, nbytes, address)

    def memory(self) -> DeviceMemory:
        return DeviceMemory.unchecked(self.executor, self.address, self.nbytes)

    def used_by(self, marker: "Marker") -> None:
        uses = [m for m in self.uses or () if m.event is not None]
        uses.append(marker)
        self.uses = uses

    def release_now(self) -> None:
        """Gives the memory back immediately: only for buffers no pending work touches."""
        address, self.address = self.address, 0
        if address:
            self.executor.allocator.deallocate(address)


def _release_buffer(executor: "StreamExecutor", address: int,
                    uses: Optional[List["Marker"]]) -> None:
    """Returns a dropped buffer's memory: now, or once every use is passed."""
    if executor._closed:
        return
    allocator = executor._allocator
    if allocator is None:
        return
    for marker in uses or ():
        if marker.event is not None:
            break
    else:
        allocator.deallocate(address)
        return
    from ..devices.event_manager import EventManager

    EventManager.when_done([m for m in uses if m.event is not None],
                           lambda: allocator.deallocate(address))


class Tensor:
    """A tensor on a device. Made by `pluggable.tensor`, `zeros`, `empty` and `to`.

    ``_array`` holds the values of a CPU tensor; ``_buffer`` the device memory of a device
    tensor. A device tensor has both when a kernel wrote its values in host memory (an output
    registered with ``HostMemory``, such as Shape's): the host keeps them and the buffer is a
    copy for the device's kernels; both never change."""

    __slots__ = ("_shape", "_dtype", "_device", "_array", "_buffer", "_ready", "__weakref__")

    def __init__(self, shape: Tuple[int, ...], dtype: DType, device: AnyDevice,
                 array: Optional[np.ndarray] = None, buffer: Optional[DeviceBuffer] = None,
                 ready: Optional["Marker"] = None):
        self._shape = shape
        self._dtype = dtype
        self._device = device
        self._array = array
        self._buffer = buffer
        self._ready = ready

    # -- description -----------------------------------------------------------------------
    @property
    def shape(self) -> TensorShape:
        """The dimensions, as a `TensorShape` (a tuple of ints)."""
        return _new_shape(TensorShape, self._shape)

    @property
    def dtype(self) -> DType:
        return self._dtype

    @property
    def device(self) -> str:
        """The name of the device holding the data, e.g. "/device:XPU:0"."""
        return self._device.name

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def size(self) -> int:
        return _element_count(self._shape)

    @property
    def nbytes(self) -> int:
        return self.size * self._dtype.itemsize

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a scalar (0-d) tensor: it has no first dimension")
        return self._shape[0]

    def __repr__(self) -> str:
        head = f"<pluggable.Tensor: shape={self._shape}, dtype={self._dtype.name}, " \
               f"device={self.device}"
        if self._device.is_closed:
            return head + " (device closed)>"
        if self.size <= _REPR_MAX_ELEMENTS:
            return head + f", numpy={self.numpy()!r}>"
        return head + ">"

    # -- data ------------------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """The values as a NumPy array: a read-only view for a CPU tensor, and for a device
        tensor whose values a kernel wrote in host memory (a shape, see `_array` below); a
        new array copied from the device otherwise. Waits only for the work that produced
        this tensor."""
        if self._array is not None:
            return self._array
        device = self._device
        copier = device._copier
        if copier and self._ready is None and not copier.stale and not device._closed \
                and self._buffer.lost is None:
            # The common case, as below without the calls: the copier exists only on a
            # platform that copies pageable memory asynchronously.
            nbytes = _element_count(self._shape) * self._dtype.itemsize
            out = np.empty(self._shape, self._dtype.numpy_dtype) \
                if nbytes < _HostArrayCache.MIN_BYTES \
                else _HOST_ARRAYS.empty(self._shape, self._dtype, nbytes)
            if not nbytes or copier.download(self._buffer.address, nbytes, out):
                return out
            return self._copied_to_host(out)  # the stream is busy: copied behind its work
        return self._copied_to_host()

    def _copied_to_host(self, out: Optional[np.ndarray] = None) -> np.ndarray:
        """`numpy` of a device tensor, every case; ``out``: the new array the copier could not
        fill at once (it is not asked again)."""
        device = self._live_device()
        executor = device.executor
        nbytes = self.nbytes
        tried = out is not None
        if out is None:
            out = _HOST_ARRAYS.empty(self._shape, self._dtype, nbytes)
        if not nbytes:
            return out
        if device.platform.has_capability(PLUGGABLE_PLATFORM_PAGEABLE_ASYNC_COPY):
            if self._ready is None and not tried:
                copier = device._copier
                if copier is None or (copier is not False and copier.stale):
                    copier = _copier(device)
                if copier and copier.download(self._buffer.address, nbytes, out):
                    return out
            # Straight into the new array, then one event. On the compute stream, where
            # kernel outputs and uploads are made: no stream dependency, and a plugin may
            # run the copy at once on an idle stream. A large copy of a tensor made on
            # another stream (a marker) on the device-to-host stream, which waits for that
            # marker only.
            stream = device.compute_stream if self._ready is None or nbytes <= STAGE_LIMIT \
                else device.device_to_host_stream
            self._order_after_producer(device, stream)
            stream._check_open()  # replaced meanwhile by another thread: its own words
            executor._copy("memcpy_dtoh", stream, nbytes, stream._handle,
                           out.__array_interface__["data"][0],
                           executor._device_ref(self._buffer.address, nbytes), nbytes)
            _wait_for_stream(device, stream, keep=out)
        else:  # a synchronous copy may write to any host memory
            self._wait_for_producer(device)
            executor.sync_memcpy_dtoh(out, self._buffer.memory(), nbytes)
        return out

    def _order_after_producer(self, device: PluggableDevice, stream) -> None:
        """Makes ``stream`` wait for the work that produced this tensor: its marker, or the
        device's compute stream for kernel outputs."""
        if self._ready is not None:
            self._ready.make_wait(stream)
        elif stream is not device.compute_stream:
            stream.wait_for(device.compute_stream)

    def _wait_for_producer(self, device: PluggableDevice) -> None:
        """Blocks the host until the work that produced this tensor is done."""
        if self._ready is not None:
            self._ready.synchronize()
        else:
            _wait_for_stream(device, device.compute_stream)

    # -- DLPack (pluggable.tensors.dlpack) ----------------------------------------------------
    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule of this tensor, per the Python array API standard."""
        return _dlpack().export(self, stream=stream, max_version=max_version,
                                dl_device=dl_device, copy=copy)

    def __dlpack_device__(self) -> Tuple[int, int]:
        """``(device_type, device_id)`` of the DLPack device holding the data."""
        return _dlpack().dlpack_device(self)

    def __array__(self, dtype=None, copy=None):
        values = self.numpy()
        if dtype is not None:
            values = values.astype(dtype, copy=False)
        return values.copy() if copy else values

    # -- operators, indexing and NumPy's ufuncs: attached by pluggable.eager.operators, above
    # the op library (the class itself runs no op) --------------------------------------
    __hash__ = None  # == is element-wise, as in TensorFlow 2 and NumPy

    __array_priority__ = 100  # NumPy operands defer to the tensor's operators

    def __iter__(self):
        if not self._shape:
            raise TypeError("cannot iterate over a scalar (0-d) tensor")
        for i in range(self._shape[0]):
            yield self[i]

    def __bool__(self) -> bool:
        if self.size != 1:
            raise ValueError(f"the truth value of a tensor of {self.size} elements is "
                             f"ambiguous; use pluggable.ops.reduce_max/min or .numpy()")
        return bool(self.numpy().reshape(()))

    def to(self, device: Any) -> "Tensor":
        """This tensor on ``device`` (itself if it is there already)."""
        target = resolve_device(device)
        if target is self._device:
            return self
        if target is CPU_DEVICE:
            values = self.numpy()
            values.flags.writeable = False
            return Tensor(self._shape, self._dtype, CPU_DEVICE, array=values)
        if self._array is not None:
            return _upload(_compact(self._array), self._dtype, target, owned=True)
        source = self._live_device()
        if (source.platform is target.platform and _peer_copies(target)):
            return self._peer_copy(source, target)
        return _upload(self.numpy(), self._dtype, target, owned=True)

    def _peer_copy(self, source: PluggableDevice, target: PluggableDevice) -> "Tensor":
        """A copy on the target's device-to-device stream, reading the source's memory."""
        self._wait_for_producer(source)  # produced on another device: the host waits
        executor = target.executor
        buffer = DeviceBuffer(executor, self.nbytes)
        if not self.nbytes:
            return Tensor(self._shape, self._dtype, target, buffer=buffer)
        stream = target.device_to_device_stream
        stream.wait_for(target.compute_stream)  # the new memory may be in use there still
        try:
            executor.memcpy_dtod(stream, buffer.memory(), self._buffer.memory(), self.nbytes)
        except BaseException:
            buffer.release_now()
            raise
        buffer.stamp(stream._ledger)
        # The source stays allocated until the copy is done.
        marker = executor.after_work(stream, _keep_buffer(self._buffer))
        if marker is not None:
            buffer.used_by(marker)
        return Tensor(self._shape, self._dtype, target, buffer=buffer, ready=marker)

    def _live_device(self) -> PluggableDevice:
        device = self._device
        if device.is_closed:
            raise FailedPreconditionError(
                f"the tensor's device {device.name} was closed; its data is gone",
                call="Tensor")
        if self._buffer.lost is not None:
            _raise_lost(self)
        return device


_dlpack_module = None


def _dlpack():
    """`pluggable.tensors.dlpack`, which builds on this module: imported on first use, then kept
    (an import statement per call would cost more than the exchange itself)."""
    global _dlpack_module
    if _dlpack_module is None:
        from . import dlpack

        _dlpack_module = dlpack
    return _dlpack_module


class _HostArrayCache:
    """Recycles the memory of large arrays that `numpy()` returned, once they are collected.

    A fresh NumPy array pays a page fault per page on its first write, which costs as much as
    the copy itself; memory that comes back here stays mapped and touched. The memory is
    NumPy's own (not a plugin's), so an array never outlives what it points to. Below
    `MIN_BYTES` the C library's allocator already reuses freed memory (glibc maps a fresh
    block only above its mmap threshold, which rises up to 32 MiB to the largest block freed),
    and the cache's own cost (a finalizer and a ctypes view, about 7 µs) would be pure loss:
    at 1 MiB it made `numpy()` 1.5x a plain `np.empty` and copy.
    """

    MIN_BYTES = (32 << 20) + 1
    MAX_CACHED_BYTES = 512 << 20

    def __init__(self):
        self._lock = threading.Lock()
        self._free: "collections.OrderedDict[int, List[np.ndarray]]" = collections.OrderedDict()
        self._cached = 0

    def empty(self, shape: Tuple[int, ...], dtype: DType, nbytes: int) -> np.ndarray:
        if nbytes < self.MIN_BYTES:
            return np.empty(shape, dtype.numpy_dtype)
        size = -(-nbytes // 4096) * 4096
        with self._lock:
            spares = self._free.get(size)
            raw = spares.pop() if spares else None
            if raw is not None:
                self._cached -= size
                if not spares:
                    del self._free[size]
        if raw is None:
            raw = np.empty(size, np.uint8)
        view = (ctypes.c_char * nbytes).from_address(raw.__array_interface__["data"][0])
        finalizer(view, self._give_back, raw)
        return np.frombuffer(view, dtype.numpy_dtype).reshape(shape)

    def _give_back(self, raw: np.ndarray) -> None:
        size = raw.nbytes
        if size > self.MAX_CACHED_BYTES:
            return
        with self._lock:
            self._free.setdefault(size, []).append(raw)
            self._free.move_to_end(size)
            self._cached += size
            while self._cached > self.MAX_CACHED_BYTES:
                oldest, spares = next(iter(self._free.items()))
                spares.pop()
                self._cached -= oldest
                if not spares:
                    del self._free[oldest]


_HOST_ARRAYS = _HostArrayCache()


def _element_count(shape: Tuple[int, ...]) -> int:
    count = 1
    for n in shape:
        count *= n
    return count


def _compact(array: np.ndarray) -> np.ndarray:
    """``array`` in C order: itself, or a copy of an imported strided view (DLPack)."""
    return array if array.flags.c_contiguous else np.ascontiguousarray(array)


def _peer_copies(device: PluggableDevice) -> bool:
    from ..abi.plugin_ext import PLUGGABLE_PLATFORM_PEER_DTOD

    return device.platform.has_capability(PLUGGABLE_PLATFORM_PEER_DTOD)


def _host_array(data: Any, dtype: Optional[Any]) -> Tuple[np.ndarray, DType, bool]:
    """``data`` as a C-contiguous array of a supported dtype, and whether the array is the
    caller's own object (which may change after we return)."""
    if type(data) is np.ndarray and dtype is None and data.flags.c_contiguous:
        found = _BY_NUMPY.get(data.dtype)  # the common case, without the checks below
        if found is not None:
            return data, found, True
    if isinstance(data, Tensor):
        data = data.numpy()
    wanted = as_dtype(dtype) if dtype is not None else None
    try:
        array = np.asarray(data)
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(f"cannot make a tensor from {type(data).__name__}: {exc}",
                                   call="tensor") from None
    if wanted is None and array.dtype.kind in "if" and _is_python_data(data):
        wanted = _python_dtype(array)
    if array.dtype == object:
        raise InvalidArgumentError(
            "cannot make a tensor of Python objects (NumPy dtype object); pass numbers, "
            "nested lists of numbers of equal lengths, or a numeric array", call="tensor")
    if wanted is not None and array.dtype != wanted.numpy_dtype:
        array = _convert_exactly(array, wanted)
    dtype_ = wanted or as_dtype(array.dtype)
    shared = array is data or (isinstance(data, np.ndarray) and np.shares_memory(array, data))
    if not array.flags.c_contiguous:
        array, shared = np.ascontiguousarray(array), False
    return array, dtype_, shared


def _is_python_data(data: Any) -> bool:
    """Whether ``data`` is Python numbers (possibly nested in lists or tuples), whose
    element type TensorFlow infers, rather than NumPy data, which keeps its own."""
    while isinstance(data, (list, tuple)):
        if not data:
            return True
        data = data[0]
    return isinstance(data, (int, float, bool)) and not isinstance(data, np.generic)


def _python_dtype(array: np.ndarray) -> DType:
    """TensorFlow's element type for Python numbers: float32 for floats; int32 for integers
    that fit it, else int64."""
    if array.dtype.kind == "f":
        return as_dtype("float32")
    if array.size and (array.min() < -2**31 or array.max() >= 2**31):
        return as_dtype("int64")
    return as_dtype("int32")


def _convert_exactly(array: np.ndarray, dtype: DType) -> np.ndarray:
    """``array`` as ``dtype``, refusing what changes values rather than precision: 3.5 or NaN
    to an integer, 2 to bool, 3e9 to int32, a complex number with an imaginary part to a
    real type (as ``tf.constant`` refuses them)."""
    if array.dtype.kind == "U" or array.dtype.kind == "S":
        raise InvalidArgumentError(f"cannot make a {dtype.name} tensor from strings",
                                   call="tensor")
    original, exact = array, True
    if array.dtype.kind == "c" and not dtype.is_complex:
        exact = not np.any(np.imag(array))
        array = np.real(array)
    with np.errstate(all="ignore"):
        converted = array.astype(dtype.numpy_dtype)
        if exact and (dtype.is_integer or dtype.is_bool):
            exact = np.array_equal(converted.astype(array.dtype), array)
    if not exact:
        shown = original if original.size <= 6 else f"an array of {original.dtype}"
        raise InvalidArgumentError(
            f"{shown!s} cannot be converted to {dtype.name} without losing its value; convert "
            f"it explicitly (NumPy's astype, or pluggable.ops.cast)", call="tensor")
    return converted


#: Uploads that find the compute stream busy (so that `_copier`'s C path does not take them)
#: of at most this many bytes go through the staging ring (`pluggable.devices.staging`), larger ones
#: straight and waited for; downloads of tensors made on another stream of at most this many
#: bytes run on the compute stream. Measured with `benchmarks/bench_transfer.py --sweep`.
STAGE_LIMIT = 1 << 20
_EVENT_ERROR = int(SE_EventStatus.SE_EVENT_ERROR)
_SMALL_COPY = 4096  # below this, bytes() and one memmove copy into staging fastest


def _wait_for_stream(device: PluggableDevice, stream, keep: Any = None,
                     buffer: Optional[DeviceBuffer] = None, recorded: Any = None) -> None:
    """Blocks until the work enqueued on ``stream`` so far is done (one pooled event, or
    the event handle ``recorded`` when the caller recorded one last; bounded by the
    deadline); raises the stream's error if that work failed. Past the deadline the work is
    still queued: ``keep`` (host memory it reads or writes) is handed to the event manager,
    and ``buffer`` (device memory it writes) gets the marker as a use, so neither is freed
    under the device's feet."""
    mark = stream._ledger.mark() if recorded is None else None  # (a copier verifies its own)
    try:
        if recorded is None:
            state = device.executor.event_manager.wait(stream)
        else:
            state = device.executor.await_event(recorded, "block_host_for_event")
    except DeadlineExceededError:
        marker = device.executor._keep_until_done(stream, keep)
        if buffer is not None and marker is not None:
            buffer.used_by(marker)
        raise
    # The stream's own error, when it reports one: an event may complete normally after
    # work that failed (a plugin whose failures show only in get_stream_status).
    device.check_stream(stream)
    if state == _EVENT_ERROR:
        raise device.executor._error(
            TF_Code.TF_INTERNAL, "the stream reached the point with an error",
            "SP_StreamExecutor.get_event_status")
    if mark is not None:
        stream._ledger.verified(mark)


def _upload(array: np.ndarray, dtype: DType, device: PluggableDevice, owned: bool,
            asked: bool = False) -> Tensor:
    """Copies a C-contiguous host array to ``device``. When ``owned`` is False the array is
    the caller's, which may change once this returns: small arrays are copied into staging
    memory first, large ones are waited for. ``asked``: the device's copier has already
    been asked and could not copy at once."""
    executor = device.executor
    nbytes = array.nbytes
    if not nbytes:
        return Tensor(tuple(array.shape), dtype, device, buffer=DeviceBuffer(executor, 0))
    copier = None
    if not asked:
        copier = device._copier
        if copier is None or (copier is not False and copier.stale):
            copier = _copier(device)
    if copier:  # copied at once when the compute stream is idle, else None
        uploaded = copier.upload(array, dtype)
        if uploaded is not None:
            return uploaded
    buffer = DeviceBuffer(executor, nbytes)
    shape = tuple(array.shape)
    try:
        if (nbytes <= STAGE_LIMIT and executor._fns.get("host_memory_allocate") is not None
                and _staged_upload(executor, device.compute_stream, buffer, array, nbytes)):
            # On the compute stream, as the ops that read it: `_ready` None says just that.
            buffer.stamp(device.compute_stream._ledger)
            return Tensor(shape, dtype, device, buffer=buffer)
        pageable = device.platform.has_capability(PLUGGABLE_PLATFORM_PAGEABLE_ASYNC_COPY)
        if pageable and not owned:
            # Straight from the caller's array, waited for: on the compute stream, where
            # the new memory may still be in use and the ops that read it run (no stream
            # dependency; a plugin may run the copy at once on an idle stream).
            stream = device.compute_stream
            executor._copy("memcpy_htod", stream, nbytes, stream._handle,
                           executor._device_ref(buffer.address, nbytes),
                           array.__array_interface__["data"][0], nbytes)
            _wait_for_stream(device, stream, keep=array, buffer=buffer)
            return Tensor(shape, dtype, device, buffer=buffer)
        stream = device.host_to_device_stream
        stream.wait_for(device.compute_stream)  # the new memory may be in use there still
        if pageable:
            marker = executor.memcpy_htod(stream, buffer.memory(), array, nbytes)
        elif executor._fns.get("host_memory_allocate") is None:
            # Neither pageable nor pinned memory for asynchronous copies: a synchronous one.
            executor.sync_memcpy_htod(buffer.memory(), array, nbytes)
            return Tensor(shape, dtype, device, buffer=buffer)
        else:
            staged, free_staged = _stage_in_pinned_memory(executor, array)
            try:
                executor.memcpy_htod(stream, buffer.memory(), staged, nbytes)
            except BaseException:
                free_staged()  # the copy was refused: nothing reads the staged bytes
                raise
            marker = executor.after_work(stream, free_staged)
    except BaseException:
        if not buffer.uses:  # with uses (a wait past the deadline), freed once they pass
            buffer.release_now()
        raise
    if marker is None:  # the copy was waited for: nothing is pending
        return Tensor(shape, dtype, device, buffer=buffer)
    buffer.stamp(stream._ledger)
    buffer.used_by(marker)  # the host's bytes are the copy's own (`owned`, or staged)
    return Tensor(shape, dtype, device, buffer=buffer, ready=marker)


_COPIER_FUNCTIONS = ("memcpy_htod", "memcpy_dtoh", "record_event", "get_event_status")


def _copier(device: PluggableDevice):
    """The device's `pluggable._compiled.Copier` (copies on the compute stream in C), made anew
    when the last one went stale; False where copies take the Python path: for good with a
    plugin without asynchronous copies of pageable memory or on a closed device, for this
    call only when no event or allocator can be had now."""
    executor = device.executor
    fns = executor._fns
    if (device.is_closed or executor.is_closed
            or not device.platform.has_capability(PLUGGABLE_PLATFORM_PAGEABLE_ASYNC_COPY)
            or any(fns.get(name) is None for name in _COPIER_FUNCTIONS)):
        device._copier = False
        return False
    try:
        executor.allocator  # made on first use
        event = executor.create_event()
    except PluggableError:
        device._copier = None  # asked again next time; the Python path reports the error
        return False
    copier = device._copier = _compiled.Copier(
        device, event,
        {name: ctypes.cast(fns[name], ctypes.c_void_p).value for name in _COPIER_FUNCTIONS},
        ctypes.cast(executor._device_ptr, ctypes.c_void_p).value, _wait_for_stream)
    return copier


def _staged_upload(executor: "StreamExecutor", stream, buffer: DeviceBuffer,
                   array: np.ndarray, nbytes: int) -> bool:
    """Copies ``array`` into the staging ring and enqueues the device copy from there on
    ``stream``: the caller's array is free once this returns, and nothing waits. False
    when the ring is too small for it (the plugin's pinned memory is short)."""
    if nbytes <= _SMALL_COPY:
        data = array.tobytes()
    else:
        data = array.reshape(-1).view(np.uint8)
    destination = buffer.address

    def enqueue(address: int) -> None:
        if type(data) is bytes:
            ctypes.memmove(address, data, nbytes)
        else:
            np.copyto(np.frombuffer(_staged_view(address, nbytes), np.uint8), data)
        stream._check_open()
        executor._copy("memcpy_htod", stream, nbytes, stream._handle,
                       executor._device_ref(destination, nbytes), address, nbytes)

    return executor.staging.copy(stream, nbytes, enqueue) != 0


def _raise_lost(tensor: Tensor) -> None:
    """Raises `DataLossError` for a device tensor whose memory the failed stream work was to
    write (its buffer's ``lost``): reading it would give whatever the memory held before."""
    raise DataLossError(
        f"this {tensor._dtype.name} tensor of shape {tensor._shape} on {tensor._device.name} "
        f"has no value: the stream work that was to compute it did not run, because "
        f"{tensor._buffer.lost}. That failure was reported once and the device's failed "
        f"streams were replaced; compute the tensor again from inputs that are intact",
        call="Tensor")


def _keep_buffer(buffer: DeviceBuffer):
    """A function for the event manager that holds ``buffer`` (device memory another
    device's stream reads) until it runs."""
    from ..devices.event_manager import Keep

    return Keep(buffer)


def _stage_in_pinned_memory(executor: "StreamExecutor", array: np.ndarray):
    """Copies ``array`` into the executor's pinned host pool; returns the staged bytes and
    the function that gives them back to the pool."""
    pool = executor.host_allocator
    address = pool.allocate(array.nbytes)
    staged = np.frombuffer((ctypes.c_char * array.nbytes).from_address(address), np.uint8)
    np.copyto(staged, array.reshape(-1).view(np.uint8))
    return staged, lambda: pool.deallocate(address)


def _check_shape(shape: Any) -> Tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        dims = tuple(operator.index(n) for n in shape)
    except TypeError:
        raise InvalidArgumentError(f"a shape must be a sequence of integers, not {shape!r}",
                                   call="shape") from None
    if any(n < 0 for n in dims):
        raise InvalidArgumentError(f"shape {dims} has a negative dimension", call="shape")
    return dims


def tensor(data: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """A tensor holding ``data`` (a NumPy array, nested lists, a scalar, another tensor) on
    ``device`` (default: the device of the ``pluggable.device`` scope, else the CPU).
    ``dtype`` converts the data first; without it Python numbers get TensorFlow's types
    (float -> float32, int -> int32, bool -> bool) and NumPy data keeps its own."""
    if dtype is None and type(data) is np.ndarray:
        # The common case, an array uploaded to the given or the scope's device at once (as
        # `_upload` would upload it) when the device's compute stream is idle.
        target = device_scope.get() if device is None else device
        if type(target) is PluggableDevice and not target._closed:
            copier = target._copier
            found = _BY_NUMPY.get(data.dtype)
            if copier and found is not None and not copier.stale and data.nbytes \
                    and data.flags.c_contiguous:
                uploaded = copier.upload(data, found)
                if uploaded is not None:
                    return uploaded
                # The stream is busy (or the copier skips): asked once, not again below.
                return _upload(data, found, target, owned=False, asked=True)
    target = _placement(device)
    array, dtype_, shared = _host_array(data, dtype)
    if target is CPU_DEVICE:
        array = array.copy() if shared else array
        array.flags.writeable = False
        return Tensor(tuple(array.shape), dtype_, CPU_DEVICE, array=array)
    return _upload(array, dtype_, target, owned=not shared)


def check_fits(call: str, nbytes: int, device: Any, what: str,
               shapes: Optional[Callable[[], str]] = None) -> None:
    """Raises ResourceExhaustedError, before anything is allocated, when ``nbytes`` exceed
    what ``device`` has: a plugin device's memory limit, or on the CPU the memory left to the
    process (address-space limit, memory cgroup, available memory). ``what`` says what the
    bytes are for; ``shapes``, when given, describes them for the message (called only then).
    Called for every output whose shape is known, so it costs a comparison: the device's
    limit is fixed for its allocator's life, and the host's is a recent reading
    (`host_memory_fits`)."""
    if device is CPU_DEVICE:
        left = host_memory_fits(nbytes)
        if left is None:
            return
        where = f"the memory left to this process on the host ({human_bytes(left)})"
    else:
        allocator = device.executor.allocator
        limit = allocator.memory_limit
        if nbytes <= limit:
            return
        used = allocator.memory_info()["current"]
        where = (f"the memory limit of {device.name} ({human_bytes(limit)}, of which "
                 f"{human_bytes(used)} in use and {human_bytes(max(limit - used, 0))} left)")
    if shapes is not None:
        what = f"{what} ({shapes()})"
    raise ResourceExhaustedError(
        f"{call} would need {human_bytes(nbytes)} ({nbytes} bytes) {what} on {device.name}, "
        f"more than {where}; nothing was allocated. Check the arguments (a size or depth far "
        f"too large?) or work on smaller pieces.", call=call)


def host_empty(call: str, dims: Tuple[int, ...], dtype_: DType) -> np.ndarray:
    """``np.empty`` for a CPU tensor, out of memory as ResourceExhaustedError."""
    try:
        return np.empty(dims, dtype_.numpy_dtype)
    except MemoryError:
        raise ResourceExhaustedError(
            f"{call}: out of host memory allocating shape {dims} {dtype_.name} "
            f"({human_bytes(_element_count(dims) * dtype_.itemsize)})", call=call) from None


def empty(shape: Any, dtype: Any = "float32", device: Any = None) -> Tensor:
    """An uninitialised tensor."""
    dims = _check_shape(shape)
    dtype_ = as_dtype(dtype)
    nbytes = _element_count(dims) * dtype_.itemsize
    if nbytes > _MAX_BYTES:
        raise InvalidArgumentError(f"shape {dims} of {dtype_.name} needs {nbytes} bytes, "
                                   f"more than any device has", call="empty")
    target = _placement(device)
    check_fits("empty", nbytes, target, "for a tensor", lambda: f"shape {dims} {dtype_.name}")
    if target is CPU_DEVICE:
        try:
            array = np.empty(dims, dtype_.numpy_dtype)
        except MemoryError:
            raise ResourceExhaustedError(
                f"empty: out of host memory allocating shape {dims} {dtype_.name} "
                f"({human_bytes(nbytes)})", call="empty") from None
        array.flags.writeable = False
        return Tensor(dims, dtype_, CPU_DEVICE, array=array)
    return Tensor(dims, dtype_, target, buffer=DeviceBuffer(target.executor, nbytes))


def zeros(shape: Any, dtype: Any = "float32", device: Any = None) -> Tensor:
    """A tensor of zeros, filled on the device's compute stream."""
    result = empty(shape, dtype, device)
    if result._array is not None:
        result._array.flags.writeable = True
        result._array.fill(0)
        result._array.flags.writeable = False
        return result
    if result.nbytes:
        device = result._device
        stream = device.compute_stream
        try:
            device.executor.mem_zero(stream, result._buffer.memory(), result.nbytes)
        except BaseException:
            result._buffer.release_now()
            raise
        result._buffer.stamp(stream._ledger)
        # Filled on the compute stream: `_ready` None says just that.
    return result


# The C per-op path makes Tensors and DeviceBuffers itself, and gives buffers with pending
# uses to _release_buffer.
_compiled.bind_tensors(Tensor, DeviceBuffer, _release_buffer, DType, device_scope, _raise_lost)
