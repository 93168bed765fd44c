"""Mirror of tensorflow/c/tf_tstring.h and the TF_TString layout of
tensorflow/core/platform/ctstring_internal.h (the element of TF_STRING tensors), plus
tensorflow/c/tf_attrtype.h's TF_AttrType."""

from __future__ import annotations

import enum
from ctypes import CFUNCTYPE, POINTER, Union, c_bool, c_char, c_size_t, c_ubyte, c_uint32, \
    c_void_p

from ._struct import ABIStruct


class TF_AttrType(enum.IntEnum):
    TF_ATTR_STRING = 0
    TF_ATTR_INT = 1
    TF_ATTR_FLOAT = 2
    TF_ATTR_BOOL = 3
    TF_ATTR_TYPE = 4
    TF_ATTR_SHAPE = 5
    TF_ATTR_TENSOR = 6
    TF_ATTR_PLACEHOLDER = 7
    TF_ATTR_FUNC = 8


class TF_TString_Type(enum.IntEnum):
    TF_TSTR_SMALL = 0x00
    TF_TSTR_LARGE = 0x01
    TF_TSTR_OFFSET = 0x02
    TF_TSTR_VIEW = 0x03
    TF_TSTR_TYPE_MASK = 0x03


TF_TString_SmallCapacity = 22
TSTRING_SIZE = 24

# void (*ref)(TStringOwnerCApi* self);  bool (*unref)(TStringOwnerCApi* self);
tstring_owner_ref_t = CFUNCTYPE(None, c_void_p)
tstring_owner_unref_t = CFUNCTYPE(c_bool, c_void_p)


class TStringOwnerCApi(ABIStruct):
    _fields_ = [("ref", tstring_owner_ref_t), ("unref", tstring_owner_unref_t),
                ("obj", c_void_p)]
    _last_field_ = "obj"


class TF_TString_Large(ABIStruct):
    _fields_ = [("size", c_size_t), ("cap", c_size_t), ("ptr", c_void_p)]
    _last_field_ = "ptr"


class TF_TString_Offset(ABIStruct):
    _fields_ = [("size", c_uint32), ("offset", c_uint32), ("count", c_uint32)]
    _last_field_ = "count"


class TF_TString_View(ABIStruct):
    _fields_ = [("size", c_size_t), ("ptr", c_void_p), ("owner_ref", POINTER(TStringOwnerCApi))]
    _last_field_ = "owner_ref"


class TF_TString_Raw(ABIStruct):
    _fields_ = [("raw", c_ubyte * TSTRING_SIZE)]
    _last_field_ = "raw"


class TF_TString_Small(ABIStruct):
    _fields_ = [("size", c_ubyte), ("str", c_char * (TF_TString_SmallCapacity + 1))]
    _last_field_ = "str"


class _TF_TString_u(Union):
    _fields_ = [("smll", TF_TString_Small), ("large", TF_TString_Large),
                ("offset", TF_TString_Offset), ("view", TF_TString_View),
                ("raw", TF_TString_Raw)]


class TF_TString(ABIStruct):
    """One element of a TF_STRING tensor: 24 bytes, read with the runtime's TF_String*
    functions (the two low bits of the first byte tell the form)."""

    _fields_ = [("u", _TF_TString_u)]
    _last_field_ = "u"


# Checked against the C compiler with the others; TF_TString itself (a struct around an
# anonymous union) is checked by size in tests/abi/test_layout.py.
STRUCTS = (TStringOwnerCApi, TF_TString_Large, TF_TString_Offset, TF_TString_View,
           TF_TString_Raw, TF_TString_Small)
