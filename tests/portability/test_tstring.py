"""TF_TString, the element of TF_STRING tensors, through the runtime's tf_tstring.h functions
and the ctypes mirror: the small, large and view forms with TensorFlow's encoding (type in the
two low bits of the first byte, size shifted left by two), copies, views and release."""
from __future__ import annotations

import ctypes

import pytest

from pluggable.base import native as _native
from pluggable.abi.tf_tstring import TF_TString, TF_TString_SmallCapacity, TF_TString_Type

_TS = ctypes.POINTER(TF_TString)
_fns = _native.bind(_native.lib, {
    "TF_StringInit": (None, (_TS,)),
    "TF_StringCopy": (None, (_TS, ctypes.c_char_p, ctypes.c_size_t)),
    "TF_StringAssignView": (None, (_TS, ctypes.c_char_p, ctypes.c_size_t)),
    "TF_StringGetDataPointer": (ctypes.c_void_p, (_TS,)),
    "TF_StringGetType": (ctypes.c_int, (_TS,)),
    "TF_StringGetSize": (ctypes.c_size_t, (_TS,)),
    "TF_StringGetCapacity": (ctypes.c_size_t, (_TS,)),
    "TF_StringDealloc": (None, (_TS,)),
})


@pytest.fixture
def s():
    value = TF_TString()
    _fns["TF_StringInit"](ctypes.byref(value))
    yield value
    _fns["TF_StringDealloc"](ctypes.byref(value))


def read(value) -> bytes:
    size = _fns["TF_StringGetSize"](ctypes.byref(value))
    return ctypes.string_at(_fns["TF_StringGetDataPointer"](ctypes.byref(value)), size)


def test_an_initialised_string_is_small_and_empty(s):
    assert bytes(s.u.raw.raw) == bytes(24)
    assert _fns["TF_StringGetType"](ctypes.byref(s)) == TF_TString_Type.TF_TSTR_SMALL
    assert _fns["TF_StringGetSize"](ctypes.byref(s)) == 0
    assert _fns["TF_StringGetCapacity"](ctypes.byref(s)) == TF_TString_SmallCapacity == 22


def test_short_copies_are_inline(s):
    _fns["TF_StringCopy"](ctypes.byref(s), b"pluggable", 9)
    assert _fns["TF_StringGetType"](ctypes.byref(s)) == TF_TString_Type.TF_TSTR_SMALL
    assert s.u.smll.size == 9 << 2 and s.u.smll.str == b"pluggable"
    assert read(s) == b"pluggable"


def test_long_copies_are_on_the_heap_with_16_byte_capacity_steps(s):
    text = b"x" * 40
    _fns["TF_StringCopy"](ctypes.byref(s), text, len(text))
    assert _fns["TF_StringGetType"](ctypes.byref(s)) == TF_TString_Type.TF_TSTR_LARGE
    assert s.u.large.size == (40 << 2) | 1 and s.u.large.cap == 47
    assert _fns["TF_StringGetCapacity"](ctypes.byref(s)) == 47
    assert read(s) == text
    _fns["TF_StringCopy"](ctypes.byref(s), b"short", 5)  # back to the inline form
    assert _fns["TF_StringGetType"](ctypes.byref(s)) == TF_TString_Type.TF_TSTR_SMALL
    assert read(s) == b"short"


def test_views_borrow_and_dealloc_empties(s):
    text = ctypes.create_string_buffer(b"borrowed bytes, not copied")
    _fns["TF_StringAssignView"](ctypes.byref(s), text, 8)
    assert _fns["TF_StringGetType"](ctypes.byref(s)) == TF_TString_Type.TF_TSTR_VIEW
    assert _fns["TF_StringGetDataPointer"](ctypes.byref(s)) == ctypes.addressof(text)
    assert _fns["TF_StringGetCapacity"](ctypes.byref(s)) == 0
    assert read(s) == b"borrowed"
    _fns["TF_StringCopy"](ctypes.byref(s), b"y" * 30, 30)
    _fns["TF_StringDealloc"](ctypes.byref(s))
    assert bytes(s.u.raw.raw) == bytes(24) and read(s) == b""
