"""Mirror of tensorflow/c/tf_buffer.h: TF_Buffer."""

from __future__ import annotations

import ctypes

from ._struct import ABIStruct

# void (*data_deallocator)(void* data, size_t length);
TF_Buffer_data_deallocator_fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t)


class TF_Buffer(ABIStruct):
    """Unversioned (no struct_size): its layout is frozen."""

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("length", ctypes.c_size_t),
        ("data_deallocator", TF_Buffer_data_deallocator_fn),
    ]
    _last_field_ = "data_deallocator"
    _optional_ = ("data_deallocator",)  # NULL: the buffer does not own `data`
