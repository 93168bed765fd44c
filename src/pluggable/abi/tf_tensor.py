"""Mirror of tensorflow/c/tf_tensor.h: TF_AllocatorAttributes and the TF_NewTensor
deallocator. TF_Tensor itself is opaque: a ``TF_Tensor*`` is a ``ctypes.c_void_p``."""

from __future__ import annotations

import ctypes

from ._struct import ABIStruct, TF_Bool

# void (*deallocator)(void* data, size_t len, void* arg)   -- parameter of TF_NewTensor
TF_NewTensor_deallocator_fn = ctypes.CFUNCTYPE(
    None, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p
)
# TensorFlow gives the type no name; this one is ours (Python only).
TF_TensorDeallocator = TF_NewTensor_deallocator_fn


class TF_AllocatorAttributes(ABIStruct):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("on_host", TF_Bool),
    ]
    _last_field_ = "on_host"
    _size_macro_ = "TF_ALLOCATOR_ATTRIBUTES_STRUCT_SIZE"


TF_ALLOCATOR_ATTRIBUTES_STRUCT_SIZE = TF_AllocatorAttributes.struct_size()
