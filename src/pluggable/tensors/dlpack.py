"""DLPack both ways: tensors cross to and from NumPy, PyTorch, JAX and any DLPack library
without a copy (the Python array API standard's ``__dlpack__`` / ``__dlpack_device__``, and
TensorFlow RFC 180's ``to_dlpack`` / ``from_dlpack``).

Export (`export`, behind ``Tensor.__dlpack__``): a capsule named ``"dltensor_versioned"``
(DLPack 1.x) when the consumer passes ``max_version >= (1, 0)``, else the legacy
``"dltensor"``. Every capsule keeps the tensor's memory (its NumPy array or its
`DeviceBuffer`) alive until the consumer calls the deleter, or until the capsule is destroyed
unconsumed. ``READ_ONLY`` is set, since tensors are immutable. A plugin device's memory is
described by the platform's ``PLUGGABLE_DLPackDeviceExt`` (see include/ABI.md); before the
consumer gets the capsule it is ordered after the work producing the tensor: the host waits
for ``stream=None`` / ``-1`` and for host consumers, a consumer's stream waits on an event
otherwise.

Import (`from_dlpack`): host memory becomes a CPU tensor over the producer's memory (NumPy
consumes the capsule, so the deleter runs exactly once, when the last array viewing it is
gone); memory of a plugin device becomes a tensor on that device over the same memory, whose
deleter runs once the device's work reading it is done. Capsules this module exported come
back as the very same buffer or array. A capsule that is rejected is left unconsumed, so its
own destructor frees it.

The deleter and the capsule destructor of the capsules built here are C functions of the
runtime library (_runtime/dlpack.c), because consumers call them where Python code cannot
run directly: during exception handling, on threads without the GIL, at interpreter exit.
"""
from __future__ import annotations

import ctypes
import math
import struct
import threading
from ctypes import c_char_p, c_int, c_void_p, py_object
from typing import TYPE_CHECKING, Any, Dict, NamedTuple, Optional, Tuple

import numpy as np

from ..abi.dlpack import (
    DLPACK_FLAG_BITMASK_IS_COPIED, DLPACK_FLAG_BITMASK_READ_ONLY, DLPACK_MAJOR_VERSION,
    DLPACK_MINOR_VERSION, DLDataTypeCode, DLDeviceType, DLManagedTensor, DLTensor,
    DLManagedTensorVersioned)
from ..abi.plugin_ext import PLUGGABLE_DLPACK_HOST_ADDRESSABLE
from ..base.dtypes import ALL_DTYPES, DType, as_dtype
from ..base.errors import DLPackError, InvalidArgumentError, NotFoundError
from .tensor import CPU_DEVICE, DeviceBuffer, Tensor, _compact, _upload, resolve_device

if TYPE_CHECKING:
    from ..devices.device import PluggableDevice
    from ..devices.stream import Stream

__all__ = ["to_dlpack", "from_dlpack", "export", "dlpack_device", "live_exports"]

_VERSIONED = b"dltensor_versioned"
_LEGACY = b"dltensor"
_USED_VERSIONED = b"used_dltensor_versioned"
_USED_LEGACY = b"used_dltensor"
# Where NumPy can read the memory: DLPack device types of host-accessible memory.
_HOST_TYPES = frozenset(int(t) for t in (DLDeviceType.kDLCPU, DLDeviceType.kDLCUDAHost,
                                          DLDeviceType.kDLROCMHost, DLDeviceType.kDLCUDAManaged))
_CPU = (int(DLDeviceType.kDLCPU), 0)
_VERSION = (DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION)
_MAX_NDIM = 254  # the kernel API's limit on a rank
_MAX_BYTES = 1 << 62

_CODES: Dict[DType, Tuple[int, int]] = {}
for _d in ALL_DTYPES:
    _kind = (DLDataTypeCode.kDLBool if _d.is_bool else DLDataTypeCode.kDLBfloat
             if _d.name == "bfloat16" else DLDataTypeCode.kDLComplex if _d.is_complex
             else DLDataTypeCode.kDLFloat if _d.is_floating else DLDataTypeCode.kDLUInt
             if _d.name.startswith("uint") else DLDataTypeCode.kDLInt)
    _CODES[_d] = (int(_kind), 8 * _d.itemsize)
_DTYPES: Dict[Tuple[int, int], DType] = {code: d for d, code in _CODES.items()}
_NUMPY_DTYPES: Dict[np.dtype, DType] = {d.numpy_dtype: d for d in ALL_DTYPES}
_BFLOAT16 = as_dtype("bfloat16")

# -- the Python C API, through ctypes --------------------------------------------------------
_api = ctypes.pythonapi
_PyCapsule_New = ctypes.PYFUNCTYPE(py_object, c_void_p, c_char_p, c_void_p)(
    ("PyCapsule_New", _api))
_PyCapsule_GetPointer = ctypes.PYFUNCTYPE(c_void_p, py_object, c_char_p)(
    ("PyCapsule_GetPointer", _api))
_PyCapsule_GetName = ctypes.PYFUNCTYPE(c_void_p, py_object)(("PyCapsule_GetName", _api))
_PyCapsule_SetName = ctypes.PYFUNCTYPE(c_int, py_object, c_char_p)(("PyCapsule_SetName", _api))
_PyCapsule_IsValid = ctypes.PYFUNCTYPE(c_int, py_object, c_char_p)(("PyCapsule_IsValid", _api))
_CapsuleType = type(np.empty(1).__dlpack__())


# -- exported capsules -----------------------------------------------------------------------
class _Export:
    """What keeps one exported managed tensor alive: the record holding the struct, its
    shape and strides, and the tensor's memory."""

    __slots__ = ("record", "owner")

    def __init__(self, record, owner):
        self.record, self.owner = record, owner


_LIVE: Dict[int, _Export] = {}  # managed tensor address -> its export
_LIVE_LOCK = threading.Lock()


def live_exports() -> int:
    """How many managed tensors this process exported and no one has freed yet."""
    return len(_LIVE)


def _release_export(address: int) -> None:
    with _LIVE_LOCK:
        _LIVE.pop(address, None)


# The deleter and capsule destructor are C functions of the runtime library (_runtime/dlpack.c):
# they may run during exception handling or on a thread without the GIL, where a ctypes
# callback cannot. The deleter calls `_export_released` with the GIL held and no exception
# pending.
@ctypes.CFUNCTYPE(None, c_void_p)
def _export_released(address):
    _release_export(address)


def _init_runtime() -> Tuple[int, int]:
    from ..base import native as _native

    fns = _native.bind(_native.lib, {"pluggable_DLPackInit": (c_int, [c_void_p])})
    if fns["pluggable_DLPackInit"](ctypes.cast(_export_released, c_void_p)) != 0:
        raise RuntimeError("the pluggable runtime library could not find the Python C API "
                           "in this process; DLPack export is unavailable")
    return (ctypes.cast(_native.lib.pluggable_DLPackDeleter, c_void_p).value,
            ctypes.cast(_native.lib.pluggable_DLPackCapsuleDestructor, c_void_p).value)


_DELETER, _DESTRUCTOR = _init_runtime()
# The managed tensors as one flat record each (native alignment reproduces the C layouts,
# checked against the mirrors here): written with one pack_into, which is several times
# cheaper than setting ctypes fields one by one.
_VERSIONED_LAYOUT = struct.Struct("@IIPPQPiiiBBHPPQ")
_LEGACY_LAYOUT = struct.Struct("@PiiiBBHPPQPP")
assert _VERSIONED_LAYOUT.size == ctypes.sizeof(DLManagedTensorVersioned)
assert _LEGACY_LAYOUT.size == ctypes.sizeof(DLManagedTensor)


def _new_capsule(owner: Any, data: int, device: Tuple[int, int], dtype: DType,
                 shape: Tuple[int, ...], strides: Optional[Tuple[int, ...]], flags: int,
                 versioned: bool):
    """A capsule over ``data`` (``strides`` in elements, or None for compact memory) that
    keeps ``owner`` alive until the consumer is done."""
    ndim = len(shape)
    layout = _VERSIONED_LAYOUT if versioned else _LEGACY_LAYOUT
    size = layout.size
    record = ctypes.create_string_buffer(size + 16 * ndim)
    address = ctypes.addressof(record)
    shape_address = address + size if ndim else 0
    strides_address = shape_address + 8 * ndim if ndim and strides is not None else 0
    code, bits = _CODES[dtype]
    tensor = (data, device[0], device[1], ndim, code, bits, 1, shape_address, strides_address,
              0)
    if versioned:
        layout.pack_into(record, 0, DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION, 0, _DELETER,
                         flags, *tensor)
    else:
        layout.pack_into(record, 0, *tensor, 0, _DELETER)
    if ndim:
        struct.pack_into(f"@{2 * ndim}q", record, size, *shape, *(strides or shape))
    with _LIVE_LOCK:
        _LIVE[address] = _Export(record, owner)
    try:
        return _PyCapsule_New(address, _VERSIONED if versioned else _LEGACY, _DESTRUCTOR)
    except BaseException:
        _release_export(address)
        raise


def _host_capsule(array: np.ndarray, dtype: DType, versioned: bool, flags: int):
    """A capsule over a host array, which it keeps alive."""
    array_flags = array.flags
    strides = None
    if not array_flags.c_contiguous:
        itemsize = array.itemsize
        if any(s % itemsize for s in array.strides):
            raise DLPackError(f"strides {array.strides} (bytes) are not multiples of the "
                              f"element size {itemsize}; DLPack counts strides in elements",
                              call="__dlpack__")
        strides = tuple(s // itemsize for s in array.strides)
    if not array_flags.writeable:
        flags |= DLPACK_FLAG_BITMASK_READ_ONLY
    return _new_capsule(array, array.ctypes.data, _CPU, dtype, array.shape, strides, flags,
                        versioned)


# -- export ----------------------------------------------------------------------------------
_NUMPY_EXPORTS_VERSIONED = np.lib.NumpyVersion(np.__version__) >= "2.1.0"


def _wants_versioned(max_version: Any) -> bool:
    if max_version is None:
        return False
    try:
        major, minor = (int(v) for v in max_version)
    except (TypeError, ValueError):
        raise DLPackError(f"max_version must be a (major, minor) tuple of integers, not "
                          f"{max_version!r}", call="__dlpack__") from None
    return major >= 1


def _check_copy(copy: Any) -> None:
    if copy not in (None, True, False):
        raise DLPackError(f"copy must be None, True or False, not {copy!r}", call="__dlpack__")


def _device_tuple(value: Any, what: str) -> Tuple[int, int]:
    try:
        device_type, device_id = (int(v) for v in value)
    except (TypeError, ValueError):
        raise DLPackError(f"{what} must be a (device_type, device_id) tuple of integers, not "
                          f"{value!r}", call="__dlpack__") from None
    return device_type, device_id


def _type_name(device_type: int) -> str:
    try:
        return f"{DLDeviceType(device_type).name} ({device_type})"
    except ValueError:
        return f"unknown DLPack device type {device_type}"


def dlpack_device(tensor: Tensor) -> Tuple[int, int]:
    """``Tensor.__dlpack_device__()``: ``(kDLCPU, 0)`` for the CPU, else the DLPack device
    the plugin declares, with the device's ordinal."""
    device = tensor._device
    if device is CPU_DEVICE:
        return _CPU
    declared = device.platform.dlpack_device_type
    if declared is None:
        raise DLPackError(
            f"{device.platform.label} declares no DLPack device (no PLUGGABLE_DLPackDeviceExt "
            f"in SP_Platform.ext); only host copies can be exported: "
            f"np.from_dlpack(t, device='cpu') or t.__dlpack__(dl_device=(1, 0))",
            call="__dlpack_device__")
    if declared == DLDeviceType.kDLCPU:
        return _CPU
    return int(declared), device.index


def _host_addressable(device: "PluggableDevice") -> bool:
    platform = device.platform
    return (platform.dlpack_device_type == DLDeviceType.kDLCPU
            or bool(platform.dlpack_flags & PLUGGABLE_DLPACK_HOST_ADDRESSABLE))


def _consumer_stream(device: "PluggableDevice", stream: Any) -> "Stream":
    """The stream of ``device`` a consumer names: a `Stream`, or its handle as an integer."""
    from ..devices.stream import Stream

    if isinstance(stream, Stream):
        if stream.executor is not device.executor or stream.is_closed:
            raise DLPackError(f"stream {stream!r} is not an open stream of {device.name}",
                              call="__dlpack__")
        return stream
    if isinstance(stream, int) and not isinstance(stream, bool) and stream > 0:
        for candidate in device.streams:
            if candidate.handle == stream:
                return candidate
    raise DLPackError(
        f"stream={stream!r} is not a stream of {device.name}: pass None or -1 (the host waits "
        f"for the tensor), a pluggable Stream of that device, or its handle "
        f"(device.compute_stream.handle)", call="__dlpack__")


def export(tensor: Tensor, *, stream: Any = None, max_version: Any = None,
           dl_device: Any = None, copy: Optional[bool] = None):
    """``Tensor.__dlpack__``: a DLPack capsule of ``tensor`` (see the module docstring)."""
    array = tensor._array  # a device tensor may keep its values on the host too
    if (array is not None and tensor._device is CPU_DEVICE and stream is None
            and dl_device is None and copy is None
            and type(max_version) is tuple and len(max_version) == 2 and max_version[0] >= 1
            and _NUMPY_EXPORTS_VERSIONED and tensor._dtype is not _BFLOAT16):
        return array.__dlpack__(max_version=_VERSION)  # what the checks below come to
    versioned = _wants_versioned(max_version)
    _check_copy(copy)
    wanted = None if dl_device is None else _device_tuple(dl_device, "dl_device")
    device = tensor._device
    if device is CPU_DEVICE:
        if wanted is not None and wanted != _CPU:
            raise DLPackError(f"a CPU tensor can be exported to the CPU only, not to "
                              f"{_type_name(wanted[0])} device {wanted[1]}", call="__dlpack__")
        if stream is not None and stream != -1:
            raise DLPackError(f"stream must be None (or -1) for a CPU tensor, not {stream!r}",
                              call="__dlpack__")
        array, dtype = tensor._array, tensor._dtype
        if versioned and _NUMPY_EXPORTS_VERSIONED and dtype is not _BFLOAT16:
            return array.__dlpack__(max_version=_VERSION, copy=copy)
        flags = 0
        if copy:
            array = array.copy()
            flags = DLPACK_FLAG_BITMASK_IS_COPIED
        return _host_capsule(array, dtype, versioned, flags)

    device = tensor._live_device()
    own = dlpack_device(tensor) if device.platform.dlpack_device_type is not None else None
    to_host = wanted == _CPU
    if wanted is not None and not to_host and wanted != own:
        raise DLPackError(
            f"{device.name} can be exported as {own if own else 'nothing'} or as a host copy "
            f"(1, 0), not as {_type_name(wanted[0])} device {wanted[1]}", call="__dlpack__")
    if own is None and not to_host:
        dlpack_device(tensor)  # raises, saying what to do
    if to_host and (copy or not _host_addressable(device)):
        if copy is False:
            raise DLPackError(
                f"{device.name} memory is not host-addressable (its plugin declares "
                f"{_type_name(own[0]) if own else 'no DLPack device'}); a consumer on the CPU "
                f"needs a copy, and copy=False forbids one", call="__dlpack__")
        values = tensor.numpy()  # waits for the producer; a new array the consumer owns
        return _host_capsule(values, tensor._dtype, versioned, DLPACK_FLAG_BITMASK_IS_COPIED)
    if own is not None and own[0] not in DLDeviceType.__members__.values():
        raise DLPackError(f"{device.platform.label} declares {_type_name(own[0])}, which this "
                          f"host cannot describe", call="__dlpack__")
    flags = DLPACK_FLAG_BITMASK_READ_ONLY
    if copy:
        tensor = _copy_on_device(tensor, device)
        flags = DLPACK_FLAG_BITMASK_IS_COPIED
    if to_host or stream is None or stream == -1:
        tensor._wait_for_producer(device)
    else:
        consumer = _consumer_stream(device, stream)
        if consumer is not device.compute_stream or tensor._ready is not None:
            tensor._order_after_producer(device, consumer)  # (kernels ran on compute already)
    buffer = tensor._buffer
    return _new_capsule(buffer, buffer.address, _CPU if to_host else own, tensor._dtype,
                        tensor._shape, None, flags, versioned)


def _copy_on_device(tensor: Tensor, device: "PluggableDevice") -> Tensor:
    """A new tensor of the same values on the same device, copied on its compute stream."""
    executor = device.executor
    buffer = DeviceBuffer(executor, tensor.nbytes)
    if tensor.nbytes:
        stream = device.compute_stream
        tensor._order_after_producer(device, stream)
        try:
            executor.memcpy_dtod(stream, buffer.memory(), tensor._buffer.memory(),
                                 tensor.nbytes)
        except BaseException:
            buffer.release_now()
            raise
        buffer.stamp(stream._ledger)
    return Tensor(tensor._shape, tensor._dtype, device, buffer=buffer)


def to_dlpack(tensor: Any):
    """A DLPack capsule of ``tensor`` (TensorFlow RFC 180's ``to_dlpack``): a legacy
    ``"dltensor"`` capsule, which every DLPack consumer reads (``torch.utils.dlpack.
    from_dlpack``, ``cupy.from_dlpack``, ``pluggable.from_dlpack``)."""
    if not isinstance(tensor, Tensor):
        raise InvalidArgumentError(f"to_dlpack needs a pluggable.Tensor, not "
                                   f"{type(tensor).__name__}; make one with pluggable.tensor()",
                                   call="to_dlpack")
    return export(tensor)


# -- import ----------------------------------------------------------------------------------
class _Offer:
    """Hands one capsule to NumPy's ``from_dlpack``, which consumes it."""

    __slots__ = ("capsule",)

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return _CPU


class _ImportedBuffer(DeviceBuffer):
    """Device memory a DLPack producer owns: released by calling its deleter, once the work
    on the device's compute stream (and every other use) is done, never by the allocator."""

    __slots__ = ("_managed", "_deleter", "_stream")

    def __init__(self, device: "PluggableDevice", address: int, nbytes: int, managed: int,
                 deleter):
        DeviceBuffer.__init__(self, device.executor, nbytes, address)
        self._managed, self._deleter, self._stream = managed, deleter, device.compute_stream

    def _free(self) -> None:
        deleter, self._deleter = self._deleter, None
        if deleter is not None:
            deleter(self._managed)

    def release_now(self) -> None:
        self.address = 0
        self._free()

    def __del__(self):
        # Never the allocator's memory: DeviceBuffer's own release must find nothing to free.
        self.address = 0
        if getattr(self, "_deleter", None) is None:
            return
        try:
            executor = self.executor
            if executor._closed or self._stream.is_closed:
                self._free()
                return
            marker = executor.after_work(self._stream, lambda: None)
            from ..devices.event_manager import EventManager

            EventManager.when_done([marker, *(self.uses or ())], self._free)
        except Exception:  # the device is gone: nothing can still read the memory
            self._free()


def _is_capsule(obj: Any) -> bool:
    return type(obj) is _CapsuleType


def _capsule_name(capsule) -> Optional[bytes]:
    address = _PyCapsule_GetName(capsule)
    return ctypes.string_at(address) if address else None


def _request(x: Any, target: Any, copy: Optional[bool]):
    """Asks the producer ``x`` for a capsule, the way the array API standard says."""
    try:
        source = tuple(x.__dlpack_device__())
    except AttributeError:
        source = None
    except DLPackError:  # a plugin device without a DLPack device: a host copy is possible
        if target is not CPU_DEVICE:
            raise
        source = (0, 0)
    kwargs: Dict[str, Any] = {"max_version": _VERSION}
    host_source = source is None or source[0] in _HOST_TYPES
    if target is CPU_DEVICE and not host_source:
        kwargs["dl_device"] = _CPU
    if copy is not None:
        kwargs["copy"] = copy
    stream = None
    if isinstance(x, Tensor) and x._device is not CPU_DEVICE and target in (None, x._device) \
            and "dl_device" not in kwargs:
        stream = x._device.compute_stream  # our own consumer orders its stream, not the host
    try:
        return x.__dlpack__(stream=stream, **kwargs)
    except TypeError:
        if len(kwargs) > 1:
            raise  # a legacy producer cannot honour dl_device or copy
        return x.__dlpack__(stream=stream)  # a producer older than DLPack 1.0


# DLTensor, read in one go: data, device type and id, ndim, dtype code, bits and lanes,
# shape, strides, byte offset (native alignment reproduces the C layout; checked below).
_DLTENSOR = struct.Struct("@PiiiBBHPPQ")
assert _DLTENSOR.size == ctypes.sizeof(DLTensor)
_DLTENSOR_BYTES = ctypes.c_char * _DLTENSOR.size
_DIMS: Dict[int, Tuple[struct.Struct, Any]] = {}  # ndim -> (format, bytes type) of int64_t[ndim]


def _read_dims(address: int, ndim: int) -> Tuple[int, ...]:
    found = _DIMS.get(ndim)
    if found is None:
        found = _DIMS[ndim] = (struct.Struct(f"@{ndim}q"), ctypes.c_char * (8 * ndim))
    return found[0].unpack_from(found[1].from_address(address))


_TENSOR_OFFSET = {True: DLManagedTensorVersioned.dl_tensor.offset,
                  False: DLManagedTensor.dl_tensor.offset}


class _Described(NamedTuple):
    data: int
    device_type: int
    device_id: int
    dtype: DType
    shape: Tuple[int, ...]
    strides: Optional[Tuple[int, ...]]  # in elements; None when compact
    byte_offset: int


def _describe(address: int) -> _Described:
    """Reads and checks the DLTensor at ``address``."""
    (data, device_type, device_id, ndim, code, bits, lanes, shape_ptr, strides_ptr,
     byte_offset) = _DLTENSOR.unpack_from(_DLTENSOR_BYTES.from_address(address))
    if not 0 <= ndim <= _MAX_NDIM:
        raise DLPackError(f"the DLPack tensor has ndim {ndim}; it must be 0..{_MAX_NDIM}",
                          call="from_dlpack")
    if lanes != 1:
        raise DLPackError(f"DLPack dtype with {lanes} lanes (vector elements) is not "
                          f"supported; pluggable tensors hold one value per element",
                          call="from_dlpack")
    dtype = _DTYPES.get((code, bits))
    if dtype is None:
        try:
            kind = DLDataTypeCode(code).name
        except ValueError:
            kind = f"unknown type code {code}"
        raise DLPackError(
            f"DLPack dtype {kind} with {bits} bits has no pluggable counterpart; supported: "
            f"{', '.join(d.name for d in ALL_DTYPES)}", call="from_dlpack")
    if ndim and not shape_ptr:
        raise DLPackError(f"the DLPack tensor has ndim {ndim} but a NULL shape",
                          call="from_dlpack")
    shape = _read_dims(shape_ptr, ndim) if ndim else ()
    if shape and min(shape) < 0:
        raise DLPackError(f"the DLPack tensor has a negative dimension in shape {shape}",
                          call="from_dlpack")
    count = _count(shape)
    if count * dtype.itemsize > _MAX_BYTES:
        raise DLPackError(f"the DLPack tensor's shape {shape} of {dtype.name} overflows "
                          f"({count * dtype.itemsize} bytes)", call="from_dlpack")
    strides = None
    if ndim and strides_ptr and count:
        strides = _read_dims(strides_ptr, ndim)
        expected = 1
        for n, stride in zip(reversed(shape), reversed(strides)):
            if n > 1 and stride != expected:
                break
            expected *= n
        else:
            strides = None  # compact after all
    if count and not data and not byte_offset:
        raise DLPackError(f"the DLPack tensor of shape {shape} has a NULL data pointer",
                          call="from_dlpack")
    return _Described(data or 0, device_type, device_id, dtype, shape, strides, byte_offset)


def _platform_device(device_type: int, device_id: int, target: Any) -> "PluggableDevice":
    """The plugin device a DLPack device names: ``target`` if it is that device, else the
    one device of the loaded platforms that declares it."""
    if device_type not in DLDeviceType.__members__.values():
        raise DLPackError(f"unknown DLPack device type {device_type}; DLPack "
                          f"{DLPACK_MAJOR_VERSION}.{DLPACK_MINOR_VERSION} defines "
                          f"{', '.join(f'{m.name} ({int(m)})' for m in DLDeviceType)}",
                          call="from_dlpack")
    from ..devices.device import PluggableDevice

    if isinstance(target, PluggableDevice) and \
            target.platform.dlpack_device_type == device_type and target.index == device_id:
        return target
    from ..loader.plugin_manager import manager

    m = manager()
    m.ensure_discovered()
    platforms = [p for p in m.devices.enabled_platforms()
                 if p.dlpack_device_type == device_type]
    if not platforms:
        raise NotFoundError(
            f"no loaded plugin declares DLPack device type {_type_name(device_type)}, so "
            f"memory on device {device_id} of that type cannot be used; load the plugin that "
            f"owns it (pluggable.load_plugin)", call="from_dlpack")
    if len(platforms) > 1:
        names = ", ".join(p.name for p in platforms)
        raise DLPackError(f"several plugins declare DLPack device type "
                          f"{_type_name(device_type)} ({names}); pass device= to say whose "
                          f"memory it is", call="from_dlpack")
    platform = platforms[0]
    if not 0 <= device_id < platform.device_count:
        raise NotFoundError(f"{platform.label} has {platform.device_count} device(s); DLPack "
                            f"device {device_id} is not one of them", call="from_dlpack")
    return resolve_device(f"{platform.device_type}:{device_id}")


def from_dlpack(x: Any, *, device: Any = None, copy: Optional[bool] = None) -> Tensor:
    """A tensor over the memory of ``x``: any object with ``__dlpack__`` (a NumPy array, a
    PyTorch or JAX tensor, a pluggable tensor) or a DLPack capsule.

    ``device`` (default: where the memory is) moves the result there; ``copy`` True always
    copies, False never does (`DLPackError`, a `BufferError`, when a copy is needed), None
    copies only when needed.
    """
    if device is None and copy is None and type(x) is not _CapsuleType:
        fast = _from_host_producer(x)
        if fast is not None:
            return fast
    _check_copy(copy)
    target = None if device is None else resolve_device(device)
    if _is_capsule(x):
        capsule = x
    elif hasattr(x, "__dlpack__"):
        capsule = _request(x, target, copy)
        if not _is_capsule(capsule):
            raise DLPackError(f"{type(x).__name__}.__dlpack__ returned "
                              f"{type(capsule).__name__}, not a capsule", call="from_dlpack")
    else:
        raise InvalidArgumentError(
            f"from_dlpack needs an object with __dlpack__ (NumPy, PyTorch, JAX, ... arrays) or "
            f"a DLPack capsule, not {type(x).__name__}", call="from_dlpack")
    return _consume(capsule, target, copy)


def _from_host_producer(x: Any) -> Optional[Tensor]:
    """The common case, fast: a producer of host memory (NumPy, PyTorch or JAX on the CPU, a
    CPU tensor) whose array NumPy's own consumer makes. None when that does not apply or
    NumPy refuses: the checking path then does the work, or says what is wrong."""
    if type(x) is Tensor:
        if x._array is None or x._device is not CPU_DEVICE:
            return None
        x = x._array  # what Tensor.__dlpack__ would hand NumPy's exporter anyway
    elif type(x) is not np.ndarray:  # a NumPy array is on the CPU: no need to ask
        try:
            device_type = x.__dlpack_device__()[0]
        except Exception:  # not a DLPack producer, or one that cannot say: the slow path
            return None
        if device_type not in _HOST_TYPES:
            return None
    try:
        array = np.from_dlpack(x)
    except Exception:
        return None
    dtype = _NUMPY_DTYPES.get(array.dtype)
    if dtype is None:
        return None
    flags = array.flags
    if flags.writeable:  # a READ_ONLY capsule (ours) made it read-only already
        flags.writeable = False
    return Tensor(array.shape, dtype, CPU_DEVICE, array)


def _consume(capsule, target: Any, copy: Optional[bool]) -> Tensor:
    if _PyCapsule_IsValid(capsule, _VERSIONED):
        versioned, name = True, _VERSIONED
    elif _PyCapsule_IsValid(capsule, _LEGACY):
        versioned, name = False, _LEGACY
    else:
        name = _capsule_name(capsule)
        if name in (_USED_VERSIONED, _USED_LEGACY):
            raise DLPackError("this DLPack capsule was already consumed (a capsule can be "
                              "imported once); ask the producer for a new one",
                              call="from_dlpack")
        raise DLPackError(f"a DLPack capsule is named 'dltensor_versioned' or 'dltensor', not "
                          f"{name!r}", call="from_dlpack")
    address = _PyCapsule_GetPointer(capsule, name)
    if versioned:
        managed = DLManagedTensorVersioned.from_address(address)
        if managed.version.major != DLPACK_MAJOR_VERSION:
            raise DLPackError(
                f"the capsule holds a DLPack {managed.version.major}.{managed.version.minor} "
                f"tensor; this host reads DLPack {DLPACK_MAJOR_VERSION}.x", call="from_dlpack")
    else:
        managed = DLManagedTensor.from_address(address)
    if not managed.deleter:
        raise DLPackError("the DLPack tensor has a NULL deleter, so nothing would say when its "
                          "memory may be freed; the producer must set one", call="from_dlpack")
    with _LIVE_LOCK:
        export_ = _LIVE.get(address)
    if export_ is not None and isinstance(export_.owner, np.ndarray) and target is None:
        # Our own host capsule coming back (RFC round trip): the very array it holds.
        array = export_.owner if copy is None else export_.owner.copy()
        _PyCapsule_SetName(capsule, _USED_VERSIONED if versioned else _USED_LEGACY)
        _release_export(address)
        if array.flags.writeable:
            array = array.view()
            array.flags.writeable = False
        return Tensor(array.shape, _NUMPY_DTYPES[array.dtype], CPU_DEVICE, array=array)
    d = _describe(address + _TENSOR_OFFSET[versioned])
    dtype, shape, strides = d.dtype, d.shape, d.strides
    if d.device_type in _HOST_TYPES:
        return _consume_host(capsule, managed.dl_tensor, dtype, shape, target, copy)
    source = _platform_device(d.device_type, d.device_id, target)
    if target not in (None, source) and copy is False:
        raise DLPackError(f"the memory is on {source.name}; moving it to {target.name} needs "
                          f"a copy, and copy=False forbids one", call="from_dlpack")
    if export_ is not None and isinstance(export_.owner, DeviceBuffer) and strides is None \
            and not d.byte_offset:
        result = Tensor(shape, dtype, source, buffer=export_.owner)
        _PyCapsule_SetName(capsule, _USED_VERSIONED if versioned else _USED_LEGACY)
        _release_export(address)  # the tensor holds the buffer itself
    else:
        if strides is not None:
            result = _compact_device_import(capsule, versioned, managed, address, d, source,
                                            copy)
            return result if target in (None, source) else result.to(target)
        nbytes = _count(shape) * dtype.itemsize
        buffer = _ImportedBuffer(source, d.data + d.byte_offset, nbytes, address,
                                 managed.deleter)
        _PyCapsule_SetName(capsule, _USED_VERSIONED if versioned else _USED_LEGACY)
        result = Tensor(shape, dtype, source, buffer=buffer)
    if target not in (None, source):
        return result.to(target)
    if copy:
        return _copy_on_device(result, source)
    return result


_count = math.prod


def _compact_device_import(capsule, versioned: bool, managed, address: int, d: _Described,
                           source: "PluggableDevice", copy: Optional[bool]) -> Tensor:
    """Strided device memory: kernels need it compact, so it is copied once, through the
    host, which must be able to read it (PLUGGABLE_DLPACK_HOST_ADDRESSABLE); then the
    producer's deleter runs."""
    if copy is False or not _host_addressable(source):
        why = ("copy=False forbids the copy" if copy is False else
               f"{source.platform.label} memory is not host-addressable, so the host cannot "
               f"gather it")
        raise DLPackError(f"device memory of {source.name} with strides {d.strides} (not "
                          f"compact) must be copied to compact memory for kernels, and {why}",
                          call="from_dlpack")
    itemsize = d.dtype.itemsize
    low = sum(min(0, (n - 1) * s) for n, s in zip(d.shape, d.strides))
    high = sum(max(0, (n - 1) * s) for n, s in zip(d.shape, d.strides))
    first = d.data + d.byte_offset + low * itemsize
    span = np.frombuffer((ctypes.c_char * ((high - low + 1) * itemsize)).from_address(first),
                         d.dtype.numpy_dtype)
    view = np.lib.stride_tricks.as_strided(span[-low:], d.shape,
                                           tuple(s * itemsize for s in d.strides))
    result = _upload(np.ascontiguousarray(view), d.dtype, source, owned=False)
    _PyCapsule_SetName(capsule, _USED_VERSIONED if versioned else _USED_LEGACY)
    managed.deleter(address)  # the upload is done: the producer's memory is not needed
    return result


def _consume_host(capsule, t, dtype: DType, shape: Tuple[int, ...], target: Any,
                  copy: Optional[bool]) -> Tensor:
    """Host memory: NumPy consumes the capsule (strides, byte offset, read-only flag and the
    deleter are its business from there on)."""
    if target not in (None, CPU_DEVICE) and copy is False:
        raise DLPackError(f"the memory is host memory; putting it on {target.name} needs a "
                          f"copy, and copy=False forbids one", call="from_dlpack")
    if dtype is _BFLOAT16:  # NumPy knows no bfloat16: it reads the bits as uint16
        t.dtype.code = DLDataTypeCode.kDLUInt
    array = np.from_dlpack(_Offer(capsule))
    if dtype is _BFLOAT16:
        array = array.view(dtype.numpy_dtype)
    if target not in (None, CPU_DEVICE):
        return _upload(_compact(array), dtype, target, owned=False)
    if copy:
        array = array.copy()
    array.flags.writeable = False
    return Tensor(shape, dtype, CPU_DEVICE, array=array)
