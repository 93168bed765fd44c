"""Mirror of tensorflow/c/kernels.h: the structs it defines and the function-pointer types
of the kernel API.

The kernel builder's callbacks are parameters of ``TF_NewKernelBuilder`` /
``TF_NewAsyncKernelBuilder``, so their types are named ``<function>_<parameter>_fn``
(without the C ``_func`` suffix). Host objects (TF_OpKernelContext*, TF_Tensor*, ...) are
``c_void_p``.
"""

from __future__ import annotations

from ctypes import CFUNCTYPE, POINTER, c_bool, c_int, c_int32, c_size_t, c_uint32, c_void_p

from ._struct import ABIStruct

# void* (*create_func)(TF_OpKernelConstruction*);
TF_NewKernelBuilder_create_fn = CFUNCTYPE(c_void_p, c_void_p)
# void (*compute_func)(void*, TF_OpKernelContext*);
TF_NewKernelBuilder_compute_fn = CFUNCTYPE(None, c_void_p, c_void_p)
# void (*delete_func)(void*);
TF_NewKernelBuilder_delete_fn = CFUNCTYPE(None, c_void_p)
# void (*compute_async_func)(void*, TF_OpKernelContext*, TF_AsyncOpKernelDoneCallback* done);
TF_NewAsyncKernelBuilder_compute_async_fn = CFUNCTYPE(None, c_void_p, c_void_p, c_void_p)
# void TF_InitKernel(void);
TF_InitKernel_fn = CFUNCTYPE(None)


class TF_StringView(ABIStruct):
    """From c_api.h; returned by value. `data` is not NUL-terminated: read `len` bytes."""

    _fields_ = [
        ("data", c_void_p),
        ("len", c_size_t),
    ]
    _last_field_ = "len"


class TF_InputRange_Args(ABIStruct):
    _fields_ = [
        ("struct_size", c_size_t),
        ("priv", c_void_p),
        ("start", c_int),
        ("stop", c_int),
        ("status", c_void_p),
    ]
    _last_field_ = "status"
    # A `const size_t` object in C++, a macro in C (see kernels.h).
    _size_macro_ = "TF_InputRange_Args_STRUCT_SIZE"


TF_InputRange_Args_STRUCT_SIZE = TF_InputRange_Args.struct_size()


# --- rendezvous types (tf_rendezvous_c_api.h), for TF_GetRendezvous ------------------------
class TFDevice_AllocatorAttributes(ABIStruct):
    _fields_ = [
        ("value", c_uint32),
        ("scope_id", c_int32),
    ]
    _last_field_ = "scope_id"


class TF_RendezvousArgsStruct(ABIStruct):
    _fields_ = [
        ("device_context", c_void_p),
        ("alloc_attrs", TFDevice_AllocatorAttributes),
        ("cancellation_manager", c_void_p),
    ]
    _last_field_ = "cancellation_manager"


class TF_RendezvousParsedKey(ABIStruct):
    _fields_ = [
        ("full_key", c_void_p),  # char*
        ("full_key_size", c_uint32),
    ]
    _last_field_ = "full_key_size"


class TF_RendezvousSend_Params(ABIStruct):
    _fields_ = [
        ("key", POINTER(TF_RendezvousParsedKey)),
        ("args", POINTER(TF_RendezvousArgsStruct)),
        ("tensor", c_void_p),
        ("is_dead", c_bool),
        ("status", c_void_p),
    ]
    _last_field_ = "status"


# typedef void (*TF_RendezvousSend_Function)(void*, TF_RendezvousSend_Params*);
TF_RendezvousSend_Function = CFUNCTYPE(None, c_void_p, c_void_p)


class TF_RendezvousDoneCallback_Params(ABIStruct):
    _fields_ = [
        ("context", c_void_p),
        ("status", c_void_p),
        ("tensor", c_void_p),
        ("is_dead", c_bool),
    ]
    _last_field_ = "is_dead"


# typedef void (*TF_RendezvousDoneCallback_Function)(void*, TF_RendezvousDoneCallback_Params*);
TF_RendezvousDoneCallback_Function = CFUNCTYPE(None, c_void_p, c_void_p)


class TF_RendezvousDoneCallbackImpl(ABIStruct):
    _fields_ = [
        ("context", c_void_p),
        ("callback", TF_RendezvousDoneCallback_Function),
    ]
    _last_field_ = "callback"


class TF_RendezvousAsyncRecv_Params(ABIStruct):
    _fields_ = [
        ("context", c_void_p),
        ("key", POINTER(TF_RendezvousParsedKey)),
        ("args", POINTER(TF_RendezvousArgsStruct)),
        ("on_done", TF_RendezvousDoneCallbackImpl),
    ]
    _last_field_ = "on_done"


# typedef void (*TF_RendezvousAsyncRecv_Function)(void*, TF_RendezvousAsyncRecv_Params*);
TF_RendezvousAsyncRecv_Function = CFUNCTYPE(None, c_void_p, c_void_p)
# typedef void (*TF_RendezvousStartAbort_Function)(void* context, const TF_Status*);
TF_RendezvousStartAbort_Function = CFUNCTYPE(None, c_void_p, c_void_p)


class TF_RendezvousThunk(ABIStruct):
    _fields_ = [
        ("rendezvous", c_void_p),
        ("send_func", TF_RendezvousSend_Function),
        ("async_recv_func", TF_RendezvousAsyncRecv_Function),
        ("start_abort_func", TF_RendezvousStartAbort_Function),
    ]
    _last_field_ = "start_abort_func"


STRUCTS = (
    TF_StringView,
    TF_InputRange_Args,
    TFDevice_AllocatorAttributes,
    TF_RendezvousArgsStruct,
    TF_RendezvousParsedKey,
    TF_RendezvousSend_Params,
    TF_RendezvousDoneCallback_Params,
    TF_RendezvousDoneCallbackImpl,
    TF_RendezvousAsyncRecv_Params,
    TF_RendezvousThunk,
)
