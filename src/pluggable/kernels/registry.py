"""Kernels: the registrations plugins make with TensorFlow's kernel C API, and running them.

A plugin's ``TF_InitKernel`` registers kernels exactly as for TensorFlow
(``TF_NewKernelBuilder`` + ``TF_RegisterKernelBuilder``). The registry lives in the host
runtime library (``src/pluggable/_runtime/kernels.c``); this module owns the Python side:

- `load_kernels` runs a plugin's ``TF_InitKernel`` once, right after the loader registered
  its platform, and rejects (disables) registrations for a device type no loaded plugin
  provides, for "CPU" (the host's own device, whose kernels are NumPy's), and registrations
  that failed (a malformed builder); one `PluginLoadWarning` per plugin counts them and names
  the first, `refusals` lists them all. Registering a kernel equal to another one is no
  error, as in TensorFlow: dispatch refuses a call that two kernels match at one priority;
- `registered_kernels` lists the enabled `KernelRegistration` objects;
- `KernelRegistration.instantiate` makes a `Kernel` (the plugin's ``create_func`` reads the
  attributes), and `Kernel.run` executes it on a device's stream with one foreign call.

Attribute values: bool, int, float, str, `pluggable.base.dtypes.DType` (or ``TF_DataType``), and
lists or tuples of one of those; an empty list whose kind matters is ``AttrList(kind, ())``.
"""
from __future__ import annotations

import ctypes
import struct as _struct
import sys
import threading
import weakref
from array import array as _array
from collections import namedtuple

from ..base.errors import warn
from ..base import limits
from ..base.limits import safe_text
from ..base import native as _native
from ..devices.handle import finalizer
from ..abi.kernels import TF_InitKernel_fn
from ..abi.tf_status import TF_Code
from ..base.errors import (FailedPreconditionError, InvalidArgumentError, PluginLoadWarning,
                     error_for_code)

TYPE_CHECKING = False  # typing's constant, without importing typing at start-up
if TYPE_CHECKING:
    from typing import (Any, Dict, FrozenSet, Iterable, List, Mapping, Optional, Sequence,
                        Tuple)

    from ..base.dtypes import DType  # noqa: F401  (NumPy, imported on first use only)
    from ..devices.executor import StreamExecutor
    from ..devices.platform import Platform
    from ..devices.stream import Stream
    from ..plugin.library import PluginLibrary

__all__ = ["KernelRegistration", "Kernel", "KernelInput", "KernelOutput", "AttrList",
           "registered_kernels", "all_registrations", "load_kernels", "register_kernels",
           "flush_releases", "close_all",
           "free_host_output", "host_output_array", "Refusal", "refusals", "kernel_libraries"]


# -- the foreign functions ------------------------------------------------------------------
class PG_KernelInfo(ctypes.Structure):
    """Mirror of ``PG_KernelInfo`` (runtime_internal.h)."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("op", ctypes.c_char_p),
        ("device_type", ctypes.c_char_p),
        ("kernel_name", ctypes.c_char_p),
        ("label", ctypes.c_char_p),
        ("source", ctypes.c_char_p),
        ("priority", ctypes.c_int32),
        ("is_async", ctypes.c_int32),
        ("enabled", ctypes.c_int32),
        ("error_code", ctypes.c_int32),
        ("error_message", ctypes.c_char_p),
        ("num_constraints", ctypes.c_int32),
        ("constraint_attrs", ctypes.POINTER(ctypes.c_char_p)),
        ("constraint_num_types", ctypes.POINTER(ctypes.c_int32)),
        ("constraint_types", ctypes.POINTER(ctypes.POINTER(ctypes.c_int32))),
        ("num_host_memory_args", ctypes.c_int32),
        ("host_memory_args", ctypes.POINTER(ctypes.c_char_p)),
    ]


class PG_Attr(ctypes.Structure):
    """Mirror of ``PG_Attr`` (runtime_internal.h)."""

    _fields_ = [
        ("name", ctypes.c_char_p),
        ("kind", ctypes.c_int32),
        ("is_list", ctypes.c_int32),
        ("count", ctypes.c_int64),
        ("values", ctypes.c_void_p),
        ("lengths", ctypes.POINTER(ctypes.c_uint64)),
    ]


_p = ctypes.c_void_p
# name: (restype, argtypes)                                       C prototype (runtime_internal.h)
_PROTOTYPES = {
    "pluggable_BeginKernelRegistration": (None, (ctypes.c_char_p,)),
    #   void (const char* source)
    "pluggable_EndKernelRegistration": (ctypes.c_int64, ()),
    #   int64_t (void)   -> registrations made in the session
    "pluggable_KernelRegistrationCount": (ctypes.c_int64, ()),
    #   int64_t (void)
    "pluggable_KernelRegistrationInfo": (ctypes.c_int,
                                         (ctypes.c_int64, ctypes.POINTER(PG_KernelInfo))),
    #   int (int64_t id, PG_KernelInfo* info)   -> 0, or -1 for an unknown id
    "pluggable_KernelRegistrationKeys": (ctypes.c_int64, (ctypes.c_int64, ctypes.c_int64, _p,
                                                          ctypes.c_int64)),
    #   int64_t (int64_t start, int64_t end, char* buffer, int64_t capacity)  -> bytes, or -1
    "pluggable_KernelRegistrationSetEnabled": (ctypes.c_int, (ctypes.c_int64, ctypes.c_int)),
    #   int (int64_t id, int enabled)
    "pluggable_KernelCreate": (_p, (ctypes.c_int64, ctypes.c_char_p, _p, ctypes.c_int32, _p)),
    #   PG_Kernel* (int64_t id, const char* node_name, const PG_Attr* attrs, int32_t num_attrs,
    #               TF_Status* status)
    "pluggable_KernelDelete": (None, (_p,)),
    #   void (PG_Kernel*)
    "pluggable_KernelRun": (ctypes.c_int, (ctypes.c_size_t,)),
    #   int (const int64_t* request)
    "pluggable_FreeHostMemory": (None, (_p,)),
    #   void (void* data)
    "pluggable_SetOutputGuards": (None, (ctypes.c_int,)),
    #   void (int on)
    "pluggable_CheckOutputGuards": (ctypes.c_size_t, (ctypes.c_char_p, ctypes.c_size_t)),
    #   size_t (char* report, size_t n)   -> 0 when every guard of the last run is intact
    "pluggable_MarkPluginStuck": (None, (ctypes.c_char_p, ctypes.c_char_p)),
    #   void (const char* source, const char* reason)
    "pluggable_PluginStuckReason": (ctypes.c_size_t, (ctypes.c_char_p, ctypes.c_char_p,
                                                      ctypes.c_size_t)),
    #   size_t (const char* source, char* buf, size_t n)   -> 0 when the plugin is not stuck
}


_fns = _native.bind(_native.lib, _PROTOTYPES)
_Begin = _fns["pluggable_BeginKernelRegistration"]
_End = _fns["pluggable_EndKernelRegistration"]
_Count = _fns["pluggable_KernelRegistrationCount"]
_Info = _fns["pluggable_KernelRegistrationInfo"]
_Keys = _fns["pluggable_KernelRegistrationKeys"]
_SetEnabled = _fns["pluggable_KernelRegistrationSetEnabled"]
_Create = _fns["pluggable_KernelCreate"]
_Delete = _fns["pluggable_KernelDelete"]
_Run = _fns["pluggable_KernelRun"]
_FreeHostMemory = _fns["pluggable_FreeHostMemory"]
_MarkStuck = _fns["pluggable_MarkPluginStuck"]
_StuckReason = _fns["pluggable_PluginStuckReason"]


def _stuck_in_runtime(path: str) -> str:
    """Why the runtime library found the plugin ``path`` stuck in a kernel's compute, or ""."""
    buffer = ctypes.create_string_buffer(512)
    if not _StuckReason(path.encode("utf-8", "surrogateescape"), buffer, len(buffer)):
        return ""
    return buffer.value.decode("utf-8", "replace")


def _refuse_kernels_of(path: str, reason: str) -> None:
    """A plugin found stuck elsewhere (destroy_stream, its profiler): its kernels are neither
    created, run nor deleted again."""
    _MarkStuck(path.encode("utf-8", "surrogateescape"), reason.encode("utf-8", "replace"))


limits.on_plugin_stuck(_refuse_kernels_of)
# The codes of a run the watchdog (deadline) or Ctrl-C abandoned inside the plugin.
_ABANDONING_CODES = frozenset((int(TF_Code.TF_DEADLINE_EXCEEDED), int(TF_Code.TF_CANCELLED)))
set_output_guards = _fns["pluggable_SetOutputGuards"]
_CheckOutputGuards = _fns["pluggable_CheckOutputGuards"]


def output_guard_report() -> str:
    """What the kernel runs of this thread since the last call wrote past their outputs or
    temporaries (guard bytes, `set_output_guards`); "" when nothing did. Call it once the
    device work of the run is done."""
    report = ctypes.create_string_buffer(2048)
    if not _CheckOutputGuards(report, len(report)):
        return ""
    return report.value.decode(errors="replace")

# The request and output layouts of pluggable_KernelRun (runtime_internal.h: PG_RUN_*,
# PG_OUT_*), as the compiled extension publishes them.
_compiled = _native.compiled
_RUN_OUTPUT_HOST_MEMORY = _compiled.PG_RUN_OUTPUT_HOST_MEMORY
_OUT_HEADER_WORDS = _compiled.PG_OUT_HEADER_WORDS
_OUT_OWNED, _OUT_HOST_MEMORY = _compiled.PG_OUT_OWNED, _compiled.PG_OUT_HOST_MEMORY
_MAX_OUTPUT_DIMS = _compiled.PG_MAX_OUTPUT_DIMS
_OUT_HEAD_BYTES = 8 * _OUT_HEADER_WORDS
_MASK64 = (1 << 64) - 1
_addressof = ctypes.addressof
_byref = ctypes.byref
_INFO_SIZE = ctypes.sizeof(PG_KernelInfo)

_ATTR_KINDS = {"int": 0, "float": 1, "bool": 2, "type": 3, "string": 4}  # PG_ATTR_*
_KIND_CTYPES = {"int": ctypes.c_int64, "float": ctypes.c_float, "bool": ctypes.c_ubyte,
                "type": ctypes.c_int32}


# -- public value types ---------------------------------------------------------------------
class AttrList(namedtuple("AttrList", "kind values", defaults=((),))):
    """A list attribute with an explicit element kind: "int", "float", "bool", "type" or
    "string" (``kind``), and its ``values`` (a tuple, default empty). Needed only for an
    empty list whose kind matters; ``[1, 2]`` is a list of ints."""

    __slots__ = ()


class KernelInput(namedtuple("KernelInput", "address nbytes dtype shape host_memory",
                             defaults=(False,))):
    """One input of `Kernel.run`: ``nbytes`` of device memory at ``address`` (host memory
    with ``host_memory``, default False) the kernel reads during the call. ``dtype`` is a
    ``TF_DataType`` code, ``shape`` a tuple of ints."""

    __slots__ = ()


class KernelOutput(namedtuple("KernelOutput", "address nbytes dtype shape owned aliased_input "
                              "host_memory", defaults=(False,))):
    """One output of `Kernel.run`.

    - ``owned``: ``address`` is fresh memory the caller now owns: device memory of the run's
      executor (``executor.allocator.deallocate(address)``) or, with ``host_memory``, host
      memory the runtime allocated (free it with `free_host_output`);
    - ``aliased_input >= 0``: the kernel made the output a view of that input; ``address``
      lies inside the input's memory, nothing to free;
    - neither (``nbytes == 0``): an empty output, address 0.

    ``dtype`` is a ``TF_DataType`` code, ``shape`` a tuple of ints, ``aliased_input`` -1 when
    owned or empty, ``host_memory`` (default False) whether the output is in host memory.
    """

    __slots__ = ()


def free_host_output(address: int) -> None:
    """Frees the host memory of an owned host-memory `KernelOutput`."""
    _FreeHostMemory(address or None)


class _HostBlock:
    """Host memory the runtime allocated for an owned output, as a NumPy buffer: freed when
    the last array over it is gone."""

    __slots__ = ("__array_interface__", "__weakref__")

    def __init__(self, address: int, nbytes: int):
        self.__array_interface__ = {"data": (address, False), "shape": (nbytes,),
                                    "typestr": "|u1", "version": 3}
        finalizer(self, free_host_output, address)


def host_output_array(output: KernelOutput, numpy_dtype, inputs: Sequence[Any] = ()):
    """A NumPy array over a host-memory output of `Kernel.run`, without a copy: an owned
    output's memory is freed with the last array over it; an output aliasing an input is a
    view of that input's array (``inputs``: the contiguous arrays the run read)."""
    import numpy as np  # here: loading kernels needs no NumPy

    if not output.nbytes:
        return np.zeros(output.shape, numpy_dtype)
    if output.aliased_input >= 0:
        source = inputs[output.aliased_input]
        start = output.address - source.__array_interface__["data"][0]
        raw = source.reshape(-1).view(np.uint8)[start:start + output.nbytes]
    else:
        raw = np.asarray(_HostBlock(output.address, output.nbytes))
    return raw.view(numpy_dtype).reshape(output.shape)


# -- registrations --------------------------------------------------------------------------
_MISSING = object()


def _text(raw: Optional[bytes]) -> str:
    """A name or message a plugin registered, as the host shows it (`limits.safe_text`)."""
    return safe_text((raw or b"").decode("utf-8", "replace"))


def _type_code(value: Any) -> int:
    """A TF_DataType code from a DType, a TF_DataType, an int code or anything `as_dtype`
    takes."""
    code = getattr(value, "tf_code", None)  # a pluggable.DType
    if code is not None:
        return int(code)
    import numbers  # here: kernel loading at start-up never needs it

    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    from ..base.dtypes import as_dtype  # NumPy: only when names or NumPy types are used

    return int(as_dtype(value).tf_code)


def _is_type(value: Any) -> bool:
    from ..abi.tf_datatype import TF_DataType  # here: start-up needs no dtype enum

    return isinstance(value, TF_DataType) or getattr(value, "tf_code", None) is not None


class KernelRegistration:
    """One kernel a plugin registered: op, device type, constraints, and its source.

    ``constraints`` maps type attributes to the ``TF_DataType`` codes allowed;
    ``host_memory`` names the input and output arguments kept in host memory; ``plugin`` is
    the path of the plugin that registered it.
    """

    __slots__ = ("id", "op", "device_type", "kernel_name", "label", "priority", "constraints",
                 "host_memory", "plugin", "is_async", "error_code", "error_message", "_enabled")

    def __init__(self, registration_id: int, keys: Optional[Sequence[bytes]] = None):
        # Every kernel of every plugin is mirrored at load, from its keys (op, device type,
        # source, error code, enabled: `_mirror` reads them for all at once); the other
        # fields are read on first use.
        if keys is None:
            self._read(registration_id)
            return
        op, device_type, source, code, enabled = keys
        self.id = registration_id
        self.op = _text(op)
        self.device_type = _text(device_type)
        self.plugin = source.decode("utf-8", "surrogateescape")
        self.error_code = int(code)
        self._enabled = enabled == b"1"

    def __getattr__(self, name: str):
        # Only for a field not read yet (slots that are set never come here).
        if name not in _DETAILS:
            raise AttributeError(f"'KernelRegistration' object has no attribute {name!r}")
        self._read(self.id, keys=False)
        return object.__getattribute__(self, name)

    def _read(self, registration_id: int, keys: bool = True) -> None:
        """Reads the fields from the runtime (each once; arrays by slicing); without
        ``keys``, only those `_mirror` did not (the mirrored ones stay as they are: `enabled`
        may have changed since, under the registry lock)."""
        info = PG_KernelInfo()
        info.struct_size = _INFO_SIZE
        if _Info(registration_id, _byref(info)):
            raise InvalidArgumentError(f"no kernel registration has id {registration_id}",
                                       call="KernelRegistration")
        if keys:
            self.id = registration_id
            self.op = _text(info.op)
            self.device_type = _text(info.device_type)
            self.plugin = (info.source or b"").decode("utf-8", "surrogateescape")
            self.error_code = info.error_code
            self._enabled = bool(info.enabled)
        self.kernel_name = _text(info.kernel_name)
        self.label = _text(info.label)
        self.priority = info.priority
        self.is_async = bool(info.is_async)
        self.error_message = _text(info.error_message)
        constraints: Dict[str, FrozenSet[int]] = {}
        n = info.num_constraints
        if n:
            for attr, count, types in zip(info.constraint_attrs[:n],
                                          info.constraint_num_types[:n],
                                          info.constraint_types[:n]):
                constraints[(attr or b"").decode("utf-8", "replace")] = frozenset(types[:count])
        self.constraints = constraints
        n = info.num_host_memory_args
        self.host_memory = frozenset(
            (a or b"").decode("utf-8", "replace") for a in info.host_memory_args[:n]) \
            if n else frozenset()

    @property
    def enabled(self) -> bool:
        """Whether the host may use the kernel (rejected and failed registrations are not)."""
        return self._enabled

    def set_enabled(self, enabled: bool) -> None:
        """Enables or disables the kernel; a failed registration cannot be enabled."""
        with _registry_lock:
            self._set_enabled(enabled)
            _rebuild_index()

    def _set_enabled(self, enabled: bool) -> None:
        # Without rebuilding the index: `load_kernels` disables any number of kernels and
        # rebuilds once (once per kernel made refusing n kernels cost O(n^2)).
        if _SetEnabled(self.id, int(bool(enabled))):
            raise FailedPreconditionError(
                f"kernel {self.kernel_name} for {self.op} on {self.device_type} failed to "
                f"register ({self.error_message}) and cannot be enabled",
                plugin=self.plugin, call="KernelRegistration.set_enabled")
        self._enabled = bool(enabled)

    def host_memory_outputs(self, output_names: Sequence[str]) -> Optional[Tuple[bool, ...]]:
        """Per output of a run (``output_names``: each output's argument name, a list
        output's name repeated), whether this kernel keeps it in host memory
        (``TF_KernelBuilder_HostMemory``): `Kernel.run`'s ``output_host_memory``. None when
        it keeps none there."""
        if not self.host_memory:
            return None
        flags = tuple(name in self.host_memory for name in output_names)
        return flags if any(flags) else None

    def matches(self, attrs: Mapping[str, Any]) -> bool:
        """Whether a node with ``attrs`` may use this kernel, as TensorFlow decides: every
        type constraint holds (a type, or every type of a type list, is allowed; a
        constrained attribute that is missing fails), and the node's ``_kernel`` label (""
        when absent) equals the kernel's label."""
        for name, allowed in self.constraints.items():
            value = attrs.get(name, _MISSING)
            code = getattr(value, "tf_code", None)
            if code is not None:  # a DType, the common case
                if code not in allowed:
                    return False
                continue
            if value is _MISSING:
                return False
            if isinstance(value, AttrList):
                value = value.values
            values = value if isinstance(value, (list, tuple)) else (value,)
            try:
                if any(_type_code(v) not in allowed for v in values):
                    return False
            except (TypeError, ValueError):
                return False
        return str(attrs.get("_kernel", "") or "") == self.label

    def instantiate(self, node_name: str, attrs: Mapping[str, Any]) -> "Kernel":
        """A kernel instance for node ``node_name``: the plugin's ``create_func`` runs now and
        reads ``attrs``. Raises the `pluggable.errors` class of the plugin's status when
        construction fails."""
        flush_releases()
        array, count, _keep = _pack_attrs(attrs)
        status = _native.acquire_status()
        try:
            handle = _Create(self.id, str(node_name).encode("utf-8"), array, count,
                             status.address)
            if not handle:
                message = status.message
                raise error_for_code(status.code)(
                    f"{self.plugin}: creating kernel {self.kernel_name} for {self.op} (node "
                    f"{node_name!r}) failed: {message or '(the plugin gave no message)'}",
                    plugin=self.plugin, call=f"kernel {self.kernel_name}",
                    plugin_message=message)
        finally:
            _native.release_status(status)
        kernel = Kernel(self, str(node_name), handle)
        _live_kernels.add(kernel)
        return kernel

    def __repr__(self):
        state = "" if self._enabled else (" failed" if self.error_code else " disabled")
        extra = f" label={self.label!r}" if self.label else ""
        return (f"<KernelRegistration {self.kernel_name!r} op={self.op} "
                f"device_type={self.device_type} priority={self.priority}{extra}{state}>")


def _attr_kind(name: str, value: Any) -> str:
    import numbers

    if isinstance(value, (bool,)) or type(value).__name__ == "bool_":
        return "bool"
    if _is_type(value):
        return "type"
    if isinstance(value, numbers.Integral):
        return "int"
    if isinstance(value, numbers.Real):
        return "float"
    if isinstance(value, (str, bytes)):
        return "string"
    raise InvalidArgumentError(
        f"attribute {name!r}: {value!r} ({type(value).__name__}) is not a kernel attribute "
        f"value; use bool, int, float, str, a DType, or a list of one of those",
        call="KernelRegistration.instantiate")


def _list_kind(name: str, values: Sequence[Any]) -> str:
    kinds = {_attr_kind(name, v) for v in values}
    if not kinds:
        return "int"
    if kinds == {"int", "float"}:
        return "float"
    if len(kinds) > 1:
        raise InvalidArgumentError(
            f"attribute {name!r}: a list mixes {', '.join(sorted(kinds))} values",
            call="KernelRegistration.instantiate")
    return kinds.pop()


def _pack_attrs(attrs: Mapping[str, Any]):
    """``(PG_Attr array, count, keep)`` for ``attrs``; ``keep`` holds the memory the array
    points to (pluggable_KernelCreate copies it all)."""
    keep: List[Any] = []  # the value arrays and names the PG_Attr array points to
    structs: List[Tuple] = []
    for name, value in attrs.items():
        if isinstance(value, AttrList):
            kind, values, is_list = value.kind, tuple(value.values), True
            if kind not in _ATTR_KINDS:
                raise InvalidArgumentError(
                    f"attribute {name!r}: AttrList kind must be one of "
                    f"{', '.join(_ATTR_KINDS)}, not {kind!r}",
                    call="KernelRegistration.instantiate")
        elif isinstance(value, (list, tuple)):
            values, is_list = tuple(value), True
            kind = _list_kind(name, values)
        else:
            values, is_list = (value,), False
            kind = _attr_kind(name, value)
        lengths = None
        try:
            if kind == "string":
                raw = [v if isinstance(v, bytes) else str(v).encode("utf-8") for v in values]
                keep.extend(raw)
                array = (ctypes.c_char_p * max(1, len(raw)))(*raw)
                lengths = (ctypes.c_uint64 * max(1, len(raw)))(*(len(r) for r in raw))
                keep.append(lengths)
            elif kind == "type":
                array = (ctypes.c_int32 * max(1, len(values)))(*(_type_code(v) for v in values))
            elif kind == "bool":
                array = (ctypes.c_ubyte * max(1, len(values)))(*(bool(v) for v in values))
            elif kind == "int":
                ints = [int(v) for v in values]
                if any(not -(1 << 63) <= v < (1 << 63) for v in ints):
                    raise OverflowError
                array = (ctypes.c_int64 * max(1, len(ints)))(*ints)
            else:
                array = (ctypes.c_float * max(1, len(values)))(*(float(v) for v in values))
        except (TypeError, ValueError, OverflowError) as exc:
            raise InvalidArgumentError(
                f"attribute {name!r}: {value!r} cannot be passed as {kind} value(s): "
                f"{exc or 'out of range'}", call="KernelRegistration.instantiate") from None
        encoded = str(name).encode("utf-8")
        keep.extend((array, encoded))
        structs.append((encoded, _ATTR_KINDS[kind], int(is_list), len(values),
                        ctypes.cast(array, ctypes.c_void_p), lengths))
    array = (PG_Attr * max(1, len(structs)))()
    for i, (encoded, kind, is_list, count, values_p, lengths) in enumerate(structs):
        entry = array[i]
        entry.name, entry.kind, entry.is_list, entry.count = encoded, kind, is_list, count
        entry.values = values_p
        if lengths is not None:
            entry.lengths = ctypes.cast(lengths, ctypes.POINTER(ctypes.c_uint64))
    return array, len(structs), keep


_registry_lock = threading.RLock()
_registrations: List[KernelRegistration] = []
_index: Dict[Tuple[str, str], List[KernelRegistration]] = {}
_by_op: Dict[str, List[KernelRegistration]] = {}
_loaded: Dict[int, List[int]] = {}  # TF_InitKernel address -> the ids it had accepted


# The fields `KernelRegistration` reads on first use rather than when mirrored.
_DETAILS = frozenset(("kernel_name", "label", "priority", "constraints", "host_memory",
                      "is_async", "error_message"))


def _keys(start: int, end: int) -> List[bytes]:
    """The keys of registrations ``start .. end - 1`` (op, device type, source, error code,
    enabled: five per registration), read in one call, or one registration at a time when
    they cannot be read at once."""
    size = _Keys(start, end, None, 0)
    buffer = ctypes.create_string_buffer(max(1, size))
    if size >= 0 and _Keys(start, end, buffer, size) == size:
        return buffer.raw[:size].split(b"\0")
    return [field for r in (KernelRegistration(i) for i in range(start, end))
            for field in (r.op.encode(), r.device_type.encode(),
                          r.plugin.encode("utf-8", "surrogateescape"),
                          str(r.error_code).encode(), b"1" if r._enabled else b"0")]


def _mirror(start: int, end: int) -> List[KernelRegistration]:
    """Registrations ``start .. end - 1``, from their keys."""
    keys = _keys(start, end)
    return [KernelRegistration(i, keys[k:k + 5])
            for i, k in zip(range(start, end), range(0, 5 * (end - start), 5))]


def _refresh() -> None:
    """Mirrors registrations made since the last call."""
    count = _Count()
    if count == len(_registrations):
        return
    with _registry_lock:
        _registrations.extend(_mirror(len(_registrations), _Count()))
        _rebuild_index()


# Counts changes of the set of enabled kernels; plans made from an older set are stale.
generation = 0


def _stale() -> None:
    """The set of kernels changed: plans made from the older one are stale."""
    global generation
    generation += 1
    _native.compiled.invalidate()


def _rebuild_index() -> None:
    global generation
    generation += 1
    _index.clear()
    _by_op.clear()
    for r in _registrations:
        if r._enabled:
            _index.setdefault((r.op, r.device_type), []).append(r)
            _by_op.setdefault(r.op, []).append(r)
    _native.compiled.invalidate()  # told last: a plan made meanwhile sees the new state


def registered_kernels(op: Optional[str] = None, device_type: Optional[str] = None,
                       plugin: Optional[str] = None) -> List[KernelRegistration]:
    """The enabled kernel registrations, in registration order, for ``op`` and
    ``device_type`` when given.

    Two plugins may provide one device type (one of them enabled); a kernel must run on
    devices of the plugin that registered it: pass ``plugin`` (a platform's ``path``) to
    keep only that plugin's kernels."""
    _refresh()
    if op is not None and device_type is not None:
        found = _index.get((op, device_type), ())
    elif op is not None:
        found = _by_op.get(op, ())
    else:
        with _registry_lock:
            found = [r for r in _registrations if r._enabled
                     and (device_type is None or r.device_type == device_type)]
    if plugin is not None:
        return [r for r in found if r.plugin == plugin]
    return list(found)


def all_registrations() -> List[KernelRegistration]:
    """Every registration, disabled and failed ones included."""
    _refresh()
    with _registry_lock:
        return list(_registrations)


# Libraries with kernels and no device of their own (TF_InitKernel without SE_InitPlugin,
# as TensorFlow's load_pluggable_device_library loads them): their kernels serve every device
# of the types they name, whichever plugin provides it.
kernel_libraries: FrozenSet[str] = frozenset()


def load_kernels(source: "Platform | PluginLibrary",
                 device_types: Optional[Iterable[str]] = None) -> List[KernelRegistration]:
    """Runs the ``TF_InitKernel`` of ``source`` (once per process, `register_kernels`) and
    returns the kernels it registered that the host accepted."""
    accepted = register_kernels(source, device_types)
    with _registry_lock:
        _refresh()
        return [_registrations[i] for i in accepted]


def register_kernels(source: "Platform | PluginLibrary",
                     device_types: Optional[Iterable[str]] = None) -> List[int]:
    """Runs the ``TF_InitKernel`` of ``source`` (once per process) and returns the ids of the
    kernels it registered that the host accepted. The registry's Python objects are made at
    the first lookup, not here: loading a plugin of hundreds of kernels (at start-up) makes
    none but those it refuses.

    ``source`` is a loaded `Platform`, or a `PluginLibrary` without a device (a kernel
    library). ``device_types`` are the device types of every loaded platform (the loader
    passes them; a platform's own is always one). Kernels for "CPU" run on the host's CPU
    device, as in TensorFlow. A kernel library's kernels are all kept, as TensorFlow keeps
    them: each serves every device of the type it names, including devices of plugins loaded
    later. A platform's registration for a device type no loaded plugin provides is
    disabled, as is one that failed; one `PluginLoadWarning` reports them with the ops
    `plugin_ops.adopt` refused, and `refusals` keeps every one.
    """
    global kernel_libraries
    library = getattr(source, "library", source)
    own = getattr(source, "device_type", None)  # None: a library without a device
    init = library.kernel_init
    if init is None:
        return []
    path = source.path
    known = set(device_types or ()) | ({own} if own else set()) | {"CPU"}
    every_type = own is None  # a kernel library: its kernels wait for their devices
    refused: List[Refusal] = []
    with _registry_lock:
        if init in _loaded:
            return list(_loaded[init])
        start = _Count()
        from . import plugin_ops  # ops the plugin registers with ops.h, from TF_InitKernel
        from . import c_api  # noqa: F401  (answers TF_GetAllOpList and the like from now on)

        ops_start = plugin_ops.count()
        _Begin(path.encode("utf-8", "surrogateescape"))
        try:
            TF_InitKernel_fn(init)()
        finally:
            _End()
        ops_made = plugin_ops.count() - ops_start
        refused += [Refusal(path, "op", safe_text(name), safe_text(name), "",
                            safe_text(reason))
                    for name, reason in plugin_ops.adopt(path, ops_start)]
        # Decided from the registrations' keys: the KernelRegistration objects of the whole
        # registry are made when kernels are first looked up (`_refresh`), not at start-up;
        # only a refused one is made here, for its reason.
        end = _Count()
        keys = _keys(start, end)
        source = path.encode("utf-8", "surrogateescape")
        accepted, mine = [], 0
        for i, k in zip(range(start, end), range(0, 5 * (end - start), 5)):
            device_type, plugin, code = keys[k + 1], keys[k + 2], int(keys[k + 3])
            if plugin != source:
                continue
            mine += 1
            if code == TF_Code.TF_OK and (every_type or _text(device_type) in known):
                accepted.append(i)
                continue
            r = KernelRegistration(i, keys[k:k + 5])
            if r.error_code != TF_Code.TF_OK:
                reason = (f"TF_RegisterKernelBuilder failed with {_code_name(r.error_code)}: "
                          f"{r.error_message}")
            else:  # a device type no loaded plugin provides
                r._set_enabled(False)
                reason = (f"no loaded plugin provides device type {r.device_type!r} (loaded "
                          f"device types: {', '.join(sorted(known))}); register kernels for "
                          f"the plugin's own device type ({own}), or load the plugin that "
                          f"provides {r.device_type!r} first")
            refused.append(Refusal(path, "kernel", r.kernel_name, r.op, r.device_type,
                                   reason))
        if own is None:
            kernel_libraries = kernel_libraries | {path}
        _stale()  # the mirror and its index follow at the next lookup (`_refresh`)
        _loaded[init] = accepted
        _refused.extend(refused)
    if refused:  # after every decision: the warning may be raised as an error
        warn(_summary(path, refused, mine, ops_made), PluginLoadWarning)
    return list(accepted)


class Refusal(namedtuple("Refusal", "plugin what name op device_type reason")):
    """A kernel (``what`` "kernel") or an op (``what`` "op") a plugin registered in its
    ``TF_InitKernel`` that the host does not use, and why (``reason``)."""

    __slots__ = ()

    def __str__(self) -> str:
        if self.what == "op":
            return f"op {self.op!r}: {self.reason}"
        return (f"kernel {self.name!r} for op {self.op!r} on device type "
                f"{self.device_type!r}: {self.reason}")


_refused: List[Refusal] = []
_SHOWN = 3  # refusals a load's warning spells out; `refusals` has them all


def refusals(plugin: Optional[str] = None) -> List[Refusal]:
    """Every kernel and op the host refused when plugins registered them (those of the
    plugin at path ``plugin`` when given), in registration order."""
    with _registry_lock:
        return [r for r in _refused if plugin is None or r.plugin == plugin]


def _summary(plugin: str, refused: List[Refusal], kernels: int, ops: int) -> str:
    """The one warning of a plugin's kernel registration: counts and the first refusals."""
    parts = []
    for what, total in (("kernel", kernels), ("op", ops)):
        mine = [r for r in refused if r.what == what]
        if not mine:
            continue
        shown = "; ".join(str(r) for r in mine[:_SHOWN])
        more = f"; and {len(mine) - _SHOWN} more" if len(mine) > _SHOWN else ""
        parts.append(f"{len(mine)} of its {total} {what}s {'are' if len(mine) > 1 else 'is'} "
                     f"ignored ({shown}{more})")
    return (f"pluggable: plugin {plugin}: TF_InitKernel: {'; '.join(parts)}. "
            f"pluggable.config.list_refused({plugin!r}) lists every one with its reason "
            f"(also `python -m pluggable doctor {plugin}`)")


def _code_name(code: int) -> str:
    try:
        return TF_Code(code).name
    except ValueError:
        return f"code {code}"


# -- kernel instances -----------------------------------------------------------------------
_pending_deletes: List[int] = []
_pending_lock = threading.Lock()


def _queue_delete(handle: int) -> None:
    """A finalizer's release: the plugin's delete_func runs at the next safe point."""
    with _pending_lock:
        _pending_deletes.append(handle)


def flush_releases() -> None:
    """Runs the delete_func of every kernel instance that was dropped without close()."""
    if not _pending_deletes:
        return
    with _pending_lock:
        pending = _pending_deletes[:]
        del _pending_deletes[:]
    for handle in pending:
        _Delete(handle)


# The per-op path in C reads `generation` (plans made before a change are stale) and runs
# the queued deletes at its safe points, as the Python path does.
_native.compiled.bind_kernels(sys.modules[__name__], _pending_deletes, flush_releases)


_live_kernels: "weakref.WeakSet[Kernel]" = weakref.WeakSet()


def close_all() -> None:
    """Closes every kernel instance (their ``delete_func`` runs now). Call it before closing
    the devices they ran on: a kernel may keep device tensors, which its ``delete_func``
    gives back to the device's allocator."""
    for kernel in list(_live_kernels):
        kernel.close()
    flush_releases()


class _Scratch(threading.local):
    """Per-thread buffers of `Kernel.run`: ``state`` is ``(out array, its address, its
    length in words, TF_Status address)``.

    Sharing them between the runs of one thread is safe even when a kernel's compute makes
    the host run another kernel on the same thread (a host callback that runs inline): the
    inner run writes and reads them completely before the outer run's C code writes its
    outputs and status, which happens after compute returns. The request is not shared: the
    kernel reads its input shapes from it during compute."""

    def __init__(self):
        self.status = _native.Status()
        self.grow(8)

    def grow(self, outputs: int):
        out = _array("q", bytes(8 * max(outputs, 8) * _OUT_RECORD_WORDS))
        self.state = (out, *out.buffer_info(), self.status.address)
        return self.state


_OUT_RECORD_WORDS = _OUT_HEADER_WORDS + _MAX_OUTPUT_DIMS
_scratch = _Scratch()
_new_output = tuple.__new__
_unpack_head = _struct.Struct(f"{_OUT_HEADER_WORDS}q").unpack_from  # PG_OUT_ADDRESS ... NUM_DIMS
_DIMS = [_struct.Struct(f"{n}q") for n in range(9)]


class Kernel:
    """An instance of a registered kernel for one node: what the plugin's ``create_func``
    returned. Made by `KernelRegistration.instantiate`; `run` executes it; `close` (or a
    ``with`` block, or dropping it) calls the plugin's ``delete_func``.

    Several threads may run one kernel at once, as TensorFlow allows. A kernel that keeps
    device tensors between runs must be closed before the device's allocator.
    """

    __slots__ = ("registration", "node_name", "_handle", "_finalizer", "__weakref__")

    def __init__(self, registration: KernelRegistration, node_name: str, handle: int):
        self.registration = registration
        self.node_name = node_name
        self._handle = handle
        self._finalizer = finalizer(self, _queue_delete, handle)

    @property
    def is_closed(self) -> bool:
        return self._handle is None

    def close(self) -> None:
        """Calls the plugin's delete_func now; idempotent."""
        if self._handle is None:
            return
        handle, self._handle = self._handle, None
        _native.compiled.invalidate()  # plans of this instance are stale (before it is freed)
        self._finalizer.detach()
        _Delete(handle)
        flush_releases()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        r = self.registration
        state = " closed" if self._handle is None else ""
        return f"<Kernel {r.kernel_name!r} for {r.op} node={self.node_name!r}{state}>"

    def run(self, executor: Optional["StreamExecutor"], stream: Optional["Stream"],
            inputs: Sequence[KernelInput], output_dtypes: Sequence[int], step_id: int = 0,
            output_host_memory: Optional[Sequence[bool]] = None) -> List[KernelOutput]:
        """Runs the kernel once on ``executor``'s device: the plugin's ``compute_func`` reads
        ``inputs`` and enqueues its work on ``stream`` (what ``TF_GetStream`` returns).
        Device outputs and temporaries come from ``executor.allocator``; an output listed
        in ``output_host_memory`` (a flag per output) is in host memory.

        With ``executor`` None the kernel (one registered for "CPU") runs on the CPU, as
        TensorFlow runs it: inputs, outputs and temporaries are host memory, the work is done
        when the call returns, and ``TF_GetStream`` fails. Owned outputs are then freed with
        `free_host_output` (or wrapped by `host_output_array`).

        Inputs must stay valid until the work on ``stream`` is done. Outputs are ready once
        that work is. Raises the `pluggable.errors` class of the kernel's status, with every
        output of the call freed.
        """
        handle = self._handle
        if handle is None:
            raise FailedPreconditionError(
                f"kernel {self.registration.kernel_name} for node {self.node_name!r} is "
                f"closed", call="Kernel.run")
        if _pending_deletes:
            flush_releases()
        n_out = len(output_dtypes)
        # `out` stays referenced here even if a nested run on this thread grows the scratch.
        out, out_address, out_words, status = _scratch.state
        if out_words < n_out * _OUT_RECORD_WORDS:
            out, out_address, out_words, status = _scratch.grow(n_out)
        if executor is None:  # the CPU: no device, every argument in host memory
            words = [handle, 0, 0, 0, 0, 0, step_id & _MASK64, len(inputs), n_out,
                     out_address, out_words, status, _compiled.launch()]
            output_host_memory = (True,) * n_out
        else:
            allocator = executor._allocator
            if allocator is None or allocator._handle is None:
                executor._check_open()
                allocator = executor.allocator
            words = _request_header(handle, executor, stream, allocator, step_id & _MASK64,
                                    len(inputs), n_out, out_address, out_words, status,
                                    _compiled.launch())
        words += _output_words(output_dtypes, output_host_memory)
        for address, nbytes, dtype, shape, host in inputs:
            words += (address, nbytes, dtype, 1 if host else 0, len(shape))
            words += shape
        try:
            request = _array("Q", words)
        except (TypeError, OverflowError):
            request = self._slow_request(words)
        code = _Run(request.buffer_info()[0])
        if code:
            message = _native.TF_Message(status)
            raise self._error(executor, code, message.decode("utf-8", "replace") if message
                              else "")
        if n_out == 1:  # the common case, without the loop
            address, nbytes, dtype, flags, alias, ndims = _unpack_head(out, 0)
            if address < 0:
                address &= _MASK64
            shape = (_DIMS[ndims] if ndims < 9 else _struct.Struct(f"{ndims}q")).unpack_from(
                out, _OUT_HEAD_BYTES)
            return [_new_output(KernelOutput, (address, nbytes, dtype, shape, flags & 1 == 1,
                                               alias, flags & 2 == 2))]
        results = []
        at = 0
        for _ in range(n_out):
            address, nbytes, dtype, flags, alias, ndims = _unpack_head(out, at)
            if address < 0:
                address &= _MASK64
            at += _OUT_HEAD_BYTES
            shape = (_DIMS[ndims] if ndims < 9 else _struct.Struct(f"{ndims}q")).unpack_from(
                out, at)
            at += 8 * ndims
            results.append(_new_output(KernelOutput, (address, nbytes, dtype, shape,
                                                      flags & 1 == 1, alias, flags & 2 == 2)))
        return results

    def prepare(self, executor: "StreamExecutor", stream: "Stream",
                inputs: Sequence[KernelInput], output_dtypes: Sequence[int],
                fixed_host_inputs: bool = False,
                output_host_memory: Optional[Sequence[bool]] = None) -> "PreparedRun":
        """A run of this kernel with everything but the input addresses fixed: the op
        library's fast path for an op it has run before with the same shapes and types.
        Inputs and outputs are device memory, except outputs flagged in
        ``output_host_memory`` (as in `run`); ``inputs`` give the shapes (their addresses
        are ignored). With ``fixed_host_inputs``, host-memory inputs are constants: their
        addresses are part of the run (the caller keeps that memory unchanged and alive as
        long as the run), and only device inputs take addresses at each run."""
        if self._handle is None:
            raise FailedPreconditionError(
                f"kernel {self.registration.kernel_name} for node {self.node_name!r} is "
                f"closed", call="Kernel.prepare")
        if executor.is_closed:
            executor._check_open()  # closed, or its plugin found stuck: say which
        # The output records and the status are the runner's own (pluggable._compiled.Plan's).
        words = _request_header(self._handle, executor, stream, executor.allocator, 0,
                                len(inputs), len(output_dtypes), 0, 0, 0)
        words += _output_words(output_dtypes, output_host_memory)
        slots = []
        for address, nbytes, dtype, shape, host in inputs:
            if host and fixed_host_inputs:
                words += (address, nbytes, dtype, 1, len(shape), *shape)
                continue
            if host:
                raise InvalidArgumentError("Kernel.prepare: host-memory inputs change between "
                                           "runs; use Kernel.run", call="Kernel.prepare")
            slots.append(len(words))
            words += (0, nbytes, dtype, 0, len(shape), *shape)
        try:
            request = _array("Q", words)
        except (TypeError, OverflowError):
            request = self._slow_request(words)
        return PreparedRun(self, executor, request, tuple(slots), len(output_dtypes))

    @staticmethod
    def _slow_request(words):
        """The request when some value is not a plain int (a DType, a NumPy integer, ...)."""
        fixed = []
        for value in words:
            if _is_type(value):
                value = _type_code(value)
            try:
                fixed.append(int(value) & _MASK64)
            except (TypeError, ValueError):
                raise TypeError(
                    f"Kernel.run: {value!r} is not an integer; inputs are KernelInput(address, "
                    f"nbytes, dtype code, shape, host_memory) and output_dtypes TF_DataType "
                    f"codes") from None
        return _array("Q", fixed)

    def _error(self, executor: Optional["StreamExecutor"], code: int, message: str):
        r = self.registration
        if code in _ABANDONING_CODES:
            # A compute the watchdog or Ctrl-C abandoned: the whole plugin is unusable now.
            reason = _stuck_in_runtime(r.plugin)
            if reason:
                limits.mark_plugin_stuck(r.plugin, reason)
        if executor is None:
            return error_for_code(code)(
                f"{r.plugin}, CPU: kernel {r.kernel_name} for {r.op} failed: "
                f"{message or '(the kernel gave no message)'}",
                plugin=r.plugin, call=f"kernel {r.kernel_name}", plugin_message=message)
        label = executor.platform.label
        message = safe_text(message)  # the fast path hands over the plugin's raw text
        return error_for_code(code)(
            f"{label}, device {executor.ordinal}: kernel {r.kernel_name} for {r.op} failed: "
            f"{message or '(the kernel gave no message)'}",
            plugin=label, call=f"kernel {r.kernel_name}", plugin_message=message)


def _output_words(output_dtypes: Sequence[int],
                  output_host_memory: Optional[Sequence[bool]]) -> list:
    """The output words of a kernel request: each output's TF_DataType, flagged
    PG_RUN_OUTPUT_HOST_MEMORY when the output is to be in host memory."""
    if not output_host_memory:
        return list(output_dtypes)
    return [int(d) | (_RUN_OUTPUT_HOST_MEMORY if h else 0)
            for d, h in zip(output_dtypes, output_host_memory)] + \
        list(output_dtypes[len(output_host_memory):])


def _request_header(handle: int, executor: "StreamExecutor", stream: "Stream", allocator,
                    step_id: int, n_in: int, n_out: int, out_address: int, out_words: int,
                    status: int, correlation_id: int = 0) -> list:
    """The PG_RUN_* header of a pluggable_KernelRun request, in the order the runtime reads
    it: the one place a request's header is built (`Kernel.run`, `Kernel.prepare`)."""
    return [handle, _addressof(executor._device), _addressof(executor._se),
            stream._handle or 0, allocator._handle, executor.ordinal, step_id, n_in, n_out,
            out_address, out_words, status, correlation_id]


# The header above is in the runtime's PG_RUN_* order; a runtime built with another order is a
# broken installation, said at import rather than as kernels reading the wrong words.
if (_compiled.PG_RUN_KERNEL, _compiled.PG_RUN_STEP_ID, _compiled.PG_RUN_OUT,
        _compiled.PG_RUN_OUT_CAPACITY, _compiled.PG_RUN_STATUS,
        _compiled.PG_RUN_CORRELATION_ID, _compiled.PG_RUN_HEADER_WORDS) != (
            0, 6, 9, 10, 11, 12, 13):
    raise ImportError("pluggable's runtime library and its kernels.registry disagree on the "
                      "kernel request's layout (PG_RUN_*): reinstall pluggable")


class PreparedRun:
    """`Kernel.prepare`'s result: a kernel request with everything but the device inputs'
    addresses filled in, which dispatch's plans (`pluggable._compiled.Plan`) copy and run from C.
    The kernel and executor stay referenced for as long as the plan lives."""

    __slots__ = ("kernel", "executor", "template", "slots", "n_out")

    def __init__(self, kernel: Kernel, executor: "StreamExecutor", template, slots, n_out):
        self.kernel = kernel
        self.executor = executor
        self.template = template  # the request (pluggable._compiled.Plan copies it)
        self.slots = slots        # the words that take the input addresses
        self.n_out = n_out
