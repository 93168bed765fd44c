"""Shared machinery of the ctypes mirrors: struct sizes and "is this field present".

Every struct that crosses the plugin boundary starts with ``size_t struct_size``, and the C
macro ``X_STRUCT_SIZE`` is ``TF_OFFSET_OF_END(X, last_field)``: the offset just past the last
field, without trailing padding. A reader treats the fields that end past the other side's
``struct_size`` as absent. This module is the one place in Python that computes those
numbers; the mirrors only name the fields involved:

``_last_field_``
    the field the C ``*_STRUCT_SIZE`` macro names (the struct's last field);
``_first_version_last_field_``
    the last field of the struct's first published version, when later versions appended
    fields (only ``SP_StreamExecutor`` so far); defaults to ``_last_field_``;
``_size_macro_``
    the name of the C size macro, or None for structs without ``struct_size``;
``_optional_``
    the fields a plugin may leave NULL (tagged ``[Optional]`` in the header). Every other
    function-pointer field is a required callback.

This package imports nothing but ctypes, so it loads without the rest of ``pluggable``.
"""

from __future__ import annotations

import ctypes

TYPE_CHECKING = False  # typing's constant, without importing typing at start-up
if TYPE_CHECKING:
    from typing import ClassVar, Optional, TypeVar

    _S = TypeVar("_S", bound="ABIStruct")

# c_api_macros.h: #define TF_Bool unsigned char
TF_Bool = ctypes.c_ubyte


# The type of the field descriptors ctypes puts on Structure subclasses.
class _Probe(ctypes.Structure):
    _fields_ = [("x", ctypes.c_int)]


_CField = type(_Probe.x)
_CFuncPtr = ctypes.CFUNCTYPE(None).__mro__[1]  # ctypes._CFuncPtr, base of every CFUNCTYPE
del _Probe


class _StructSizeField:
    """Replaces the ``struct_size`` field descriptor of a mirror so that the same name serves
    both sides: ``SP_Device.struct_size()`` (on the class) is the classmethod giving the C
    ``*_STRUCT_SIZE``, while ``device.struct_size`` (on an instance) is the C field."""

    def __init__(self, cfield):
        self.cfield = cfield

    def __get__(self, instance, owner):
        if instance is None:
            return owner._struct_size_of_class
        return self.cfield.__get__(instance, owner)

    def __set__(self, instance, value):
        self.cfield.__set__(instance, value)


class _ABIStructType(type(ctypes.Structure)):
    """Metaclass of the mirrors: installs :class:`_StructSizeField` once ctypes has turned
    ``_fields_`` into field descriptors (at class creation, or when ``_fields_`` is set later
    for a self-referencing struct)."""

    def __init__(cls, name, bases, namespace):
        super().__init__(name, bases, namespace)
        cls._wrap_struct_size()

    def __setattr__(cls, name, value):
        super().__setattr__(name, value)
        if name == "_fields_":
            cls._wrap_struct_size()

    def _wrap_struct_size(cls):
        field = cls.__dict__.get("struct_size")
        if isinstance(field, _CField):
            super().__setattr__("struct_size", _StructSizeField(field))


class ABIStruct(ctypes.Structure, metaclass=_ABIStructType):
    """Base class of every mirror of a C struct in ``include/``.

    ``Mirror.struct_size()`` is the C ``*_STRUCT_SIZE``; ``instance.struct_size`` is the field.
    """

    _last_field_: ClassVar[Optional[str]] = None
    _first_version_last_field_: ClassVar[Optional[str]] = None
    _size_macro_: ClassVar[Optional[str]] = None
    _optional_: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def _cfield(cls, field_name: str):
        for klass in cls.__mro__:
            descriptor = klass.__dict__.get(field_name)
            if isinstance(descriptor, _StructSizeField):
                return descriptor.cfield
            if isinstance(descriptor, _CField):
                return descriptor
        raise AttributeError(f"{cls.__name__} has no field {field_name!r}")

    @classmethod
    def field_end(cls, field_name: str) -> int:
        """Offset just past ``field_name``: ``TF_OFFSET_OF_END(cls, field_name)``."""
        cfield = cls._cfield(field_name)
        return cfield.offset + cfield.size

    @classmethod
    def _struct_size_of_class(cls) -> int:
        return cls.field_end(cls._last_field_ or cls._fields_[-1][0])

    # Reached as ``Mirror.struct_size()`` through _StructSizeField for versioned structs, and
    # directly for the unversioned ones (TF_Buffer, ...), which have no such field.
    struct_size = _struct_size_of_class

    @classmethod
    def min_struct_size(cls) -> int:
        """Size of the struct's first published version; a smaller struct_size is invalid."""
        first = cls._first_version_last_field_
        return cls.field_end(first) if first else cls._struct_size_of_class()

    @classmethod
    def field_present(cls, field_name: str, struct_size: int) -> bool:
        """Whether ``field_name`` lies entirely within a struct of ``struct_size`` bytes."""
        return cls.field_end(field_name) <= struct_size

    @classmethod
    def callbacks(cls) -> tuple[str, ...]:
        """Names of the function-pointer fields, in declaration order."""
        return tuple(name for name, ctype in cls._fields_ if issubclass(ctype, _CFuncPtr))

    @classmethod
    def required_callbacks(cls) -> tuple[str, ...]:
        """The callbacks a plugin must set (NULL means the plugin is rejected)."""
        return tuple(name for name in cls.callbacks() if name not in cls._optional_)

    @classmethod
    def has_struct_size(cls) -> bool:
        """Whether the struct starts with the ``struct_size`` field (a versioned struct)."""
        return bool(getattr(cls, "_fields_", None)) and cls._fields_[0][0] == "struct_size"

    @classmethod
    def new(cls: type[_S], **fields) -> _S:
        """A zeroed instance with ``struct_size`` set to ``struct_size()``, then ``fields``."""
        # Computed once per class: hot paths (StreamExecutor.allocate) make a struct per call,
        # and the C field's own setter is several times cheaper than the attribute.
        cache = cls.__dict__.get("_new_cache_")
        if cache is None:
            cache = ((cls._struct_size_of_class(), cls._cfield("struct_size").__set__)
                     if cls.has_struct_size() else (0, None))
            cls._new_cache_ = cache
        instance = cls(**fields) if fields else cls()
        if cache[0] and "struct_size" not in fields:
            cache[1](instance, cache[0])
        return instance


# Plain-function spellings of the classmethods, for callers holding a class in a variable.
def struct_size(cls: type[ABIStruct]) -> int:
    """The C ``*_STRUCT_SIZE`` of mirror ``cls``."""
    return cls._struct_size_of_class()


def min_struct_size(cls: type[ABIStruct]) -> int:
    """The first published size of mirror ``cls``."""
    return cls.min_struct_size()


def field_present(cls: type[ABIStruct], field_name: str, size: int) -> bool:
    """Whether ``field_name`` of ``cls`` lies within ``size`` bytes."""
    return cls.field_present(field_name, size)
