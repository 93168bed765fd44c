"""What TensorFlow's C API tells a plugin about ops and kernels, answered by the op library
and the kernel registry: TF_GetAllOpList (an OpList), TF_GetRegisteredKernelsForOp and
TF_GetAllRegisteredKernels (a KernelList: the CPU's own kernels, one per op at priority 0
for the types the op allows, and every enabled kernel plugins registered), TF_OpIsStateful.

The runtime library asks through one query function (``pluggable_SetHostQuery``,
src/pluggable/_runtime/c_api.c), installed when this module is imported (the kernel registry
imports it before any TF_InitKernel runs). It runs on whatever thread the plugin calls from;
a failure becomes the call's status, never an exception crossing into C.
"""
from __future__ import annotations

import ctypes

from ..abi.tf_status import TF_Code
from ..base import native as _native
from ..base.proto import integer, message, text

TYPE_CHECKING = False  # typing's constant, without importing typing while plugins load
if TYPE_CHECKING:
    from typing import Iterable, List, Optional
    from ..oplib.core import OpDef

# The op library (NumPy, dataclasses) is imported on the first question, not when a plugin's
# kernels load: discovery imports nothing it does not need.

_QUERY_OP_LIST, _QUERY_KERNELS_FOR_OP, _QUERY_ALL_KERNELS, _QUERY_OP_IS_STATEFUL = 1, 2, 3, 4

_HostQuery = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
_fns = _native.bind(_native.lib, {
    "pluggable_SetHostQuery": (None, (_HostQuery,)),
    "TF_NewBufferFromString": (ctypes.c_void_p, (ctypes.c_char_p, ctypes.c_size_t)),
})


def _kernel_def(op: str, device_type: str, constraints: Iterable, host_memory: Iterable[str],
                label: str, priority: int) -> bytes:
    """A KernelDef message; ``constraints`` are (attribute, allowed type codes) pairs."""
    from ..oplib.proto import attr_value

    out = text(1, op) + text(2, device_type)
    for name, codes in constraints:
        out += message(3, text(1, name) + message(2, attr_value("list(type)", sorted(codes))))
    out += b"".join(text(4, arg) for arg in sorted(host_memory))
    return out + text(5, label) + integer(6, priority)


def _builtin_kernel(op: OpDef) -> Optional[bytes]:
    """The CPU's own kernel of ``op`` (its NumPy reference), None for an op a plugin
    defined (pluggable has no code for it)."""
    from .plugin_ops import plugin_of

    if plugin_of(op) is not None:
        return None
    constraints = [(a.name, [int(t.tf_code) for t in a.allowed]) for a in op.attrs
                   if a.kind == "type" and a.allowed]
    return _kernel_def(op.name, "CPU", constraints, (), "", 0)


def kernel_list(op: Optional[str] = None) -> bytes:
    """A KernelList message of the kernels of ``op`` (every op when None)."""
    from ..oplib.core import OPS
    from .registry import registered_kernels

    ops: List[OpDef] = list(OPS.values()) if op is None else [OPS[op]] if op in OPS else []
    kernels = [k for k in map(_builtin_kernel, ops) if k is not None]
    for r in registered_kernels(op):
        kernels.append(_kernel_def(r.op, r.device_type, r.constraints.items(), r.host_memory,
                                   r.label, r.priority))
    return b"".join(message(1, k) for k in kernels)


def _answer(what: int, name: str) -> bytes:
    from ..oplib.core import OPS
    from ..oplib.proto import op_list

    if what == _QUERY_OP_LIST:
        return op_list(OPS.values())
    if what == _QUERY_ALL_KERNELS:
        return kernel_list()
    if name not in OPS:
        raise LookupError(f"Op type not registered '{name}' in pluggable's op library")
    if what == _QUERY_KERNELS_FOR_OP:
        return kernel_list(name)
    if what == _QUERY_OP_IS_STATEFUL:
        return bytes((1 if OPS[name].is_stateful else 0,))
    raise ValueError(f"unknown question {what}")


@_HostQuery
def _query(what: int, name: Optional[bytes], status: int) -> Optional[int]:
    try:
        data = _answer(what, (name or b"").decode("utf-8", "replace"))
    except LookupError as exc:
        _native.TF_SetStatus(status, TF_Code.TF_NOT_FOUND, str(exc).encode("utf-8"))
        return None
    except Exception as exc:  # nothing may cross into the plugin's C code
        _native.TF_SetStatus(status, TF_Code.TF_INTERNAL,
                             f"pluggable: {type(exc).__name__}: {exc}".encode("utf-8"))
        return None
    return _fns["TF_NewBufferFromString"](data, len(data))


_fns["pluggable_SetHostQuery"](_query)  # `_query` stays referenced by this module
