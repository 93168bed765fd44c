"""The checks the host applies to every struct a plugin fills.

These are the rules of include/ABI.md in one place:
- ``struct_size`` 0, or smaller than the first published version of the struct: rejected,
  naming the struct, the expected and the received size;
- smaller than the host's: accepted, and the fields past it are absent (the host reads a copy
  in which they are zero, so an absent callback reads as NULL);
- larger than the host's: accepted (a newer plugin), the extra bytes ignored;
- a required callback that is NULL: rejected, naming the callback;
- names: non-NULL, NUL-terminated, a capital letter followed by capitals and underscores.

Structs the host hands to a plugin to fill are allocated with spare zeroed bytes behind them,
so that a plugin built against a newer, longer layout writes into memory the host owns.
"""
from __future__ import annotations

import ctypes

from ..abi._struct import ABIStruct
from ..base.limits import MAX_STRUCT_SIZE, safe_text

TYPE_CHECKING = False  # typing's constant, without importing typing at start-up
if TYPE_CHECKING:
    from typing import Iterable, Type, TypeVar

    S = TypeVar("S", bound=ABIStruct)

# Room behind every plugin-filled struct for fields of layouts newer than the host's.
_SLACK_BYTES = 512
_MAX_NAME_BYTES = 256
# Names: a capital letter, then capitals and underscores (checked without `re`, which
# start-up does not otherwise need).
_CAPITALS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_NAME_CHARACTERS = _CAPITALS | {"_"}

_libc = ctypes.CDLL(None)
_strnlen = _libc.strnlen
_strnlen.restype = ctypes.c_size_t
_strnlen.argtypes = (ctypes.c_void_p, ctypes.c_size_t)


class ValidationError(Exception):
    """A plugin broke a rule of the ABI; the message says which and how to fix it."""


def alloc_struct(cls: Type[S]) -> S:
    """A zeroed ``cls`` with ``struct_size`` set to the host's size, followed by spare bytes."""
    storage = (ctypes.c_char * (ctypes.sizeof(cls) + _SLACK_BYTES))()
    obj = cls.from_buffer(storage)  # keeps `storage` alive
    obj.struct_size = cls.struct_size()
    return obj


def negotiate(cls: Type[S], filled: S, where: str) -> S:
    """Checks the ``struct_size`` a plugin wrote into ``filled`` and returns the host's view of
    it: a copy holding the fields the plugin's version has, the rest zero.

    ``where`` says which call filled it, for the error message.
    """
    received = int(filled.struct_size)
    ours = cls.struct_size()
    minimum = cls.min_struct_size()
    name = cls.__name__
    macro = cls._size_macro_ or f"sizeof({name})"
    if received == 0:
        raise ValidationError(
            f"{where} left {name}.struct_size at 0; the plugin must set it to {macro} "
            f"({ours} bytes with these headers)")
    if received > MAX_STRUCT_SIZE:
        raise ValidationError(
            f"{where} set {name}.struct_size to {received}, past the bound of {MAX_STRUCT_SIZE} "
            f"bytes no version of {name} comes near ({ours} bytes with these headers); the "
            f"plugin must set it to {macro}")
    if received < minimum:
        raise ValidationError(
            f"{where} set {name}.struct_size to {received}, smaller than the first published "
            f"version of {name} ({minimum} bytes; this host's is {ours}); rebuild the plugin "
            f"against pluggable's headers (pluggable.get_include()) or TensorFlow's")
    view = cls()
    ctypes.memmove(ctypes.addressof(view), ctypes.addressof(filled), min(received, ours))
    view.struct_size = received
    return view


def require_callbacks(cls: Type[S], view: S, names: Iterable[str], where: str) -> None:
    """Raises naming the first required callback of ``view`` that is NULL or absent."""
    received = int(view.struct_size)
    for field in names:
        if not cls.field_present(field, received):
            raise ValidationError(
                f"{where}: {cls.__name__}.{field} is required but the plugin's struct_size "
                f"({received}) ends before it")
        if not getattr(view, field):
            raise ValidationError(
                f"{where}: {cls.__name__}.{field} is required but the plugin left it NULL")


def optional_callback(cls: Type[S], view: S, field: str):
    """The callback ``field`` of ``view``, or None when it is NULL or absent."""
    if not cls.field_present(field, int(view.struct_size)):
        return None
    fn = getattr(view, field)
    return fn if fn else None


def read_c_string(address: int, what: str, *, required: bool = True) -> str:
    """Reads a NUL-terminated string a plugin handed over, refusing unterminated ones."""
    if not address:
        if required:
            raise ValidationError(f"{what} is NULL; the plugin must set it")
        return ""
    length = _strnlen(address, _MAX_NAME_BYTES)
    if length >= _MAX_NAME_BYTES:
        raise ValidationError(
            f"{what} is not NUL-terminated within {_MAX_NAME_BYTES} bytes")
    return safe_text(ctypes.string_at(address, length).decode("utf-8", "replace"))


def read_name(address: int, what: str) -> str:
    """Reads a platform name or device type and checks its spelling."""
    name = read_c_string(address, what)
    if name[:1] not in _CAPITALS or not _NAME_CHARACTERS.issuperset(name):
        raise ValidationError(
            f"{what} is {name!r}; it must start with a capital letter and contain only "
            f"capital letters and underscores (for example 'MY_DEVICE')")
    return name
