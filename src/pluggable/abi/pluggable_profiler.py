"""Mirror of tensorflow/c/experimental/pluggable_profiler/pluggable_profiler.h.

Same conventions as stream_executor.py: pointer arguments of callbacks are ``c_void_p``,
function-pointer types are named ``<Struct>_<field>_fn``, ``const char*`` fields are
``c_void_p``.
"""

from __future__ import annotations

from ctypes import CFUNCTYPE, POINTER, c_int32, c_size_t, c_void_p

from ._struct import ABIStruct

TP_MAJOR = 0
TP_MINOR = 0
TP_PATCH = 1


class TP_Profiler(ABIStruct):
    _fields_ = [
        ("struct_size", c_size_t),
        ("ext", c_void_p),
        ("device_type", c_void_p),  # const char*
    ]
    _last_field_ = "device_type"
    _size_macro_ = "TP_PROFILER_STRUCT_SIZE"


# void (*start)(const TP_Profiler* profiler, TF_Status* status);
TP_ProfilerFns_start_fn = CFUNCTYPE(None, c_void_p, c_void_p)
# void (*stop)(const TP_Profiler* profiler, TF_Status* status);
TP_ProfilerFns_stop_fn = CFUNCTYPE(None, c_void_p, c_void_p)
# void (*collect_data_xspace)(const TP_Profiler* profiler, uint8_t* buffer,
#                             size_t* size_in_bytes, TF_Status* status);
TP_ProfilerFns_collect_data_xspace_fn = CFUNCTYPE(None, c_void_p, c_void_p, c_void_p, c_void_p)


class TP_ProfilerFns(ABIStruct):
    _fields_ = [
        ("struct_size", c_size_t),
        ("ext", c_void_p),
        ("start", TP_ProfilerFns_start_fn),
        ("stop", TP_ProfilerFns_stop_fn),
        ("collect_data_xspace", TP_ProfilerFns_collect_data_xspace_fn),
    ]
    _last_field_ = "collect_data_xspace"
    _size_macro_ = "TP_PROFILER_FNS_STRUCT_SIZE"


# void (*destroy_profiler)(TP_Profiler* profiler);
TF_ProfilerRegistrationParams_destroy_profiler_fn = CFUNCTYPE(None, c_void_p)
# void (*destroy_profiler_fns)(TP_ProfilerFns* profiler_fns);
TF_ProfilerRegistrationParams_destroy_profiler_fns_fn = CFUNCTYPE(None, c_void_p)


class TF_ProfilerRegistrationParams(ABIStruct):
    _fields_ = [
        ("struct_size", c_size_t),
        ("ext", c_void_p),
        ("major_version", c_int32),
        ("minor_version", c_int32),
        ("patch_version", c_int32),
        ("profiler", POINTER(TP_Profiler)),
        ("profiler_fns", POINTER(TP_ProfilerFns)),
        ("destroy_profiler", TF_ProfilerRegistrationParams_destroy_profiler_fn),
        ("destroy_profiler_fns", TF_ProfilerRegistrationParams_destroy_profiler_fns_fn),
    ]
    _last_field_ = "destroy_profiler_fns"
    _optional_ = ("destroy_profiler", "destroy_profiler_fns")  # TensorFlow requires both
    _size_macro_ = "TF_PROFILER_REGISTRATION_PARAMS_STRUCT_SIZE"


# void TF_InitProfiler(TF_ProfilerRegistrationParams* params, TF_Status* status);
TF_InitProfiler_fn = CFUNCTYPE(None, c_void_p, c_void_p)

TP_PROFILER_STRUCT_SIZE = TP_Profiler.struct_size()
TP_PROFILER_FNS_STRUCT_SIZE = TP_ProfilerFns.struct_size()
TF_PROFILER_REGISTRATION_PARAMS_STRUCT_SIZE = TF_ProfilerRegistrationParams.struct_size()

STRUCTS = (TP_Profiler, TP_ProfilerFns, TF_ProfilerRegistrationParams)
