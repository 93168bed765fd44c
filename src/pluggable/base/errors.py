"""The exceptions and warnings of pluggable.

A plugin reports failure through a ``TF_Status``; a status that is not OK becomes an instance
of the class below that matches its ``TF_Code``. Every class derives from `PluggableError`, and
each also derives from the builtin a Python user would reach for first (`InvalidArgumentError`
is a `ValueError`, `ResourceExhaustedError` a `MemoryError`, ...), as ``tf.errors`` names them.

Loading is a separate story from calling: a plugin that cannot be loaded raises
`PluginLoadError` when the user asked for it, and is otherwise skipped with a
`PluginLoadWarning`. Failures where nothing can be raised (a finalizer, a callback that runs on
a plugin's thread) become a `PluggableWarning`, which the test-suite turns into an error.
"""
from __future__ import annotations

from ..abi.tf_status import TF_Code

TYPE_CHECKING = False  # typing's constant, without importing typing at start-up
if TYPE_CHECKING:
    from typing import Dict, Optional, Type

__all__ = [
    "PluggableError", "CancelledError", "UnknownError", "InvalidArgumentError",
    "DeadlineExceededError", "NotFoundError", "AlreadyExistsError", "PermissionDeniedError",
    "UnauthenticatedError", "ResourceExhaustedError", "FailedPreconditionError",
    "AbortedError", "OutOfRangeError", "UnimplementedError", "InternalError",
    "UnavailableError", "DataLossError", "PluginLoadError", "PluggableWarning",
    "PluginLoadWarning", "CallbackWarning", "PlacementWarning", "DLPackError",
    "error_for_code", "warn",
]


class PluggableError(Exception):
    """Base class of every error pluggable raises for a failed plugin call or load.

    ``code`` is the `TF_Code` of the status (``TF_Code.TF_UNKNOWN`` where there was none),
    ``plugin`` names the plugin, ``call`` the C function or step that failed, and
    ``plugin_message`` is the plugin's own text.
    """

    code = TF_Code.TF_UNKNOWN

    def __init__(self, message: str, *, plugin: Optional[str] = None,
                 call: Optional[str] = None, plugin_message: Optional[str] = None):
        super().__init__(message)
        self.plugin = plugin
        self.call = call
        self.plugin_message = plugin_message


class CancelledError(PluggableError):
    code = TF_Code.TF_CANCELLED


class UnknownError(PluggableError, RuntimeError):
    code = TF_Code.TF_UNKNOWN


class InvalidArgumentError(PluggableError, ValueError):
    code = TF_Code.TF_INVALID_ARGUMENT


class DeadlineExceededError(PluggableError, TimeoutError):
    code = TF_Code.TF_DEADLINE_EXCEEDED


class NotFoundError(PluggableError, LookupError):
    code = TF_Code.TF_NOT_FOUND


class AlreadyExistsError(PluggableError, FileExistsError):
    code = TF_Code.TF_ALREADY_EXISTS


class PermissionDeniedError(PluggableError, PermissionError):
    code = TF_Code.TF_PERMISSION_DENIED


class UnauthenticatedError(PluggableError, PermissionError):
    code = TF_Code.TF_UNAUTHENTICATED


class ResourceExhaustedError(PluggableError, MemoryError):
    code = TF_Code.TF_RESOURCE_EXHAUSTED


class FailedPreconditionError(PluggableError, RuntimeError):
    code = TF_Code.TF_FAILED_PRECONDITION


class AbortedError(PluggableError, RuntimeError):
    code = TF_Code.TF_ABORTED


class OutOfRangeError(PluggableError, IndexError):
    code = TF_Code.TF_OUT_OF_RANGE


class UnimplementedError(PluggableError, NotImplementedError):
    code = TF_Code.TF_UNIMPLEMENTED


class InternalError(PluggableError, RuntimeError):
    code = TF_Code.TF_INTERNAL


class UnavailableError(PluggableError, RuntimeError):
    code = TF_Code.TF_UNAVAILABLE


class DataLossError(PluggableError, RuntimeError):
    code = TF_Code.TF_DATA_LOSS


class PluginLoadError(PluggableError, ImportError):
    """A plugin could not be loaded. ``path`` is the file and ``step`` the step that failed
    (dlopen, symbol lookup, init, validation, device creation)."""

    def __init__(self, message: str, *, path: str = "", step: str = "", reason: str = ""):
        PluggableError.__init__(self, message, plugin=path, call=step, plugin_message=reason)
        self.path = path
        self.step = step
        self.reason = reason


class DLPackError(InvalidArgumentError, BufferError):
    """A DLPack exchange that cannot be done as asked: a bad or consumed capsule, a dtype or
    device without a counterpart, a copy that ``copy=False`` forbids. Also a `BufferError`,
    which the Python array API standard names for these cases."""


class PluggableWarning(UserWarning):
    """Something went wrong where nothing could be raised."""


class PluginLoadWarning(PluggableWarning):
    """A discovered plugin was skipped; the message says which file, at what step and why."""


class CallbackWarning(PluggableWarning):
    """A Python callback run by a plugin (or by the host on a plugin's behalf) raised."""


class PlacementWarning(PluggableWarning):
    """An op ran on the CPU instead of the device asked for (soft placement): the device has
    no kernel for it, or no plugin provides the device type a scope names."""


def _internal(filename: str) -> bool:
    """Whether a frame of ``filename`` is pluggable's own (or the machinery between it and
    its caller: ``with`` blocks, imports), not the user's."""
    import os

    path = os.path.abspath(filename) if not filename.startswith("<") else filename
    return path.startswith(_PACKAGE) or path == _CONTEXTLIB or \
        filename.startswith("<frozen importlib")


def warn(message: str, category: type) -> None:
    """``warnings.warn`` attributed to the line that called into pluggable: the first frame
    outside the package, however deep inside it the warning arises (stacklevel counted here,
    since the depth differs from path to path)."""
    import sys
    import warnings

    frame, level = sys._getframe(1), 2
    while frame is not None and _internal(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level if frame is not None else 2)


def _paths():
    import contextlib
    import os

    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    return package, os.path.abspath(contextlib.__file__)


_PACKAGE, _CONTEXTLIB = _paths()


_BY_CODE: Dict[int, Type[PluggableError]] = {
    cls.code: cls for cls in (
        CancelledError, UnknownError, InvalidArgumentError, DeadlineExceededError,
        NotFoundError, AlreadyExistsError, PermissionDeniedError, UnauthenticatedError,
        ResourceExhaustedError, FailedPreconditionError, AbortedError, OutOfRangeError,
        UnimplementedError, InternalError, UnavailableError, DataLossError)
}


def error_for_code(code: int) -> Type[PluggableError]:
    """The exception class of a non-OK ``TF_Code`` (`UnknownError` for a code TensorFlow
    does not define)."""
    return _BY_CODE.get(int(code), UnknownError)


# The classes are defined on the lowest floor, which every other floor imports, and are the
# public `pluggable.errors`: tracebacks and reprs name them there.
for _name in __all__:
    _obj = globals()[_name]
    if isinstance(_obj, type):
        _obj.__module__ = "pluggable.errors"
del _name, _obj
