"""The host runtime library: loading it, and the few of its functions Python calls.

`libpluggable_runtime.so` exports TensorFlow's C API functions that plugins call (the
``TF_Status`` API, later the kernel API). It is loaded once, with ``RTLD_GLOBAL``, before any
plugin, so that a plugin's undefined ``TF_*`` symbols resolve against it when the plugin is
loaded; plugins never link against it by name.

Every foreign function Python calls is declared once, in `_PROTOTYPES`, with its C prototype
beside it.
"""
from __future__ import annotations

import ctypes
import os
import sys
import threading

from ..abi.tf_status import TF_Code
from .errors import InternalError
from . import limits as _limits
from .limits import MAX_MESSAGE_CHARS, safe_text

# The libraries are built into the package's top folder (setup.py).
_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNTIME_LIBRARY_NAME = "libpluggable_runtime.so"

_c_status_p = ctypes.c_void_p

# name: (restype, argtypes)
_PROTOTYPES = {
    "TF_NewStatus": (_c_status_p, ()),                                   # TF_Status* (void)
    "TF_DeleteStatus": (None, (_c_status_p,)),                           # void (TF_Status*)
    "TF_SetStatus": (None, (_c_status_p, ctypes.c_int, ctypes.c_char_p)),  # (s, code, msg)
    "TF_GetCode": (ctypes.c_int, (_c_status_p,)),                        # TF_Code (const s*)
    "TF_Message": (ctypes.c_char_p, (_c_status_p,)),                     # const char* (s*)
    "pluggable_ResetStatus": (None, (_c_status_p,)),                     # void (TF_Status*)
    "pluggable_SealStatus": (None, (_c_status_p,)),                      # void (TF_Status*)
    "pluggable_LendStatus": (_c_status_p, (_c_status_p,)),               # ticket (TF_Status*)
    "pluggable_LateStatusWrites": (ctypes.c_ulonglong, (ctypes.c_void_p, ctypes.c_char_p,
                                                        ctypes.c_size_t)),
    #   unsigned long long (int* code, char* message, size_t n)
}


class RuntimeLibraryError(ImportError):
    """The host runtime library is missing or cannot be loaded: pluggable is not built."""


def _load_runtime() -> ctypes.CDLL:
    path = os.path.join(_HERE, RUNTIME_LIBRARY_NAME)
    if not os.path.exists(path):
        raise RuntimeLibraryError(
            f"pluggable's runtime library {path} does not exist: the package was not built. "
            "Install it with `pip install .` (or `pip install -e .` for development) from the "
            "source tree.")
    try:
        lib = ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_GLOBAL)
    except OSError as exc:
        raise RuntimeLibraryError(
            f"cannot load pluggable's runtime library {path}: {exc}. Reinstall pluggable "
            "with `pip install --force-reinstall .`.") from exc
    bind(lib, _PROTOTYPES)
    return lib


def bind(library: ctypes.CDLL, prototypes) -> dict:
    """Sets the prototypes of ``library``'s functions, ``{name: (restype, argtypes)}``, and
    returns them by name: the one place where foreign functions get their types."""
    fns = {}
    for name, (restype, argtypes) in prototypes.items():
        fn = getattr(library, name)
        fn.restype = restype
        fn.argtypes = argtypes
        fns[name] = fn
    return fns


TENSORFLOW_IN_THE_PROCESS = (
    "pluggable and TensorFlow cannot share a process: both export TensorFlow's C API (TF_*) "
    "to the dynamic loader, so TensorFlow's own libraries would call pluggable's runtime (or "
    "a plugin TensorFlow's) and the process would crash. Run TensorFlow in another process "
    "(subprocess, multiprocessing with the 'spawn' start method); a plugin moves between the "
    "two unchanged.")


class TensorFlowInTheProcessError(ImportError):
    """TensorFlow and pluggable imported into one process (see TENSORFLOW_IN_THE_PROCESS)."""


class _RefuseTensorFlow:
    """A finder at the head of sys.meta_path while pluggable is loaded: ``import tensorflow``
    raises `TensorFlowInTheProcessError` instead of loading libraries that would crash the
    process. Finding without importing (``importlib.util.find_spec``) still answers truly, and
    code that treats TensorFlow as optional (``except ImportError``) goes on without it."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name != "tensorflow":
            return None
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None:
            return None  # not installed: the usual ModuleNotFoundError
        spec.loader = _RefuseTensorFlow
        return spec

    @staticmethod
    def create_module(spec):
        raise TensorFlowInTheProcessError(f"import tensorflow after pluggable: "
                                          f"{TENSORFLOW_IN_THE_PROCESS}")

    @staticmethod
    def exec_module(module):  # never reached: create_module raised
        raise TensorFlowInTheProcessError(TENSORFLOW_IN_THE_PROCESS)


if "tensorflow" in sys.modules:
    raise TensorFlowInTheProcessError(f"import pluggable after tensorflow: "
                                      f"{TENSORFLOW_IN_THE_PROCESS}")
lib = _load_runtime()
RUNTIME_LIBRARY_PATH = lib._name
sys.meta_path.insert(0, _RefuseTensorFlow)


def _load_compiled():
    """`pluggable._compiled`, the extension module of the per-op path, given the runtime's
    functions it calls."""
    try:
        from .. import _compiled
    except ImportError as exc:
        raise RuntimeLibraryError(
            f"pluggable's extension module pluggable._compiled cannot be imported ({exc}): the "
            "package was not built completely. Install it with `pip install .` (or "
            "`pip install -e .`) from the source tree.") from exc
    _compiled.bind_runtime({name: ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
                            for name in ("pluggable_KernelRun", "TF_NewStatus",
                                         "TF_DeleteStatus", "TF_Message",
                                         "pluggable_BFCDeallocate", "pluggable_BFCAllocate",
                                         "TF_GetCode", "pluggable_ResetStatus",
                                         "pluggable_ClaimDeviceMemory",
                                         "pluggable_ReleaseDeviceMemory")})
    _compiled.bind_errors(InternalError)
    return _compiled


compiled = _load_compiled()


def _tell_runtime_the_deadline(seconds: float) -> None:
    """The runtime's watchdog (_runtime/watchdog.c) bounds a kernel's compute by the deadline
    too; it learns the deadline here, at import and whenever it changes."""
    lib.pluggable_SetCallDeadline(ctypes.c_double(seconds),
                                  threading.current_thread() is threading.main_thread())


lib.pluggable_SetCallDeadline.restype = None
lib.pluggable_SetCallDeadline.argtypes = (ctypes.c_double, ctypes.c_int)
_limits.on_deadline_change(_tell_runtime_the_deadline)

TF_NewStatus = lib.TF_NewStatus
TF_DeleteStatus = lib.TF_DeleteStatus
TF_SetStatus = lib.TF_SetStatus
TF_GetCode = lib.TF_GetCode
TF_Message = lib.TF_Message
pluggable_ResetStatus = lib.pluggable_ResetStatus
pluggable_SealStatus = lib.pluggable_SealStatus
pluggable_LendStatus = lib.pluggable_LendStatus


class Status:
    """An owned ``TF_Status`` handed to plugin calls. ``address`` is the ``TF_Status*`` to
    pass: the status itself (``real``), or, for one from `acquire_status`, the ticket of its
    current lending (_runtime/status.c), which names nothing once `release_status` ends it."""

    __slots__ = ("address", "real", "__weakref__")

    def __init__(self):
        address = TF_NewStatus()
        if not address:
            raise MemoryError("TF_NewStatus returned NULL: the host is out of memory")
        self.address = self.real = address

    @property
    def code(self) -> int:
        return TF_GetCode(self.address)

    @property
    def ok(self) -> bool:
        return TF_GetCode(self.address) == TF_Code.TF_OK

    @property
    def message(self) -> str:
        raw = TF_Message(self.address)
        if not raw:
            return ""
        # Plugin text: bounded, control characters escaped, before anyone prints it.
        return safe_text(raw[:4 * MAX_MESSAGE_CHARS].decode("utf-8", "replace"),
                         total=len(raw))

    def set(self, code: int, message: str = "") -> None:
        TF_SetStatus(self.address, int(code), message.encode("utf-8", "replace"))

    def reset(self) -> None:
        pluggable_ResetStatus(self.address)

    def __del__(self):  # Status is a leaf with no plugin behind it: freeing is always safe.
        real, self.real = self.real, None
        self.address = None
        if real:
            TF_DeleteStatus(real)


_local = threading.local()


def acquire_status() -> Status:
    """An OK status for one plugin call, from the calling thread's pool, lent under a ticket
    of its own (``status.address``).

    A pool rather than one status per thread: a plugin may run a Python callback in the middle
    of a call, and a plugin call made by that callback must not overwrite the outer one's
    status. Give it back with `release_status`: the lending ends there, so a plugin that
    writes the TF_Status* of a call after the call returned writes through a ticket that
    names nothing (the write is refused and reported, `late_status_writes`), however many
    calls later, and never into the call that has the status then.
    """
    pool = getattr(_local, "pool", None)
    if pool is None:
        pool = _local.pool = []
    status = pool.pop() if pool else Status()
    status.address = pluggable_LendStatus(status.real)
    return status


def release_status(status: Status) -> None:
    """Returns a status taken with `acquire_status`: its lending ends, it is reset to OK,
    sealed, and serves the next call at once."""
    pluggable_SealStatus(status.real)
    _local.pool.append(status)


_late_code = ctypes.c_int()
_late_message = ctypes.create_string_buffer(MAX_MESSAGE_CHARS)


def late_status_writes() -> "tuple":
    """``(count, code, message)`` of the writes refused because a plugin wrote a host
    status after the call it was given to had returned (the last write's code and text)."""
    count = lib.pluggable_LateStatusWrites(ctypes.byref(_late_code), _late_message,
                                           len(_late_message))
    return count, _late_code.value, safe_text(_late_message.value.decode("utf-8", "replace"))


def abandon_status(status: Status) -> None:
    """Gives up a status taken with `acquire_status` that a plugin call which was given up on
    (and may still return and write it) holds: it is never freed or reused, and its lending
    never ends."""
    status.real = status.address = None
